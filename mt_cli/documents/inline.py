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

from mt_cli.documents.engine import Aligned, Engine
from mt_cli.documents.protect import Masked, Protector, marker_regex, placeholders
from mt_cli.documents.sentences import split


@dataclass(frozen=True)
class Tag:
    start: int  # where the element's text begins in the run's text
    end: int  # where it ends (exclusive)
    open: str  # the opening markup, written as it came
    close: str  # the closing markup ("" when the source had none)
    order: tuple[int, int] = (0, 0)  # where its opening and closing markup came among the run's markup


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
    atoms: list[Atom]  # the atoms carried through the model (inside the unit or at its edges)


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
    engine: Engine, runs: Sequence[Run], lang: str, protector: Protector | None, escape: Callable[[str], str]
) -> list[str]:
    """Each run written out translated, with its tags and atoms (one batch for all sentences of all
    runs); `escape` makes target text safe in the document (HTML: &, < and >)."""
    plans, clamped = [], []
    for run in runs:
        spans = units(run, lang)
        run = Run(run.text, [_clamped(t, spans) for t in run.tags], run.atoms)
        clamped.append(run)
        claimed: set[int] = set()  # an atom between two sentences that touch goes with the first
        plan = []
        for a, b in spans:
            atoms = [x for x in run.atoms if a <= x.at <= b and id(x) not in claimed]
            claimed.update(id(x) for x in atoms)
            plan.append(_unit(run, a, b, atoms, protector, escape))
        plans.append(plan)
    flat = [u for plan in plans for u in plan]
    found = iter(engine.translate_aligned([u.masked.text for u in flat], [list(u.masked.markers) for u in flat], True))
    return [_write(run, [(u, next(found)) for u in plan], escape) for run, plan in zip(clamped, plans)]


def _clamped(tag: Tag, spans: list[tuple[int, int]]) -> Tag:
    """A tag from whitespace outside the sentences into one of them starts (or ends) at the
    sentence's edge, so it is placed with that sentence."""
    start, end = tag.start, tag.end
    for a, b in spans:
        if start < a < end < b:
            start = a
        if a < start < b < end:
            end = b
    return Tag(start, end, tag.open, tag.close, tag.order) if (start, end) != (tag.start, tag.end) else tag


def _unit(
    run: Run, start: int, end: int, atoms: list[Atom], protector: Protector | None, escape: Callable[[str], str]
) -> _Unit:
    """Sentence(s) [start, end) as the model reads them: its atoms and protected spans become
    placeholders; `offsets` maps run positions to the masked text's."""
    text = run.text[start:end]
    cut = {p for t in run.tags for p in (t.start - start, t.end - start)}
    spans = [] if protector is None else [m.span() for m in protector.regex.finditer(text) if m.group()]
    spans = [(a, b) for a, b in spans if not any(a < p < b for p in cut)]  # a span across a tag stays text
    atoms = sorted(atoms, key=lambda a: (a.at, a.order))
    items = sorted(
        [(a.at - start, 0, a.at - start, a.raw) for a in atoms] + [(a, 1, b, escape(text[a:b])) for a, b in spans]
    )
    avoid = text + "".join(t.open + t.close for t in run.tags) + "".join(a.raw for a in run.atoms)
    markers = placeholders("number", [raw for *_, raw in items], avoid)
    out, offsets, where, i = "", list[int](), list[int](), 0
    for (a, _, b, _raw), marker in zip(items, markers):
        out, offsets = _copy(text, i, a, out, offsets)
        pad = " " if out and not out[-1].isspace() else ""
        where.append(len(out) + len(pad))
        out += pad + marker + (" " if a == b and a < len(text) and not text[a].isspace() else "")
        offsets += [len(out)] * (b - a)  # inside a masked span: its placeholder's end
        i = b
    out, offsets = _copy(text, i, len(text), out, offsets)
    offsets.append(len(out))
    inner = [t for t in run.tags if start <= t.start and t.end <= end and not (t.start == start and t.end == end)]
    masked = Masked(out, tuple(raw for *_, raw in items), tuple(markers), tuple(w / max(len(out), 1) for w in where))
    return _Unit(start, end, offsets, masked, [raw for *_, raw in items], inner, atoms)


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


