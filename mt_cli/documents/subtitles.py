"""Subtitles: SubRip (.srt) and WebVTT (.vtt), each cue's text translated and everything else
(cue numbers and identifiers, timing lines with their settings, WebVTT's header, NOTE, STYLE and
REGION blocks, blank lines, a byte-order mark, CRLF line endings) written back byte for byte.

A sentence often runs over several cues ("I think that" / "we should go."); translated cue by cue
it would come out as two broken halves. So consecutive cues are joined until one ends a sentence
(sentence-final punctuation), four cues at most, the joined text is translated as one paragraph
(documents/paragraphs.py: one batch for the whole file), and the translation is cut over those cues
again in proportion to the source cues' lengths, at word boundaries (between characters in Chinese
and Japanese, which have no spaces), leaving no cue empty while there are words enough. A dialogue
cue (each line starts with a dash: two speakers) is never joined: each line is translated alone.

Within a cue the source's line count is kept: a one-line cue stays one line, a two-line cue is
re-wrapped at the word boundary nearest the middle (n lines: n nearly equal parts); a boundary
after punctuation counts as half as far, as it does for the cuts between cues. A translation too
short to fill the lines gets fewer, since a blank line would end the cue.

Tags: those wrapping a whole cue (<i>...</i>, {\\an8}, a WebVTT voice <v Name>), or each of its
lines alike, are put back around the translation; any other tag, timestamp or entity inside the
text is a protected span (documents/protect.py), so each comes out exactly once, even with
--no-protect. Such a tag then hugs its word: an opening one the word after it, a closing one the
word before it. A cue without text is left as it was."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.paragraphs import translate_paragraphs
from mt_cli.documents.protect import Protector
from mt_cli.errors import MtError

MARKUP = (
    # <i>, </i>, <font color="red">, <c.yellow>, <v Anna>, <ruby>
    r"</?[A-Za-z][\w.-]*(?:[ \t][^<>\n]*)?>"
    r"|<(?:\d+:)?\d{2}:\d{2}\.\d{3}>"  # a WebVTT karaoke timestamp
    r"|\{\\[^{}\n]*\}"  # an ASS override, {\an8}
    r"|&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);"  # an entity, &amp;
)
TIME = r"(?:\d+:)?\d{1,2}:\d{2}[,.]\d{1,3}"
TIMING = re.compile(rf"\s*{TIME}\s*-->\s*{TIME}(?:\s|$)")
EXAMPLE = {False: "00:00:01,000 --> 00:00:04,000", True: "00:00:01.000 --> 00:00:04.000"}
VTT_BLOCKS = re.compile(r"(?:NOTE|STYLE|REGION)(?:[ \t]|$)")  # blocks that are not cues
# Tags a cue may open with: an ASS override or a voice stands alone, others must close at its end.
OPENER = re.compile(r"\{\\[^{}\n]*\}|<(?P<name>[A-Za-z]+)(?:[.][\w.-]*)?(?:[ \t][^<>\n]*)?>")
DASH = re.compile(r"[-\u2010\u2013\u2014][ \t]*")
# Sentence-final punctuation, maybe followed by closing quotes or brackets.
ENDS = re.compile(
    r"[.!?\u2026\u3002\uff01\uff1f\u203c\u2047-\u2049]"  # a stop
    r"[\"'\u201d\u2019\u00bb)\]\u300d\u300f\uff09]*$"  # closing quotes and brackets
)
MAX_JOINED = 4
# A tag touching a word would be masked into it ("<b>big" -> "7001big"), where no placeholder is
# found again; so tags are spaced out for the model and an opening tag (or override, timestamp)
# then hugs the word after it, a closing one the word before it.
HUG_NEXT = re.compile(r"(<[A-Za-z][^<>\n]*>|<(?:\d+:)?\d{2}:\d{2}\.\d{3}>|\{\\[^{}\n]*\})[ \t]+")
HUG_PREVIOUS = re.compile(r"[ \t]+(</[A-Za-z][\w.-]*>)")
# Where a translation may be cut: between words, or between Chinese and Japanese characters (kana
# and ideographs; Korean spaces its words), keeping closing punctuation and tags on the left.
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CLOSING = (
    "\u3001\u3002\uff0c\uff0e\uff01\uff1f\uff1a\uff1b"  # the comma, stops and marks
    "\u300d\u300f\uff09\u300b\u3009\u3011\u3015\u2026"  # closing brackets, the ellipsis
)
WORD = rf"(?:{MARKUP}|[^\s{CJK}{CLOSING}])"
PAUSES = ".,;:!?\u2026\u3001\u3002\uff0c\uff01\uff1f\uff1a\uff1b"  # a line may well end after these
TOKEN = re.compile(rf"{WORD}*[{CJK}][{CLOSING}]*(?:{MARKUP})*|{WORD}+|[{CLOSING}]+")


@dataclass(frozen=True)
class Cue:
    at: tuple[int, ...]  # the file's lines that hold its text
    inner: tuple[str, ...]  # those lines without the tags around them, stripped
    head: str = ""  # tags opening the cue (or, with per_line, each line)
    tail: str = ""  # and closing it
    per_line: bool = False

    @property
    def text(self) -> str:
        return _joined(self.inner)

    @property
    def dialogue(self) -> bool:
        return len(self.inner) > 1 and all(DASH.match(line) for line in self.inner)


def translate_srt(
    engine: AlignedTranslator,
    text: str,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> str:
    """A SubRip file with each cue's text translated and the rest as it was."""
    return _translate(engine, text, lang, _markup_protector(protector, cfg), vtt=False)


