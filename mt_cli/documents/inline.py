"""Running text with inline markup (HTML's <b>, <a href>, <span>; Markdown's emphasis and links):
the text is translated sentence by sentence and each tag is put back around the target words it
covers, found with the model's own source-target alignment, as bergamot-translator does.

A run is plain text (what the model reads) with tags over character ranges and atoms (markup that
is never translated: <img>, <code>...</code>, a protected URL) at positions. Sentences are joined
where a tag starts or ends inside one and runs past it, so no tag is cut. Atoms and protected
spans travel through the model as placeholders (documents/protect.py); tags are placed by
alignment: a tag goes around the target words whose pieces attend most to the source words it
covered, widened to whole words, kept inside its parent and off its siblings, so what comes out
is every tag that went in, properly nested, in the same order of nesting."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mt_cli.documents.aligned import Aligned, AlignedTranslator
from mt_cli.documents.protect import Masked, Protector, marker_regex, placeholders
from mt_cli.documents.sentences import split


@dataclass(frozen=True)
class Tag:
    start: int  # where the element's text begins in the run's text
    end: int  # where it ends (exclusive)
    open: str  # the opening markup, written as it came
    close: str  # the closing markup ("" when the source had none)
    order: tuple[int, int] = (
        0,
        0,
    )  # where its opening and closing markup came among the run's markup


@dataclass(frozen=True)
class Atom:
    at: int  # position in the run's text
    raw: str  # markup never translated, written as it came
    order: int = 0  # where it came among the run's markup


@dataclass
class Run:
    text: str  # what the model reads (entities decoded)
    tags: list[Tag] = field(default_factory=list)  # in document order: a parent before its children
    atoms: list[Atom] = field(default_factory=list)


@dataclass
class _Unit:
    """One or more sentences of a run, translated as one source line."""

    start: int
    end: int
    offsets: list[int]  # run position start+i -> position in the masked source (i = 0 .. end-start)
    masked: Masked  # the source as the model reads it, placeholders in
    raws: list[str]  # what each placeholder stands for, written out
    tags: list[Tag]  # the tags placed by alignment (inside the unit, not covering it whole)
    atoms: list[Atom]  # the atoms carried through the model
    tag_src: dict[
        int, tuple[int, int]
    ]  # id(tag) -> its range in the masked source, its atoms included
    marker_src: list[tuple[int, int]]  # each placeholder's range in the masked source
    glued: list[tuple[bool, bool]]  # each placeholder: no space before it, after it, in the source


def units(run: Run, lang: str) -> list[tuple[int, int]]:
    """The run's sentences as [start, end) ranges, joined where a tag would be cut."""
    spans, pos = [], 0
    for s in split(run.text, lang):
        start = pos + len(s.lead)
        pos = start + len(s.text) + len(s.trail)
        if s.text:
            spans.append((start, start + len(s.text)))
    k = 0
    while k < len(spans) - 1:
        (a, b), (c, d) = spans[k], spans[k + 1]
        # A tag running across the gap that starts inside this sentence or ends inside the next.
        if any(t.start < c and t.end > b and (a < t.start < b or c < t.end < d) for t in run.tags):
            spans[k : k + 2] = [(a, d)]
            k = max(k - 1, 0)
        else:
            k += 1
    return spans


def translate_runs(
    engine: AlignedTranslator,
    runs: Sequence[Run],
    lang: str,
    protector: Protector | None,
    escape: Callable[[str], str],
    literal: Callable[[str], str] | None = None,
) -> list[str]:
    """Each run written out translated, with its tags and atoms (one batch for all sentences of all
    runs); `escape` makes target text safe in the document (HTML: &, < and >), `literal` writes a
    protected span back (default: `escape`; Markdown writes a URL as it was, unescaped)."""
    plans, clamped = [], []
    for run in runs:
        spans = units(run, lang)
        claimed: set[int] = set()  # an atom two sentences could take goes with the first
        plan = []
        for a, b in spans:
            atoms = [x for x in run.atoms if id(x) not in claimed and _takes(run, a, b, x)]
            claimed.update(id(x) for x in atoms)
            plan.append((a, b, atoms))
        run = Run(run.text, [_clamped(t, spans) for t in run.tags], run.atoms)
        clamped.append(run)
        plans.append(
            [_unit(run, a, b, atoms, protector, literal or escape) for a, b, atoms in plan]
        )
    flat = [u for plan in plans for u in plan]
    found = iter(engine.translate_aligned([u.masked.text for u in flat], alignment=True))
    return [
        _write(run, [(u, next(found)) for u in plan], escape) for run, plan in zip(clamped, plans)
    ]


def _takes(run: Run, a: int, b: int, atom: Atom) -> bool:
    """Does sentence [a, b) carry this atom through the model? Those inside it do; those at its
    edges too, unless a tag starts or ends there (the source's order of the two then stands); and
    those beside it that a tag with one end in the sentence holds (an icon at the end of a link)."""
    if a < atom.at < b:
        return True
    held = any(
        t.order[0] < atom.order < t.order[1] and (a <= t.start < b or a < t.end <= b)
        for t in run.tags
    )
    return held or (atom.at in (a, b) and not any(atom.at in (t.start, t.end) for t in run.tags))


