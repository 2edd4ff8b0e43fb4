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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mt_cli.documents.aligned import Aligned, AlignedTranslator
from mt_cli.documents.placement import place
from mt_cli.documents.protect import Masked, Protector, placeholders
from mt_cli.documents.sentences import split


@dataclass(frozen=True)
class Tag:
    start: int  # where the element's text begins in the run's text
    end: int  # where it ends (exclusive)
    open: str  # the opening markup, written as it came
    close: str  # the closing markup ("" when the source had none)
    # where its opening and closing markup came among the run's markup
    order: tuple[int, int] = (
        0,
        0,
    )


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
class Unit:
    """One or more sentences of a run, translated as one source line."""

    start: int
    end: int
    offsets: list[int]  # run position start+i -> position in the masked source (i = 0 .. end-start)
    masked: Masked  # the source as the model reads it, placeholders in
    raws: list[str]  # what each placeholder stands for, written out
    tags: list[Tag]  # the tags placed by alignment (inside the unit, not covering it whole)
    atoms: list[Atom]  # the atoms carried through the model
    # id(tag) -> its range in the masked source, its atoms included
    tag_src: dict[int, tuple[int, int]]
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
) -> Unit:
    """Sentence(s) [start, end) as the model reads them: its atoms and protected spans become
    placeholders; `offsets` maps run positions to the masked text's."""
    text = run.text[start:end]
    items = _items(run, start, text, atoms, protector, escape)
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
    tag_src = _tag_sources(inner, start, offsets, orders, marker_src)
    masked = Masked(
        out,
        tuple(item[4] for item in items),
        tuple(markers),
        tuple(w / max(len(out), 1) for w in where),
    )
    return Unit(
        start,
        end,
        offsets,
        masked,
        [item[4] for item in items],
        inner,
        atoms,
        tag_src,
        marker_src,
        _glued(text, items),
    )


def _items(
    run: Run,
    start: int,
    text: str,
    atoms: list[Atom],
    protector: Protector | None,
    escape: Callable[[str], str],
) -> list[tuple[int, int, int, int, str]]:
    """What becomes a placeholder in `text` (the run from `start`), in order, as (position, kind,
    end, order, markup): atoms (kind 0, by their order) and protected spans (kind 1); a span
    across a tag's edge stays text."""
    cut = {p for t in run.tags for p in (t.start - start, t.end - start)}
    found = [] if protector is None else protector.regex.finditer(text)
    spans = [m.span() for m in found if m.group()]
    spans = [(a, b) for a, b in spans if not any(a < p < b for p in cut)]
    return sorted(
        [(min(max(a.at - start, 0), len(text)), 0, 0, a.order, a.raw) for a in atoms]
        + [(a, 1, b, 0, escape(text[a:b])) for a, b in spans]
    )


def _glued(text: str, items: list[tuple[int, int, int, int, str]]) -> list[tuple[bool, bool]]:
    """Whether each atom or protected span touched its neighbours in the source (no space before
    it, after it)."""
    return [
        (
            0 < a and not text[a - 1].isspace(),
            (b if kind else a) < len(text) and not text[b if kind else a].isspace(),
        )
        for a, kind, b, *_ in items
    ]


def _tag_sources(
    inner: list[Tag],
    start: int,
    offsets: list[int],
    orders: list[int | None],
    marker_src: list[tuple[int, int]],
) -> dict[int, tuple[int, int]]:
    """id(tag) -> its range in the masked source, widened over the atoms inside it in the source."""
    found = {}
    for t in inner:
        lo, hi = offsets[t.start - start], offsets[t.end - start]
        for order, (ms, me) in zip(orders, marker_src):
            if order is not None and t.order[0] < order < t.order[1]:
                lo, hi = min(lo, ms), max(hi, me)
        found[id(t)] = (lo, hi)
    return found


def _copy(text: str, i: int, j: int, out: str, offsets: list[int]) -> tuple[str, list[int]]:
    offsets = offsets + [len(out) + k for k in range(j - i)]
    return out + text[i:j], offsets


def _write(run: Run, done: list[tuple[Unit, Aligned]], escape: Callable[[str], str]) -> str:
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
