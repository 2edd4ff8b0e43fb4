"""Paragraphs of runs (Office Open XML: Word's w:p of w:r, PowerPoint's a:p of a:r, Excel's rich
shared strings): each paragraph is translated as one running text whose formatting is put back by
alignment, as HTML's inline tags are (documents/inline.py).

A paragraph's runs each carry their properties (rPr: bold, italic, colour, font, size, ... as a
whole). The properties that cover most of the paragraph's characters are its base; every stretch
of runs with other properties becomes a tag over its characters, and a hyperlink (or a tracked
insertion) a tag around the tags inside it. The translation is written back as one run per
stretch of target text under the same tags, so a bold word's translation is bold, and every
property of the source is on some run of the translation.

What is not text travels whole, as an atom at its place (a placeholder through the model): tabs,
breaks, images, footnote references, fields (a page number, a table of contents: from the field's
begin to its end, results included), simple fields, deleted text of tracked changes, content
controls, equations, runs in a code style. Bookmarks and comment ranges at a paragraph's start or
end stay there. Proofing marks and Word's last-rendered page breaks are dropped: Word makes them
again.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lxml import etree

from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.inline import Run
from mt_cli.documents.marked import (
    ATOM,
    OPEN,
    Item,
    Layout,
    as_run,
    edges,
    key,
    plain,
    tokens,
    translate_read,
)
from mt_cli.documents.protect import Protector

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
MONOSPACE = ("courier", "consolas", "menlo", "monaco", "mono", "lucida console", "source code")


@dataclass(frozen=True)
class Dialect:
    """The element names of one vocabulary (Clark notation: {namespace}name)."""

    paragraph: str
    run: str
    properties: str  # a run's properties
    text: str
    first: frozenset[str]  # a paragraph's children kept first (its own properties)
    last: frozenset[str]  # and last (DrawingML's end-of-paragraph properties)
    containers: frozenset[str]  # wrap runs: a tag around their text
    anchors: frozenset[str]  # zero-width marks
    dropped: frozenset[str]  # dropped wherever they are
    space: bool  # whether text elements need xml:space="preserve" to keep edge spaces


def _names(ns: str, words: str) -> frozenset[str]:
    return frozenset(f"{{{ns}}}{w}" for w in words.split())


WORD = Dialect(
    f"{{{W}}}p",
    f"{{{W}}}r",
    f"{{{W}}}rPr",
    f"{{{W}}}t",
    _names(W, "pPr"),
    frozenset(),
    _names(W, "hyperlink ins smartTag customXml dir bdo"),
    _names(W, "bookmarkStart bookmarkEnd commentRangeStart commentRangeEnd permStart permEnd"),
    _names(W, "proofErr lastRenderedPageBreak"),
    True,
)
DRAWING = Dialect(
    f"{{{A}}}p",
    f"{{{A}}}r",
    f"{{{A}}}rPr",
    f"{{{A}}}t",
    _names(A, "pPr"),
    _names(A, "endParaRPr"),
    frozenset(),
    frozenset(),
    frozenset(),
    False,
)
# Excel's shared strings (si) and inline strings (is): plain text, or runs of rich text.
SHEET = Dialect(
    f"{{{S}}}si",
    f"{{{S}}}r",
    f"{{{S}}}rPr",
    f"{{{S}}}t",
    frozenset(),
    _names(S, "rPh phoneticPr"),
    frozenset(),
    frozenset(),
    frozenset(),
    True,
)
INLINE_SHEET = dataclasses.replace(SHEET, paragraph=f"{{{S}}}is")


def translate_paragraphs(
    engine: AlignedTranslator,
    paragraphs: Sequence[etree._Element],
    dialect: Dialect,
    lang: str,
    protector: Protector | None,
) -> None:
    """Translate the paragraphs in place (those with text; the others are left as they are)."""
    read = [r for r in (_read(p, dialect) for p in paragraphs) if r is not None]
    translate_read(
        engine, read, lambda layout, text: _write(layout, text, dialect), lang, protector
    )


def _code(props: etree._Element | None) -> bool:
    """Runs in a code style or a monospace font are never translated."""
    if props is None:
        return False
    for child in props:
        name = etree.QName(child).localname
        values = " ".join(str(v) for v in child.attrib.values()).lower()
        if (
            name == "rStyle"
            and "code" in values
            or name in ("rFonts", "latin", "rFont")
            and any(m in values for m in MONOSPACE)
        ):
            return True
    return False


def _items(p: etree._Element, d: Dialect) -> list[Item]:
    """The paragraph's content in order, flattened: texts with their properties, atoms, anchors,
    containers opening and closing. A field, from its begin to its end, is one atom."""
    items: list[Item] = []
    field_parts: list[tuple[etree._Element | None, etree._Element]] = []
    depth = [0]  # fields open

    def walk(node: etree._Element, containers: int) -> None:
        for child in node:
            tag = child.tag
            if (
                not isinstance(tag, str)
                or tag in d.dropped
                or (node is p and (tag in d.first or tag in d.last))
            ):
                continue
            if tag == d.run:
                run(child, containers)
            elif tag == d.text and node is p:  # a shared string's text without runs
                items.append(Item("text", child.text or "", None, depth=containers))
            elif depth[0]:
                field_parts.append((None, child))
            elif tag in d.containers and _has_text(child, d):
                items.append(Item("open", element=child, depth=containers))
                walk(child, containers + 1)
                items.append(Item("close", depth=containers))
            elif tag in d.anchors:
                items.append(Item("anchor", element=child, depth=containers))
            else:
                items.append(Item("atom", parts=[(None, child)], depth=containers))

    def run(r: etree._Element, containers: int) -> None:
        props = r.find(d.properties)
        if _code(props):
            items.append(Item("atom", parts=[(None, r)], depth=containers))
            return
        for part in r:
            if not isinstance(part.tag, str) or part is props or part.tag in d.dropped:
                continue
            kind = part.get(f"{{{W}}}fldCharType") if part.tag == f"{{{W}}}fldChar" else None
            if kind == "begin":
                depth[0] += 1
            if depth[0]:
                field_parts.append((r, part))
                if kind == "end":
                    depth[0] -= 1
                    if not depth[0]:
                        items.append(Item("atom", parts=list(field_parts), depth=containers))
                        field_parts.clear()
            elif part.tag == d.text:
                items.append(Item("text", part.text or "", props, depth=containers))
            else:
                items.append(Item("atom", parts=[(r, part)], depth=containers))

    walk(p, 0)
    if field_parts:  # a field that runs on past the paragraph (a table of contents): kept whole
        items.append(Item("atom", parts=field_parts))
    return items


def _has_text(node: etree._Element, d: Dialect) -> bool:
    return any((t.text or "").strip() for t in node.iter(d.text))


def _read(p: etree._Element, d: Dialect) -> tuple[Run, Layout] | None:
    """The paragraph as a run to translate and what writes it back; None when it has no text."""
    items = _items(p, d)
    texts = [i for i in items if i.kind == "text"]
    if not any(i.text.strip() for i in texts):
        return None
    weight: Counter[bytes] = Counter()
    props_of: dict[bytes, etree._Element | None] = {}
    for i in texts:
        weight[key(i.props)] += len(i.text)
        props_of[key(i.props)] = i.props
    base = max(weight, key=lambda k: weight[k])
    layout = Layout(
        p, [c for c in p if c.tag in d.first], [c for c in p if c.tag in d.last], props_of[base]
    )
    layout.bare = p.find(d.text) is not None and p.find(d.run) is None
    layout.prefix, layout.suffix, inner = edges(items)
    return as_run(inner, layout, base), layout


def _write(layout: Layout, out: str, d: Dialect) -> None:
    """The paragraph's children replaced: its first ones, the translation as runs under its tags
    and with its atoms, its last ones."""
    p = layout.paragraph
    for child in list(p):
        p.remove(child)
    for child in layout.first:
        p.append(child)
    for run, part in layout.prefix:
        p.append(part if run is None else _wrapped(run, part, d))
    parents, formats = [p], [layout.base]
    if layout.bare and not layout.tags and not layout.atoms:
        _text(p, plain(out), None, d, bare=True)
        out = ""
    for kind, value in tokens(out):
        if kind == "text":
            _text(parents[-1], str(value), formats[-1], d)
            continue
        k = int(value)
        if kind == ATOM:
            for run, part in layout.atoms[k]:
                parents[-1].append(part if run is None else _wrapped(run, part, d))
        elif kind == OPEN and layout.tags[k][0] == "container":
            element = layout.tags[k][1]
            assert element is not None
            parents.append(etree.SubElement(parents[-1], element.tag, dict(element.attrib)))
        elif kind == OPEN:
            formats.append(layout.tags[k][1])
        elif layout.tags[k][0] == "container":
            parents.pop()
        else:
            formats.pop()
    for run, part in layout.suffix:
        p.append(part if run is None else _wrapped(run, part, d))
    for child in layout.last:
        p.append(child)


def _text(
    parent: etree._Element, text: str, props: etree._Element | None, d: Dialect, bare: bool = False
) -> None:
    if not text:
        return
    run = parent if bare else etree.SubElement(parent, d.run)
    if props is not None:
        run.append(copy.deepcopy(props))
    t = etree.SubElement(run, d.text)
    t.text = text
    if d.space and text != text.strip():
        t.set(XML_SPACE, "preserve")


def _wrapped(run: etree._Element, part: etree._Element, d: Dialect) -> etree._Element:
    """A part of a run (a tab, an image, a field's piece) in a run of its own with the run's
    properties."""
    shell = etree.Element(run.tag, dict(run.attrib))
    props = run.find(d.properties)
    if props is not None:
        shell.append(copy.deepcopy(props))
    shell.append(part)
    return shell
