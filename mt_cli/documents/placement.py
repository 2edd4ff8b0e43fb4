"""Where a unit's tags and placeholders go in its translation: each tag around the target words
whose pieces attend most to the source words it covered (widened to whole words, kept inside its
parent and off its siblings), each placeholder the model dropped put back where the alignment
points, and the translation written out with them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mt_cli.documents.aligned import Aligned
from mt_cli.documents.protect import marker_regex

if TYPE_CHECKING:  # inline.py calls this module; its types are only types here
    from mt_cli.documents.inline import Tag, Unit


# (target piece span, source span it attends to most)
Links = list[tuple[tuple[int, int], tuple[int, int]]]


@dataclass
class _Node:
    """A tag placed in a translation: its target range, its source range, what is inside it."""

    tag: Tag | None  # None: the whole translation
    s: int
    e: int
    src: tuple[int, int]  # its range in the masked source
    children: list[_Node] = field(default_factory=list)
    atoms: list[tuple[int, str]] = field(default_factory=list)  # (target position, markup)


def place(u: Unit, aligned: Aligned, escape: Callable[[str], str]) -> str:
    """One unit's translation written out: each placeholder replaced by what it stands for (put in
    where the alignment says when the model dropped it), each tag around the words it covers and
    the placeholders it held."""
    text, links = aligned.text, list(zip(aligned.tgt_spans[:-1], aligned.src_spans[:-1]))
    deleted: set[int] = set()
    found: dict[int, tuple[int, int]] = {}  # placeholder k -> where the model wrote it
    for k, marker in enumerate(u.masked.markers):
        hits = list(marker_regex(marker).finditer(text))
        for m in hits[1:]:  # the model repeated it: written once
            deleted.update(range(m.start(), m.end()))
        if hits:
            found[k] = hits[0].span()
            deleted.update(range(*hits[0].span()))
            _unspaced(text, found[k], u.glued[k], deleted)
    root = _Node(None, 0, len(text), (0, len(u.masked.text)))
    nodes = _ranges(u, links, text, root, found)
    for k, raw in enumerate(u.raws):
        if k in found:
            _innermost(nodes, *found[k]).atoms.append((found[k][0], raw))
            continue
        source_at = u.marker_src[k][0]
        at = _where(source_at, links, text, u.masked.where[k])
        # The deepest tag that held it in the source takes it back, at its nearer edge if need be;
        # a tag that did not hold it does not.
        holder = next(
            n for n in reversed(nodes) if n.src[0] <= source_at < n.src[1] or n.tag is None
        )
        at = at if holder.s <= at <= holder.e else (holder.s if at < holder.s else holder.e)
        node = _innermost(nodes, at, at)
        while (
            node is not holder
            and node.tag is not None
            and not node.src[0] <= source_at < node.src[1]
        ):
            at = node.s if at - node.s <= node.e - at else node.e
            node = _innermost(nodes, at, at)
        pad = (
            raw + " " if at < len(text) else (" " if text and not text[-1].isspace() else "") + raw
        )
        node.atoms.append((at, pad))
    return _emit(root, text, deleted, escape)


def _unspaced(
    text: str, span: tuple[int, int], glued: tuple[bool, bool], deleted: set[int]
) -> None:
    """The spaces the placeholder of an atom that touched a word in the source took on either
    side (a footnote mark after a full stop, a tab or break right after a sentence) taken out."""
    i, j = span[0] - 1, span[1]
    while glued[0] and i >= 0 and text[i] == " ":
        deleted.add(i)
        i -= 1
    while glued[1] and j < len(text) and text[j] == " ":
        deleted.add(j)
        j += 1


def _innermost(nodes: list[_Node], start: int, end: int) -> _Node:
    """The deepest node holding target [start, end) (a point, start == end, strictly inside it);
    nodes come parent first, and the root holds all."""
    inside = (
        (lambda n: n.s < start < n.e) if start == end else (lambda n: n.s <= start and end <= n.e)
    )
    return next(n for n in reversed(nodes) if n.tag is None or inside(n))


def _emit(node: _Node, text: str, deleted: set[int], escape: Callable[[str], str]) -> str:
    """A node written out: its text, its atoms where they go and its children, each wrapped in its
    tag; an atom at a child's start goes before the child."""
    out, pos = [], node.s
    atoms = sorted(node.atoms, key=lambda a: a[0])

    def upto(end: int, inclusive: bool) -> None:
        nonlocal pos, atoms
        for i in range(pos, end + 1):
            while atoms and atoms[0][0] == i and (i < end or inclusive):
                out.append(atoms.pop(0)[1])
            if i < end and i not in deleted:
                out.append(escape(text[i]))
        pos = max(pos, end)

    for child in sorted(node.children, key=lambda c: (c.s, c.e)):
        upto(child.s, True)
        assert child.tag is not None
        out.append(child.tag.open + _emit(child, text, deleted, escape) + child.tag.close)
        pos = child.e
    upto(node.e, True)
    return "".join(out)