def _clamped(tag: Tag, spans: list[tuple[int, int]]) -> Tag:
    """A tag from whitespace outside the sentences into one of them starts (or ends) at the
    sentence's edge, so it is placed with that sentence."""
    start, end = tag.start, tag.end
    for a, b in spans:
        if start < a < end < b:
            start = a
        if a < start < b < end:
            end = b
    return (
        Tag(start, end, tag.open, tag.close, tag.order)
        if (start, end) != (tag.start, tag.end)
        else tag
    )


def _unit(
    run: Run,
    start: int,
    end: int,
    atoms: list[Atom],
    protector: Protector | None,
    escape: Callable[[str], str],
) -> _Unit:
    """Sentence(s) [start, end) as the model reads them: its atoms and protected spans become
    placeholders; `offsets` maps run positions to the masked text's."""
    text = run.text[start:end]
    cut = {p for t in run.tags for p in (t.start - start, t.end - start)}
    spans = (
        [] if protector is None else [m.span() for m in protector.regex.finditer(text) if m.group()]
    )
    spans = [
        (a, b) for a, b in spans if not any(a < p < b for p in cut)
    ]  # a span across a tag stays text
    # (position, kind, end, order, markup): atoms (kind 0, by their order) and spans (kind 1)
    items = sorted(
        [(min(max(a.at - start, 0), len(text)), 0, 0, a.order, a.raw) for a in atoms]
        + [(a, 1, b, 0, escape(text[a:b])) for a, b in spans]
    )
    avoid = text + "".join(t.open + t.close for t in run.tags) + "".join(a.raw for a in run.atoms)
    markers = placeholders("number", [item[4] for item in items], avoid)
    out, offsets, where, marker_src, i = "", list[int](), list[int](), list[tuple[int, int]](), 0
    for (a, kind, b, _, _), marker in zip(items, markers):
        b = b if kind else a
        out, offsets = _copy(text, i, a, out, offsets)
        out += " " if out and not out[-1].isspace() else ""
        where.append(len(out))
        marker_src.append((len(out), len(out) + len(marker)))
        out += marker
        # A masked span's first character is its placeholder's start, the rest its end: a tag over
        # the span alone covers the placeholder.
        offsets += ([len(out) - len(marker)] + [len(out)] * (b - a - 1)) if b > a else []
        out += " " if a == b and a < len(text) and not text[a].isspace() else ""
        i = max(i, b)
    out, offsets = _copy(text, i, len(text), out, offsets)
    offsets.append(len(out))
    inner = [
        t
        for t in run.tags
        if start <= t.start and t.end <= end and not (t.start == start and t.end == end)
    ]
    orders = [item[3] if item[1] == 0 else None for item in items]
    glued = [  # an atom, or a protected span, that touched its neighbours in the source
        (
            0 < a and not text[a - 1].isspace(),
            (b if kind else a) < len(text) and not text[b if kind else a].isspace(),
        )
        for a, kind, b, *_ in items
    ]
    tag_src = {}
    for t in inner:
        lo, hi = offsets[t.start - start], offsets[t.end - start]
        for order, (ms, me) in zip(orders, marker_src):  # an atom inside the tag in the source
            if order is not None and t.order[0] < order < t.order[1]:
                lo, hi = min(lo, ms), max(hi, me)
        tag_src[id(t)] = (lo, hi)
    masked = Masked(
        out,
        tuple(item[4] for item in items),
        tuple(markers),
        tuple(w / max(len(out), 1) for w in where),
    )
    return _Unit(
        start,
        end,
        offsets,
        masked,
        [item[4] for item in items],
        inner,
        atoms,
        tag_src,
        marker_src,
        glued,
    )


def _copy(text: str, i: int, j: int, out: str, offsets: list[int]) -> tuple[str, list[int]]:
    offsets = offsets + [len(out) + k for k in range(j - i)]
    return out + text[i:j], offsets


def _write(run: Run, done: list[tuple[_Unit, Aligned]], escape: Callable[[str], str]) -> str:
    """The run written out: markup and text outside the sentences as they came, each sentence's
    translation with its tags placed in it."""
    placed = {id(t) for u, _ in done for t in u.tags}
    inside = {id(a) for u, _ in done for a in u.atoms}
    events: dict[int, list[tuple[int, str]]] = {}
    for t in run.tags:
        if id(t) not in placed:
            events.setdefault(t.start, []).append((t.order[0], t.open))
            events.setdefault(t.end, []).append((t.order[1], t.close))
    for a in run.atoms:
        if id(a) not in inside:
            events.setdefault(a.at, []).append((a.order, a.raw))
    starts = {u.start: (u, aligned) for u, aligned in done}
    out, p = [], 0
    while p <= len(run.text):
        out += [raw for _, raw in sorted(events.get(p, []))]
        if p in starts:
            u, aligned = starts[p]
            out.append(place(u, aligned, escape))
            p = u.end
            continue
        if p < len(run.text):
            out.append(escape(run.text[p]))
        p += 1
    return "".join(out)


Links = list[
    tuple[tuple[int, int], tuple[int, int]]
]  # (target piece span, source span it attends to most)


@dataclass
class _Node:
    """A tag placed in a translation: its target range, its source range, what is inside it."""

    tag: Tag | None  # None: the whole translation
    s: int
    e: int
    src: tuple[int, int]  # its range in the masked source
    children: list[_Node] = field(default_factory=list)
    atoms: list[tuple[int, str]] = field(default_factory=list)  # (target position, markup)


def place(u: _Unit, aligned: Aligned, escape: Callable[[str], str]) -> str:
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
    u: _Unit, links: Links, text: str, root: _Node, found: dict[int, tuple[int, int]]
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
