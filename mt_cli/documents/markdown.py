"""Markdown documents: the text of headings, paragraphs, list items, block quotes and table cells
translated; everything else copied byte for byte: fenced and indented code, inline code, HTML
blocks and inline HTML, link targets, URLs, images and front matter.

markdown-it-py (the CommonMark parser, with tables and strikethrough) finds the blocks and, per
block, the inline tokens; each piece of inline text is then found in the source line by line, so
the container markers in front of it (`> `, `- `, indentation, `|`) stay where they were. Inline
markup becomes a run (documents/inline.py): emphasis and link text are put back around the words
they covered; inline code, images, autolinks and inline HTML travel as placeholders. A paragraph
of several lines is rewrapped over the same number of lines (a line cut where the translation has
a space, in proportion to the source lines), so the block structure comes out as it went in.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.html import INLINE
from mt_cli.documents.inline import Atom, Run, Tag, translate_runs
from mt_cli.documents.protect import Protector
from mt_cli.scripts import is_cjk

FRONT_MATTER = re.compile(
    r"\A(?:---|\+\+\+)[ \t]*\r?\n.*?^(?:---|\+\+\+|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M
)
SPACE = "\x01"  # a space of translated text: where a rewrapped paragraph may be cut
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_HTML_OPEN = re.compile(r"<([A-Za-z][A-Za-z0-9]*)\b[^>]*(?<!/)>\Z")
_HTML_CLOSE = re.compile(r"</([A-Za-z][A-Za-z0-9]*)\s*>\Z")
_SPECIAL = re.compile(r"([\\`*_\[\]<])")


class _Mismatch(Exception):
    """The inline tokens could not be laid over the source: the block is left as it was."""


@dataclass
class _Piece:
    """Inline text of one block: where each of its lines is in the source, as (line, start, end)."""

    where: list[tuple[int, int, int]]
    run: Run


CUT = "\x02"  # before a CJK character of translated text: a place to cut a line that has no spaces


def _escape(text: str) -> str:
    """Target text made inert: characters that would start Markdown syntax are escaped, and each
    space (and CJK character) marked as a place where a rewrapped line may be cut."""
    return "".join(
        (CUT + c if is_cjk(c) else SPACE if c == " " else _SPECIAL.sub(r"\\\1", c)) for c in text
    )


def _literal(span: str) -> str:
    """A protected span (a URL, a placeholder) as it was, only its spaces marked as places to
    cut."""
    return span.replace(" ", SPACE)


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def translate_markdown(
    engine: AlignedTranslator,
    text: str,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> str:
    """The Markdown document with its text translated and its structure as it was."""
    front = FRONT_MATTER.match(text)
    head, body = (text[: front.end()], text[front.end() :]) if front else ("", text)
    parts = body.split("\n")  # markdown-it's lines: \r\n counts as one, other breaks as none
    lines = [p + "\n" for p in parts[:-1]] + [parts[-1]]
    env: dict = {}  # the document's link reference definitions, for each block's inline parse
    pieces = _pieces(_parser().parse(body, env), lines, env)
    done = translate_runs(
        engine, [p.run for p in pieces], lang, protector, _escape, literal=_literal
    )
    dropped: set[int] = set()
    for piece, out in sorted(zip(pieces, done), key=lambda p: p[0].where[0], reverse=True):
        _put(lines, piece.where, out, dropped)
    return head + "".join(line for i, line in enumerate(lines) if i not in dropped)


def _pieces(tokens: list[Token], lines: list[str], env: dict) -> list[_Piece]:
    """Every inline token's text, found in the source lines (a block whose tokens cannot be laid
    over its source is left untranslated)."""
    out: list[_Piece] = []
    cursor: dict[int, int] = {}  # per line: where the next search starts (table cells share lines)
    for tok in tokens:
        if tok.type != "inline" or tok.map is None or not tok.content.strip():
            continue
        where = _locate(tok.content.split("\n"), tok.map[0], lines, cursor)
        if where is None:
            continue
        for chunk in _chunks(where, lines):
            source = "\n".join(lines[i][a:b] for i, a, b in chunk)
            try:
                out.append(_Piece(chunk, _run(source, env)))
            except _Mismatch:
                continue
    return out


def _locate(
    content: list[str], first: int, lines: list[str], cursor: dict[int, int]
) -> list[tuple[int, int, int]] | None:
    """Where each content line lies in the source: (line, start, end), trailing spaces left out."""
    where = []
    for k, piece in enumerate(content):
        i = first + k
        if i >= len(lines):
            return None
        start = lines[i].find(piece, cursor.get(i, 0))
        if start < 0:
            return None
        cursor[i] = start + len(piece)
        where.append((i, start, start + len(piece.rstrip(" \t"))))
    return where


def _chunks(
    where: list[tuple[int, int, int]], lines: list[str]
) -> list[list[tuple[int, int, int]]]:
    """The lines cut at hard line breaks (a backslash, or two spaces, at a line's end): each part
    is translated on its own and the break stays where it was."""
    out: list[list[tuple[int, int, int]]] = [[]]
    for k, (i, a, b) in enumerate(where):
        last = k == len(where) - 1
        line = lines[i].rstrip("\r\n")
        backslash = not last and b > a and line[b - 1] == "\\" and not line[a:b].endswith("\\\\")
        spaces = not last and len(line) - b >= 2 and not line[b:].strip()
        out[-1].append((i, a, b - 1 if backslash else b))
        if backslash or spaces:
            out.append([])
    return [c for c in out if c]


def _put(lines: list[str], where: list[tuple[int, int, int]], out: str, dropped: set[int]) -> None:
    """The translated run written over its source lines, cut at spaces (else between characters) in
    proportion to the source lines' lengths. A translation too short for all of them leaves the last
    lines out (`dropped`): the paragraph stays one paragraph, which an emptied line would end."""
    segments = _cut(out, [b - a for _, a, b in where])
    for k, ((i, a, b), segment) in enumerate(zip(where, segments)):
        text = segment.replace(CUT, "").replace(SPACE, " ")
        if k and not text.strip():
            dropped.add(i)
            continue
        lines[i] = lines[i][:a] + (text.strip() if len(where) > 1 else text) + lines[i][b:]


def _cut(out: str, sizes: list[int]) -> list[str]:
    if len(sizes) == 1:
        return [out]
    total, acc, cuts = sum(sizes) or 1, 0, list[int]()
    spaces = [m.start() for m in re.finditer(SPACE, out)]
    chars = [m.start() for m in re.finditer(CUT, out)]
    for size in sizes[:-1]:
        acc += size
        goal = acc * len(out) / total
        after = cuts[-1] + 1 if cuts else 1
        options = [p for p in spaces if p >= after] or [p for p in chars if p >= after]
        cuts.append(min(options, key=lambda p: abs(p - goal)) if options else len(out))
    bounds = [0, *cuts, len(out)]
    return [out[bounds[k] : bounds[k + 1]] for k in range(len(sizes))]


class _Inline:
    """Inline tokens laid over their source text, building a run: text as the model reads it,
    emphasis and links as tags (their markup exactly as written), the rest as atoms."""

    def __init__(self, source: str) -> None:
        self.source, self.pos, self.order = source, 0, 0
        self.text = ""
        self.tags: list[tuple[int, Tag]] = []
        self.atoms: list[Atom] = []
        self.open: list[
            tuple[int, int, str, str]
        ] = []  # (order, start, markup, kind) of open emphasis, links, tags

    def next_order(self) -> int:
        self.order += 1
        return self.order

    def expect(self, markup: str) -> str:
        if not markup or not self.source.startswith(markup, self.pos):
            raise _Mismatch
        self.pos += len(markup)
        return markup

    def atom(self, end: int) -> None:
        if end <= self.pos:
            raise _Mismatch
        self.atoms.append(Atom(len(self.text), self.source[self.pos : end], self.next_order()))
        self.pos = end

    def opening(self, markup: str, kind: str) -> None:
        self.open.append((self.next_order(), len(self.text), self.expect(markup), kind))

    def closing(self, markup: str, kind: str) -> None:
        if not self.open or self.open[-1][3] != kind:
            raise _Mismatch
        order, start, opened, _ = self.open.pop()
        self.tags.append(
            (
                order,
                Tag(start, len(self.text), opened, self.expect(markup), (order, self.next_order())),
            )
        )

    def text_of(self, content: str) -> None:
        """Plain text, which the source may write with backslash escapes and entities."""
        src, k = self.source, 0
        while k < len(content):
            c = content[k]
            entity = _ENTITY.match(src, self.pos)
            if entity and content.startswith(html.unescape(entity.group()), k):
                self.pos, k = entity.end(), k + len(html.unescape(entity.group()))
            elif src.startswith(c, self.pos):
                self.pos, k = self.pos + 1, k + 1
            elif src.startswith("\\" + c, self.pos):
                self.pos, k = self.pos + 2, k + 1
            else:
                raise _Mismatch
        self.text += content


def _run(source: str, env: dict) -> Run:
    """One block's inline source as a run (raises _Mismatch where tokens and source disagree)."""
    children = _parser().parseInline(source, env)[0].children or []
    r, autolink = _Inline(source), False
    for tok in children:
        kind = tok.type
        if autolink:
            autolink = kind != "link_close"
        elif kind == "text" or kind == "text_special":
            if kind == "text":
                r.text_of(tok.content)
            else:  # an escape or entity markdown-it kept apart: written as it was, read decoded
                r.expect(tok.markup)
                r.text += tok.content
        elif kind == "softbreak":
            m = re.compile(r"[ \t]*\n[ \t]*").match(source, r.pos)
            if m is None:
                raise _Mismatch
            r.pos, r.text = m.end(), r.text + " "
        elif kind in ("em_open", "strong_open", "s_open"):
            r.opening(tok.markup, kind[:-5])
        elif kind in ("em_close", "strong_close", "s_close"):
            r.closing(tok.markup, kind[:-6])
        elif kind == "link_open" and tok.markup == "autolink":
            r.atom(source.index(">", r.pos) + 1)
            autolink = True
        elif kind == "link_open":
            r.opening("[", "link")
        elif kind == "link_close":
            r.closing(source[r.pos : _link_tail(source, r.pos)], "link")
        elif kind == "code_inline":
            ticks = re.compile(r"`+").match(source, r.pos)
            close = (
                re.compile(rf"(?<!`){ticks.group()}(?!`)").search(source, ticks.end())
                if ticks
                else None
            )
            r.atom(close.end() if close else -1)
        elif kind == "image":
            r.atom(_link_tail(source, _bracket_end(source, r.pos + 1)))
        elif kind == "html_inline":
            _html_inline(r, tok.content)
        else:
            raise _Mismatch  # a hard break inside a chunk, or a token this reader does not know
    if r.open or r.pos != len(source.rstrip()):
        raise _Mismatch
    return Run(r.text, [t for _, t in sorted(r.tags, key=lambda p: p[0])], r.atoms)


def _html_inline(r: _Inline, markup: str) -> None:
    """An inline HTML tag: a pair of inline elements (<b>...</b>) is a tag placed by alignment;
    anything else (a lone tag, a comment) an atom."""
    opening, closing = _HTML_OPEN.match(markup), _HTML_CLOSE.match(markup)
    if opening and opening.group(1).lower() in INLINE:
        r.opening(markup, opening.group(1).lower())
    elif closing and r.open and r.open[-1][3] == closing.group(1).lower():
        r.closing(markup, closing.group(1).lower())
    else:
        r.atom(r.pos + len(markup) if r.source.startswith(markup, r.pos) else -1)


def _bracket_end(source: str, i: int) -> int:
    """From the "[" at i, the index of its matching "]" (escaped brackets skipped)."""
    depth, j = 0, i
    while j < len(source):
        if source[j] == "\\":
            j += 2
            continue
        depth += {"[": 1, "]": -1}.get(source[j], 0)
        if depth == 0:
            return j
        j += 1
    raise _Mismatch


def _link_tail(source: str, i: int) -> int:
    """From a link text's closing "]" at i: the index after its target, "(url "title")", "[ref]"
    or nothing (a shortcut reference)."""
    if not source.startswith("]", i):
        raise _Mismatch
    if source.startswith("(", i + 1):
        depth, j = 0, i + 1
        while j < len(source):
            c = source[j]
            if c == "\\":
                j += 2
                continue
            depth += {"(": 1, ")": -1}.get(c, 0)
            if depth == 0:
                return j + 1
            j += 1
        raise _Mismatch
    if source.startswith("[", i + 1):
        return source.index("]", i + 1) + 1
    return i + 1
