"""gettext PO files: each entry without a translation gets its msgid's; the rest of the file is
written back byte for byte.

polib parses the file (and finds its errors); the new msgstr lines are then put in place of the
old ones in the file's own text, so the header entry, obsolete (#~) entries, msgctxt, comments,
flags, references, wrapping and line endings stay exactly as they were.

- Entries that already have a translation are kept, unless document.overwrite.
- Plural entries: msgstr[0] translates msgid, msgstr[1] to msgstr[n-1] msgid_plural, with n the
  header's Plural-Forms nplurals (else the entry's own msgstr[] count, else 2).
- A msgid of several lines is translated line by line (each a paragraph of sentences), so the
  translation has its line breaks, and begins and ends with a newline where the msgid does, as
  msgfmt --check demands.
- New translations are not marked fuzzy: msgfmt leaves fuzzy entries out of the compiled
  catalogue, so the program would show none of them. A reviewer finds them in the diff.
- Placeholders (%s, %(name)s, %1$d, {count}, %%) are protected even with --no-protect: a
  translation that loses or changes one fails msgfmt --check on a c-format entry and breaks the
  program at run time on any. Plain %s and %d take their arguments in order, so where the model
  reordered them they are put back in the msgid's order. A placeholder glued to a word ("100%%",
  "%dpx") is set apart for the model and glued back where that word is beside it again.
- Every msgid of the file goes to the engine in one batch."""

from __future__ import annotations

import re
from typing import Any

import polib

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.paragraphs import translate_paragraphs
from mt_cli.documents.protect import BRACE, PRINTF, Protector
from mt_cli.errors import MtError

LITERAL_PERCENT = "%%"
PLACEHOLDERS = f"(?:{LITERAL_PERCENT})|(?:{PRINTF})|(?:{BRACE})"
# A conversion that takes the next argument: neither named (%(name)s) nor numbered (%1$s).
IN_ORDER = re.compile(rf"{LITERAL_PERCENT}|{PRINTF}")
NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
MSGSTR = re.compile(r"\s*msgstr[\s\[]")