def translate_vtt(
    engine: AlignedTranslator,
    text: str,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> str:
    """A WebVTT file with each cue's text translated and the rest as it was."""
    return _translate(engine, text, lang, _markup_protector(protector, cfg), vtt=True)


def _markup_protector(protector: Protector | None, cfg: DocumentConfig) -> Protector:
    """Tags are protected spans whatever the settings: a model asked to translate "<i>" writes
    anything. With protection off (--no-protect) they are all that is: placeholders and URLs are
    then the model's to translate, as the user asked."""
    if protector is None:
        only = Protector()
        only.regex = re.compile(MARKUP)
        return only
    return Protector(
        MARKUP + (f"|(?:{cfg.protect_pattern})" if cfg.protect_pattern else ""), protector.style
    )


def _translate(
    engine: AlignedTranslator, text: str, lang: str, protector: Protector, vtt: bool
) -> str:
    parts = re.split(r"(\r\n|\r|\n)", text)
    bodies, ends = parts[0::2], [*parts[1::2], ""]
    cues = _cues([bodies[0].removeprefix("\ufeff"), *bodies[1:]], vtt)
    out = [body + end for body, end in zip(bodies, ends)]
    for cue, lines in zip(cues, _translate_cues(engine, cues, lang, protector)):
        rendered = _render(cue, lines)
        kept = [ends[i] for i in cue.at]
        # fewer lines than the source: its last ending last
        kept = [
            *kept[: len(rendered) - 1],
            kept[-1],
        ]
        for i in cue.at:
            out[i] = ""
        out[cue.at[0]] = "".join(line + end for line, end in zip(rendered, kept))
    return "".join(out)


def _blocks(bodies: list[str]) -> list[tuple[int, int]]:
    """[start, end) of each run of non-blank lines."""
    out, start = [], None
    for i, body in enumerate([*bodies, ""]):
        if body.strip() and start is None:
            start = i
        elif not body.strip() and start is not None:
            out.append((start, i))
            start = None
    return out


def _cues(bodies: list[str], vtt: bool) -> list[Cue]:
    """The cues that have text, in order; a file that is not of its type is an MtError."""
    blocks = _blocks(bodies)
    if vtt:
        if not re.match(r"WEBVTT(?:[ \t]|$)", bodies[0]):
            raise MtError(
                "line 1: a WebVTT file starts with the line WEBVTT; "
                "add it, or translate the file as srt"
            )
        # the header block is first
        blocks = [(a, b) for a, b in blocks[1:] if not VTT_BLOCKS.match(bodies[a])]
    return [cue for a, b in blocks if (cue := _cue(bodies, a, b, vtt)).inner]


def _cue(bodies: list[str], start: int, end: int, vtt: bool) -> Cue:
    timing = next((i for i in (start, start + 1) if i < end and TIMING.match(bodies[i])), None)
    if timing is None:
        numbered = end - start > 1 and (vtt or bodies[start].strip().isdigit())
        raise MtError(
            f"line {start + 1 + numbered}: expected a timing line like {EXAMPLE[vtt]} (a blank "
            "line ends a cue,"
            " so cue text cannot hold one)"
        )
    at = tuple(range(timing + 1, end))
    for i in at:
        if TIMING.match(bodies[i]):
            raise MtError(
                f"line {i + 1}: a timing line inside a cue's text; put a blank line before its cue"
            )
    lines = [bodies[i].strip() for i in at]
    head, inner, tail = _peel("\n".join(lines))
    if not (head or tail) and len(lines) > 1:
        peeled = [_peel(line) for line in lines]
        if peeled[0][0] + peeled[0][2] and all(
            (h, t) == (peeled[0][0], peeled[0][2]) for h, _, t in peeled
        ):
            return Cue(
                at, tuple(p[1].strip() for p in peeled), peeled[0][0], peeled[0][2], per_line=True
            )
    return Cue(at, tuple(line.strip() for line in inner.split("\n") if line.strip()), head, tail)


def _peel(text: str) -> tuple[str, str, str]:
    """(tags opening `text`, what they wrap, tags closing it): a tag pair is peeled when it wraps
    all of the text, with no tag of its name inside; an ASS override or a voice also alone."""
    head = tail = ""
    while m := OPENER.match(text):
        name = m.group("name")
        close = f"</{name}>" if name else ""
        inner = text[m.end() : len(text) - len(close)]
        if close and text.endswith(close) and not re.search(rf"</?{name}\b", inner):
            head, tail, text = head + m.group(), close + tail, inner
        elif not name or name == "v":
            head, text = head + m.group(), text[m.end() :]
        else:
            break
    return head, text, tail


def _groups(cues: list[Cue]) -> list[list[Cue]]:
    """Runs of consecutive cues that hold whole sentences, MAX_JOINED cues at most; a dialogue cue
    is one alone."""
    out: list[list[Cue]] = []
    run: list[Cue] = []
    for cue in cues:
        if cue.dialogue:
            out += [run, [cue]] if run else [[cue]]
            run = []
            continue
        run.append(cue)
        if ENDS.search(re.sub(MARKUP, "", cue.text).rstrip()) or len(run) == MAX_JOINED:
            out.append(run)
            run = []
    return out + [run] if run else out


def _translate_cues(
    engine: AlignedTranslator, cues: list[Cue], lang: str, protector: Protector
) -> list[list[str]]:
    """Each cue's new text lines (without the tags around them), all cues in one batch."""
    groups = _groups(cues)
    paragraphs: list[str] = []
    for group in groups:
        if group[0].dialogue:
            paragraphs += [_dash(line)[1] for line in group[0].inner]
        else:
            paragraphs.append(_joined([c.text for c in group]))
    spaced = [_spaced(p) for p in paragraphs]
    found = (
        HUG_PREVIOUS.sub(r"\1", HUG_NEXT.sub(r"\1", t))
        for t in translate_paragraphs(engine, spaced, lang, protector)
    )
    out: list[list[str]] = []
    for group in groups:
        if group[0].dialogue:
            out.append([_dash(line)[0] + next(found) for line in group[0].inner])
            continue
        pieces = cut(next(found), [len(c.text) for c in group])
        out += [
            [line for line in cut(piece, [1] * len(c.inner)) if line]
            for c, piece in zip(group, pieces)
        ]
    return out


def _spaced(text: str) -> str:
    """Each tag set apart by a space from a word or another tag it touches."""
    tags = list(re.finditer(MARKUP, text))
    starts, ends = {m.start() for m in tags}, {m.end() for m in tags}
    word = re.compile(r"\w")
    cuts = sorted(
        b
        for b in starts | ends
        if 0 < b < len(text)
        and (
            (b in starts and (b in ends or word.match(text[b - 1])))
            or (b in ends and word.match(text[b]))
        )
    )
    return " ".join(text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)]))