def _where(a: int, links: Links, text: str, share: float) -> int:
    """The target position for source position a (a placeholder the model dropped): the start of the
    word of the first target piece attending to it, else the word boundary `share` of the way in."""
    for (ts, _te), (ss, se) in links:
        if ss <= a < max(se, ss + 1):
            return _word_start(text, ts)
    bounds = [0] + [m.end() for m in re.finditer(r"\s+", text)] + [len(text)]
    return min(bounds, key=lambda x: abs(x - share * len(text)))


def _word_start(text: str, i: int) -> int:
    while i > 0 and text[i - 1].isalnum():
        i -= 1
    return i


def _word_end(text: str, i: int) -> int:
    while i < len(text) and text[i].isalnum():
        i += 1
    return i


def _ranges(
    u: Unit, links: Links, text: str, root: _Node, found: dict[int, tuple[int, int]]
) -> list[_Node]:
    """Each tag as a node with its target range: the words its source words' pieces align to and the
    placeholders it held, inside its parent's range and off its siblings'. Parents come first."""
    nodes = [root]
    for tag in u.tags:
        a, b = u.tag_src[id(tag)]
        s, e = _aligned_range(a, b, links, text, u.masked.text)
        for k, (m0, m1) in found.items():  # a placeholder it held, where the model wrote it
            ms, me = u.marker_src[k]
            if a <= ms and me <= b:
                s, e = (m0, m1) if s == e and not text[s:e] else (min(s, m0), max(e, m1))
        # Tags come parent first, so the last one containing this tag is its parent.
        parent = next(n for n in reversed(nodes) if n.tag is None or _contains(n.tag, tag))
        s, e = min(max(s, parent.s), parent.e), max(min(e, parent.e), parent.s)
        for other in parent.children:
            if s < other.e and e > other.s:  # overlaps a sibling: keep its longer side
                s, e = (
                    (s, min(e, other.s))
                    if min(e, other.s) - s >= e - max(s, other.e)
                    else (max(s, other.e), e)
                )
            elif s == e and other.s < s < other.e:
                s = e = other.e
        node = _Node(tag, s, max(s, e), (a, b))
        parent.children.append(node)
        nodes.append(node)
    return nodes


def _contains(outer: Tag, inner: Tag) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end and outer.order[0] < inner.order[0]


def _aligned_range(a: int, b: int, links: Links, text: str, source: str) -> tuple[int, int]:
    """The target words whose pieces attend to source [a, b); all of it for a tag over the whole
    source; in proportion when no piece attends there. An empty tag stays empty: after the word
    aligned to the one before it."""
    if a == b:
        before = [te for (_, te), (ss, se) in links if ss < a <= se]
        at = (
            _word_end(text, max(before))
            if before
            else _where(a, links, text, a / max(len(source), 1))
        )
        return at, at
    if not source[:a].strip() and not source[b:].strip():
        return 0, len(text)
    hit = [(ts, te) for (ts, te), (ss, se) in links if ss < b and se > a and te > ts]
    if hit:
        return _word_start(text, min(s for s, _ in hit)), _word_end(text, max(e for _, e in hit))
    n = max(len(source), 1)
    return _word_start(text, a * len(text) // n), _word_end(text, b * len(text) // n)
