"""A paragraph's content as marked items (texts, tags, atoms), turned into the running text the
model reads (documents/inline.py's Run) with private-use tokens for markup, and the tokens of its
translation read back. Shared by the XML formats that keep formatting on elements: Office Open XML
(documents/ooxml.py) and OpenDocument (documents/odf.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lxml import etree

from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.inline import Atom, Run, Tag, translate_runs
from mt_cli.documents.protect import Protector

# Tokens the translated text is written with: a tag opening, closing, an atom; private-use
# characters, taken out of the text itself.
OPEN, CLOSE, ATOM, END = "\ue000", "\ue001", "\ue002", "\ue003"
_TOKEN = re.compile(f"([{OPEN}{CLOSE}{ATOM}])(\\d+){END}")
_PRIVATE = re.compile(f"[{OPEN}{CLOSE}{ATOM}{END}]")
# (the run it came from, or None: a whole element; the element)
Part = tuple[etree._Element | None, etree._Element]


@dataclass
class Layout:
    """How to write a paragraph back: what stays first and last, the tags' and atoms' elements."""

    paragraph: etree._Element
    first: list[etree._Element]
    last: list[etree._Element]
    base: etree._Element | None  # the base run properties
    # ("format"|"container", element)
    tags: list[tuple[str, etree._Element | None]] = field(default_factory=list)
    # (run, part)
    atoms: list[list[tuple[etree._Element | None, etree._Element]]] = field(default_factory=list)
    # its text stood in the paragraph without runs (and has no tags): written so again
    bare: bool = False
    # kept first
    prefix: list[tuple[etree._Element | None, etree._Element]] = field(default_factory=list)
    # kept last
    suffix: list[tuple[etree._Element | None, etree._Element]] = field(default_factory=list)


@dataclass
class Item:
    kind: str  # text, atom, anchor, open, close
    text: str = ""
    props: etree._Element | None = None  # a text's run properties
    # an atom's
    parts: list[tuple[etree._Element | None, etree._Element]] = field(default_factory=list)
    element: etree._Element | None = None  # an anchor, or the container opened
    depth: int = 0  # containers around it


def escape(text: str) -> str:
    return _PRIVATE.sub("", text)


def key(props: etree._Element | None) -> bytes:
    return b"" if props is None else etree.tostring(props, method="c14n")


def parts(item: Item) -> list[tuple[etree._Element | None, etree._Element]]:
    """An atom's or anchor's parts: (the run it came from, or None for a whole element; the
    element)."""
    return [(None, item.element)] if item.element is not None else item.parts


def as_run(items: list[Item], layout: Layout, base: bytes) -> Run:
    """The items as a Run: containers and stretches of other properties as tags, the rest atoms."""
    text, tags, atoms = "", [], []
    opened: list[tuple[int, int, int]] = []  # containers: (tag index, start, order)
    stretch: tuple[int, int, int, bytes] | None = None  # (tag index, start, order, key)

    def end_stretch(order: int) -> None:
        nonlocal stretch
        if stretch is not None:
            k, start, o, _ = stretch
            tags.append(
                (o, Tag(start, len(text), f"{OPEN}{k}{END}", f"{CLOSE}{k}{END}", (o, order)))
            )
            stretch = None

    for order, item in enumerate(items):
        if item.kind == "text":
            mine = key(item.props)
            if stretch is not None and stretch[3] != mine:
                end_stretch(order)
            if mine != base and stretch is None:
                layout.tags.append(("format", item.props))
                stretch = (len(layout.tags) - 1, len(text), order, mine)
            text += item.text
        elif item.kind == "open":
            end_stretch(order)
            layout.tags.append(("container", item.element))
            opened.append((len(layout.tags) - 1, len(text), order))
        elif item.kind == "close":
            end_stretch(order)
            k, start, o = opened.pop()
            tags.append(
                (o, Tag(start, len(text), f"{OPEN}{k}{END}", f"{CLOSE}{k}{END}", (o, order)))
            )
        else:
            layout.atoms.append(parts(item))
            atoms.append(Atom(len(text), f"{ATOM}{len(layout.atoms) - 1}{END}", order))
    end_stretch(len(items))
    return Run(text, [t for _, t in sorted(tags, key=lambda x: x[0])], atoms)


def edges(items: list[Item]) -> tuple[list[Part], list[Part], list[Item]]:
    """Atoms and anchors before the first text and after the last, outside any tag (kept there,
    not carried through the model), and the items between."""
    first = next(k for k, i in enumerate(items) if i.kind == "text")
    last = max(k for k, i in enumerate(items) if i.kind == "text")
    head = [i for i in items[:first] if i.depth == 0 and i.kind in ("atom", "anchor")]
    tail = [i for i in items[last + 1 :] if i.depth == 0 and i.kind in ("atom", "anchor")]
    edge = {id(i) for i in head + tail}
    return (
        [e for i in head for e in parts(i)],
        [e for i in tail for e in parts(i)],
        [i for i in items if id(i) not in edge],
    )


def translate_read(
    engine: AlignedTranslator,
    read: list[tuple[Run, Layout]],
    write: Callable[[Layout, str], None],
    lang: str,
    protector: Protector | None,
) -> None:
    """The paragraphs read (each as a run and its layout) translated in one batch, each written
    back by `write` from its translation's tokens."""
    if read:
        for (_, layout), text in zip(
            read, translate_runs(engine, [run for run, _ in read], lang, protector, escape)
        ):
            write(layout, text)


def tokens(out: str) -> Iterator[tuple[str, str | int]]:
    """A translation written with tokens, in order: ("text", str), (OPEN|CLOSE|ATOM, index)."""
    pos = 0
    for m in _TOKEN.finditer(out):
        if m.start() > pos:
            yield "text", out[pos : m.start()]
        pos = m.end()
        yield m.group(1), int(m.group(2))
    if pos < len(out):
        yield "text", out[pos:]


def plain(out: str) -> str:
    return _TOKEN.sub("", out)