Links = list[tuple[tuple[int, int], tuple[int, int]]]  # (target piece span, source span it attends to most)


def place(u: _Unit, aligned: Aligned, escape: Callable[[str], str]) -> str:
    """One unit's translation written out: each placeholder replaced by what it stands for (put in
    where the alignment says when the model dropped it), each tag around the words it covers."""
    text, links = aligned.text, list(zip(aligned.tgt_spans[:-1], aligned.src_spans[:-1]))
    deleted: set[int] = set()
    # (position, phase: closes / opens / atoms, depth (closes: inner first), empty before open, markup)
    inserts: list[tuple[int, int, int, int, str]] = []
    for k, (marker, raw) in enumerate(zip(u.masked.markers, u.raws)):
        found = list(marker_regex(marker).finditer(text))
        for m in found[1:]:  # the model repeated it: written once
            deleted.update(range(m.start(), m.end()))
        if found:
            deleted.update(range(found[0].start(), found[0].end()))
            inserts.append((found[0].start(), 2, k, 0, raw))
            continue
        at = _where(round(u.masked.where[k] * len(u.masked.text)), links, text, u.masked.where[k])
        pad = raw + " " if at < len(text) else (" " if text and not text[-1].isspace() else "") + raw
        inserts.append((at, 2, k, 0, pad))
    for tag, (s, e), depth in _ranges(u, links, text):
        if s == e:
            inserts.append((s, 1, depth, 0, tag.open + tag.close))
        else:
            inserts.append((s, 1, depth, 1, tag.open))
            inserts.append((e, 0, -depth, 0, tag.close))
    inserts.sort(key=lambda x: x[:4])
    out, j = [], 0
    for i in range(len(text) + 1):
        while j < len(inserts) and inserts[j][0] == i:
            out.append(inserts[j][4])
            j += 1
        if i < len(text) and i not in deleted:
            out.append(escape(text[i]))
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


def _ranges(u: _Unit, links: Links, text: str) -> list[tuple[Tag, tuple[int, int], int]]:
    """Each tag's target range and nesting depth: the words its source words' pieces align to,
    inside its parent's range and off its siblings'."""
    final: list[tuple[Tag, tuple[int, int], int]] = []
    parents: list[int | None] = []
    for tag in u.tags:
        s, e = _aligned_range(u.offsets[tag.start - u.start], u.offsets[tag.end - u.start], links, text, u.masked.text)
        # Tags come parent first, so the last one containing this tag is its parent.
        parent = next((k for k in range(len(final) - 1, -1, -1) if _contains(final[k][0], tag)), None)
        lo, hi = (0, len(text)) if parent is None else final[parent][1]
        s, e = min(max(s, lo), hi), max(min(e, hi), lo)
        for k, (_, (os_, oe), _) in enumerate(final):
            if parents[k] == parent and s < oe and e > os_:  # overlaps a sibling: keep its longer side
                s, e = (s, min(e, os_)) if min(e, os_) - s >= e - max(s, oe) else (max(s, oe), e)
        final.append((tag, (s, max(s, e)), 0 if parent is None else final[parent][2] + 1))
        parents.append(parent)
    return final


def _contains(outer: Tag, inner: Tag) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end and outer.order[0] < inner.order[0]


def _aligned_range(a: int, b: int, links: Links, text: str, source: str) -> tuple[int, int]:
    """The target words whose pieces attend to source [a, b); all of it for a tag over the whole
    source; in proportion when no piece attends there."""
    if not source[:a].strip() and not source[b:].strip():
        return 0, len(text)
    hit = [(ts, te) for (ts, te), (ss, se) in links if ss < b and se > a and te > ts]
    if hit:
        return _word_start(text, min(s for s, _ in hit)), _word_end(text, max(e for _, e in hit))
    n = max(len(source), 1)
    return _word_start(text, a * len(text) // n), _word_end(text, b * len(text) // n)