def translate_po(
    engine: AlignedTranslator,
    text: str,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> str:
    """The PO file with its untranslated entries (all, with cfg.overwrite) translated."""
    catalog = _parse(text)
    todo = [
        e for e in catalog if not e.obsolete and e.msgid and (cfg.overwrite or not _translated(e))
    ]
    nplurals = _nplurals(catalog.metadata.get("Plural-Forms", ""))
    sources = [
        s for e in todo for s in ([e.msgid, e.msgid_plural] if e.msgid_plural else [e.msgid])
    ]
    translated = iter(_translate_all(engine, sources, lang, _protector(protector, cfg)))
    lines = text.splitlines(keepends=True)  # numbered as polib numbers them
    new: dict[int, list[str]] = {}
    for entry in todo:
        start, end = _msgstr_lines(lines, entry.linenum)
        eol = lines[start][len(lines[start].rstrip("\r\n")) :] or "\n"
        one = next(translated)
        if entry.msgid_plural:
            other = next(translated)
            n = nplurals or (max(entry.msgstr_plural) + 1 if entry.msgstr_plural else 2)
            forms = [one, *[other] * (n - 1)]
            new[start] = [
                ln for k, form in enumerate(forms) for ln in _field(f"msgstr[{k}]", form, eol)
            ]
        else:
            new[start] = _field("msgstr", one, eol)
        lines[start + 1 : end] = [""] * (end - start - 1)
    return "".join("".join(new[i]) if i in new else line for i, line in enumerate(lines))


def _translate_all(
    engine: AlignedTranslator, sources: list[str], lang: str, protector: Protector
) -> list[str]:
    """Each string's translation, line by line (each line a paragraph), all in one batch, with
    its placeholders glued to what they were glued to and its plain conversions in order."""
    lines_of = [source.split("\n") for source in sources]
    apart = [_apart(line, protector.regex) for lines in lines_of for line in lines]
    found = translate_paragraphs(engine, [line for line, _ in apart], lang, protector)
    glued = iter(_together(t, glue) for t, (_, glue) in zip(found, apart))
    return [
        _in_order("\n".join(next(glued) for _ in lines), s) for lines, s in zip(lines_of, sources)
    ]


def _apart(text: str, spans: re.Pattern[str]) -> tuple[str, list[tuple[str, str, str]]]:
    """`text` with a space between each protected span and a word it touches ("100%%", "%dpx": a
    placeholder glued to a word is not found in the translation again), and for each span the
    words it was glued to on the left and on the right ("" where none)."""
    glue: list[tuple[str, str, str]] = []

    def spaced(m: re.Match[str]) -> str:
        left, right = re.search(r"\w+$", text[: m.start()]), re.match(r"\w+", text[m.end() :])
        glue.append((m.group(), left.group() if left else "", right.group() if right else ""))
        return " " * bool(left) + m.group() + " " * bool(right)

    return spans.sub(spaced, text), glue


def _together(translation: str, glue: list[tuple[str, str, str]]) -> str:
    """The translation with each span glued again to the word it was glued to, where that word
    (a number, a unit: what a model copies) is still beside it; next to any other it stays apart."""
    seen: dict[str, int] = {}
    for span, left, right in glue:
        seen[span] = k = seen.get(span, -1) + 1
        starts = [m.start() for m in re.finditer(re.escape(span), translation)]
        if k < len(starts):
            before, after = translation[: starts[k]], translation[starts[k] + len(span) :]
            before = before.rstrip(" ") if left and before.rstrip(" ").endswith(left) else before
            after = after.lstrip(" ") if right and after.lstrip(" ").startswith(right) else after
            translation = before + span + after
    return translation


def _parse(text: str) -> Any:
    """polib's catalogue of `text`; its syntax errors as an MtError naming the line."""
    try:
        # polib reads a string naming an existing file as that file: a newline makes it no name.
        return polib.pofile(text + "\n")
    except OSError as e:
        line = re.search(r"\(line (\d+)\)(.*)", str(e))
        where = f"line {line.group(1)}: " if line else ""
        why = line.group(2).strip(": ") if line and line.group(2).strip(": ") else "not a PO entry"
        raise MtError(
            f'{where}{why}; each entry is msgid "..." then msgstr "..." (msgid_plural with '
            "msgstr[0], msgstr[1]),"
            ' quotes inside them written \\"'
        ) from None


def _translated(entry: Any) -> bool:
    return bool(entry.msgstr) or any(entry.msgstr_plural.values())


def _nplurals(plural_forms: str) -> int:
    m = NPLURALS.search(plural_forms)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else 0


def _protector(protector: Protector | None, cfg: DocumentConfig) -> Protector:
    """Placeholders protected whatever the settings (see the module's docstring); with protection
    on, URLs, e-mail addresses and the user's pattern too. Placeholders side by side ("%s%%") are
    one span: their placeholders would run together into one the restoring never finds."""
    if protector is None:
        out = Protector()
        out.regex = re.compile(PLACEHOLDERS)
    else:
        out = Protector(
            LITERAL_PERCENT + (f"|(?:{cfg.protect_pattern})" if cfg.protect_pattern else ""),
            protector.style,
        )
    out.regex = re.compile(f"(?:{out.regex.pattern})+")
    return out


def _in_order(translation: str, source: str) -> str:
    """The translation with its plain conversions (%s, %d: each takes the next argument) in the
    source's order, when it has the same ones; named and numbered ones may move."""
    want = [m.group() for m in IN_ORDER.finditer(source) if _plain(m.group())]
    have = [m.group() for m in IN_ORDER.finditer(translation) if _plain(m.group())]
    if want == have or sorted(want) != sorted(have):
        return translation
    queue = iter(want)
    return IN_ORDER.sub(lambda m: next(queue) if _plain(m.group()) else m.group(), translation)


def _plain(conversion: str) -> bool:
    return conversion != LITERAL_PERCENT and "(" not in conversion and "$" not in conversion


def _msgstr_lines(lines: list[str], linenum: int) -> tuple[int, int]:
    """[start, end) of the msgstr lines (with msgstr[k] and continuations) of the entry that
    begins on line `linenum` (1-based; polib's)."""
    start = next(i for i in range(max(linenum - 1, 0), len(lines)) if MSGSTR.match(lines[i]))
    end = start + 1
    while end < len(lines) and (lines[end].lstrip().startswith('"') or MSGSTR.match(lines[end])):
        end += 1
    return start, end


def _field(keyword: str, value: str, eol: str) -> list[str]:
    """`keyword "value"`, or for a value of several lines `keyword ""` and a quoted line for
    each."""
    parts = re.findall(r"[^\n]*\n|[^\n]+", value)
    if len(parts) <= 1:
        return [f'{keyword} "{polib.escape(value)}"{eol}']
    return [f'{keyword} ""{eol}', *(f'"{polib.escape(p)}"{eol}' for p in parts)]
