"""HTML documents: the markup comes out as it went in, byte for byte, with only the text (and the
`alt` and `title` attributes) translated.

Python's own tokenizer (html.parser) reads the document into its parts with their exact source
text, so whatever is not translated is copied unchanged: the doctype, comments, attribute quoting,
entities in untouched text, and the text of <script>, <style>, <code>, <pre>, <textarea>, <svg>,
<math> and of any element with translate="no" or class="notranslate". Text between block-level
tags is a run (documents/inline.py): its inline tags (<b>, <a href>, <span>, ...) are put back
around the target words they covered, and untranslated inline parts (<code>, <img>, <br>) travel
as placeholders. Target text is escaped (&, <, >) and written as characters, non-ASCII included.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.inline import Atom, Run, Tag, translate_runs
from mt_cli.documents.paragraphs import translate_paragraphs
from mt_cli.documents.protect import Protector
from mt_cli.errors import MtError

# Elements that sit inside running text: their tags are placed by alignment.
INLINE = frozenset(
    "a abbr b bdi bdo big cite data del dfn em font i ins label mark q s small span strong".split()
    + "sub sup time tt u".split()
)
# Inline elements whose content is never translated: carried whole, as placeholders.
INLINE_KEPT = frozenset("code kbd samp var svg math".split())
# Elements whose content is never translated and that end a run.
BLOCK_KEPT = frozenset("script style pre textarea template".split())
# Void elements inside running text (no end tag): carried as placeholders.
INLINE_VOID = frozenset("br img wbr".split())
# Elements whose end tag HTML lets one leave out.
OPTIONAL_END = frozenset("p li dt dd option optgroup tr td th thead tbody tfoot rt rp".split())
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
TRANSLATED_ATTRIBUTES = ("alt", "title")
# One attribute of a start tag, read in order from after the tag's name (so that "title=" inside
# another attribute's quoted value is never taken for an attribute).
_ATTRIBUTE = re.compile(
    r"""(\s*([^\s"'>/=]+)(?:\s*=\s*))("[^"]*"|'[^']*'|[^\s"'=<>`]+)|\s*[^\s"'>/=]+|\s*/"""
)
_TAG_NAME = re.compile(r"<[^\s/>]+")
SLOT = "\x00{}\x00"  # where a translated attribute value goes, filled in last


def _escape(text: str) -> str:
    return html.escape(text, quote=False).replace("\xa0", "&nbsp;")


def _xml_escape(text: str) -> str:
    return html.escape(text, quote=False).replace("\xa0", "&#160;")


@dataclass
class _Document:
    """The document as parts: markup and untouched text (str) and runs (int: an index into runs)."""

    parts: list[str | int] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)  # attribute values to translate (decoded)


class _Reader(HTMLParser):
    """Tokens with their exact source text, grouped into runs of inline content."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=False)
        self.source, self.doc = source, _Document()
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self.events: list[
            tuple[int, str, str, dict[str, str | None]]
        ] = []  # (offset, kind, name, attrs)

    def _at(self) -> int:
        line, col = self.getpos()
        return self.line_starts[line - 1] + col

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append((self._at(), "start", tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append((self._at(), "void", tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.events.append((self._at(), "end", tag, {}))

    def handle_data(self, data: str) -> None:
        self.events.append((self._at(), "text", "", {}))

    def handle_entityref(self, name: str) -> None:
        self.events.append((self._at(), "text", "", {}))

    def handle_charref(self, name: str) -> None:
        self.events.append((self._at(), "text", "", {}))

    def unknown_decl(self, data: str) -> None:
        self.events.append((self._at(), "other", "", {}))

    def handle_comment(self, data: str) -> None:
        self.events.append((self._at(), "comment", "", {}))

    def handle_decl(self, decl: str) -> None:
        self.events.append((self._at(), "other", "", {}))

    def handle_pi(self, data: str) -> None:
        self.events.append((self._at(), "other", "", {}))


def tokens(source: str) -> list[tuple[str, str, str, dict[str, str | None]]]:
    """The document's tokens: (kind, exact source text, tag name, attributes); their source texts
    put together are the document."""
    if "\x00" in source:
        raise MtError("the document holds NUL characters, which HTML does not allow; remove them")
    reader = _Reader(source)
    try:
        reader.feed(source)
        reader.close()
    except (AssertionError, ValueError) as e:  # html.parser gives up on some broken markup this way
        line, col = reader.getpos()
        raise MtError(f"line {line}, column {col + 1}: does not parse as HTML ({e})") from None
    offsets = [e[0] for e in reader.events] + [len(source)]
    out = [
        (kind, source[offsets[k] : offsets[k + 1]], name, attrs)
        for k, (_, kind, name, attrs) in enumerate(reader.events)
    ]
    if offsets[0] > 0:  # nothing is lost, whatever the tokenizer did not report
        out.insert(0, ("other", source[: offsets[0]], "", {}))
    return out


def _kept(name: str, attrs: dict[str, str | None]) -> bool:
    """Is this element's content never translated?"""
    classes = (attrs.get("class") or "").split()
    return (
        name in INLINE_KEPT
        or name in BLOCK_KEPT
        or (attrs.get("translate") or "").lower() == "no"
        or "notranslate" in classes
    )


class _Builder:
    """Walks the tokens: untouched markup into parts, running text into runs."""

    def __init__(self) -> None:
        self.doc = _Document()
        self.items: list[tuple[str, str, str]] = []  # the open run: (kind, source text, tag name)

    def markup(self, raw: str) -> None:
        """Markup that ends a run, written as it came."""
        self.flush()
        self.doc.parts.append(raw)

    def flush(self) -> None:
        if self.items:
            self.doc.parts.append(len(self.doc.runs))
            self.doc.runs.append(_run(self.items))
            self.items = []

    def attributes(self, raw: str) -> str:
        """A start tag with each alt and title value swapped for a slot its translation fills."""
        name = _TAG_NAME.match(raw)
        if name is None:
            return raw
        out, pos = [raw[: name.end()]], name.end()
        while (m := _ATTRIBUTE.match(raw, pos)) and m.end() > pos:
            value = m.group(3)
            if (
                value is not None
                and m.group(2).lower() in TRANSLATED_ATTRIBUTES
                and value.strip("\"'")
            ):
                quoted = value[0] in "\"'"
                self.doc.attributes.append(html.unescape(value[1:-1] if quoted else value))
                quote = value[0] if quoted else '"'
                out.append(m.group(1) + quote + SLOT.format(len(self.doc.attributes) - 1) + quote)
            else:
                out.append(m.group())
            pos = m.end()
        return "".join(out) + raw[pos:]


def read(source: str) -> _Document:
    """The document as untouched parts, runs to translate and attribute values to translate."""
    b, toks, k = _Builder(), tokens(source), 0
    while k < len(toks):
        kind, raw, name, attrs = toks[k]
        if kind in ("start", "void") and _kept(name, attrs):
            end = k + 1 if kind == "void" or name in VOID else _matching_end(toks, k)
            whole = "".join(t[1] for t in toks[k:end])
            if name in BLOCK_KEPT or not (
                name in INLINE or name in INLINE_KEPT or name in INLINE_VOID
            ):
                b.markup(whole)
            else:
                b.items.append(("atom", whole, name))
            k = end
            continue
        raw = b.attributes(raw) if kind in ("start", "void") else raw
        if kind == "text" or kind == "comment":
            b.items.append(("text" if kind == "text" else "atom", raw, ""))
        elif kind in ("start", "void") and name in INLINE_VOID:
            b.items.append(("atom", raw, name))
        elif kind == "start" and name in INLINE:
            b.items.append(("open", raw, name))
        elif kind == "end" and name in INLINE:
            b.items.append(("close", raw, name))
        else:
            b.markup(raw)
        k += 1
    b.flush()
    return b.doc


def _matching_end(toks: list[tuple[str, str, str, dict[str, str | None]]], k: int) -> int:
    """The index after the end tag that closes the element opened at k. An element whose end tag
    HTML lets one leave out (<p>, <li>, <td>, ...) also ends where the next one of its kind, a
    block, or its parent's end tag comes; any other runs to the document's end."""
    name, depth = toks[k][2], 0
    for j in range(k, len(toks)):
        kind, _, other, _ = toks[j]
        if other == name and kind == "start":
            if depth and name in OPTIONAL_END:
                return j
            depth += 1
        elif other == name and kind == "end":
            depth -= 1
            if depth == 0:
                return j + 1
        elif (
            name in OPTIONAL_END
            and other not in INLINE
            and other not in INLINE_KEPT
            and other not in INLINE_VOID
        ):
            if kind == "end" or (kind == "start" and name == "p"):
                return j  # a parent's end tag, or a block that closes a paragraph
    return len(toks)


def _run(items: list[tuple[str, str, str]]) -> Run:
    """Inline items as a run: text, tags over it (an open tag never closed in the run runs to its
    end and writes no closing markup), and atoms (a closing tag never opened is one)."""
    text, tags, atoms = "", [], []
    stack: list[tuple[int, int, str, str]] = []  # (order, start, raw, name) of open tags
    pairs: list[tuple[int, Tag]] = []
    for order, (kind, raw, name) in enumerate(items):
        if kind == "text":
            text += html.unescape(raw)
        elif kind == "open":
            stack.append((order, len(text), raw, name))
        elif kind == "close" and any(n == name for *_, n in stack):
            while stack:
                o, start, opened, n = stack.pop()
                closing = raw if n == name else ""
                pairs.append((o, Tag(start, len(text), opened, closing, (o, order))))
                if n == name:
                    break
        else:
            atoms.append(Atom(len(text), raw, order))
    for o, start, opened, _ in stack:
        pairs.append((o, Tag(start, len(text), opened, "", (o, len(items)))))
    tags = [t for _, t in sorted(pairs, key=lambda p: p[0])]
    return Run(text, tags, atoms)


def translate_html(
    engine: AlignedTranslator,
    text: str,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
    xml: bool = False,
) -> str:
    """The HTML document with its text and alt/title attributes translated, its markup as it was.
    `xml`: XHTML, where a no-break space is written &#160; (XML knows no &nbsp;)."""
    doc = read(text)
    runs = translate_runs(engine, doc.runs, lang, protector, _xml_escape if xml else _escape)
    values = translate_paragraphs(engine, doc.attributes, lang, protector)
    out = "".join(runs[p] if isinstance(p, int) else p for p in doc.parts)
    slots = {SLOT.format(k): html.escape(v, quote=True) for k, v in enumerate(values)}
    return re.sub("\x00\\d+\x00", lambda m: slots[m.group()], out) if slots else out