def _dash(line: str) -> tuple[str, str]:
    """A dialogue line's dash (with the space after it) and its words."""
    m = DASH.match(line)
    return (m.group(), line[m.end() :]) if m else ("", line)


def _render(cue: Cue, lines: list[str]) -> list[str]:
    if not lines:
        return [cue.head + cue.tail] if cue.head + cue.tail else []
    if cue.per_line:
        return [cue.head + line + cue.tail for line in lines]
    lines = [cue.head + lines[0], *lines[1:]]
    lines[-1] += cue.tail
    return lines


def cut(text: str, weights: list[int]) -> list[str]:
    """`text` cut into len(weights) pieces, each as long as its share of the weights as nearly as
    word boundaries allow (the whitespace at a cut dropped); no piece is empty while there are
    as many words as pieces. A cut after punctuation counts as half as far from its goal: a line
    that ends with its clause reads better than an even one."""
    spans = [m.span() for m in TOKEN.finditer(text)]
    total = sum(weights) or 1
    bounds = [0]

    def cost(b: int, goal: float) -> float:
        at = spans[b][0] if b < len(spans) else len(text)
        return abs(at - goal) * (0.5 if 0 < b and text[spans[b - 1][1] - 1] in PAUSES else 1.0)

    for k in range(1, len(weights)):
        goal = len(text) * sum(weights[:k]) / total
        lo = min(bounds[-1] + 1, len(spans))
        hi = max(len(spans) - (len(weights) - k), lo)
        bounds.append(min(range(lo, hi + 1), key=lambda b: cost(b, goal)))
    bounds.append(len(spans))
    return [
        text[spans[a][0] : spans[b - 1][1]] if b > a else "" for a, b in zip(bounds, bounds[1:])
    ]


def _joined(parts: list[str] | tuple[str, ...]) -> str:
    """Lines (or cues) as running text: a space between them, none between two Chinese or
    Japanese characters."""
    out = ""
    for part in parts:
        if out and part:
            out += (
                ""
                if re.match(f"[{CJK}{CLOSING}]", out[-1]) and re.match(f"[{CJK}]", part[0])
                else " "
            )
        out += part
    return out
