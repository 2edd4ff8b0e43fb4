"""Plain-text documents: paragraphs separated by blank lines, each split into sentences, every
sentence of the document translated in one batch, and each paragraph put back together with its
own spacing. Blank lines, indentation and the lines between paragraphs come out as they went in.
"""

from __future__ import annotations

import re

from mt_cli.decode.translator import Translator
from mt_cli.documents.sentences import Sentence, split
from mt_cli.scripts import is_mostly_cjk

# A blank line (spaces or tabs on it allowed) and any whitespace around it ends a paragraph.
PARAGRAPH_BREAK = re.compile(r"(\s*\n[ \t]*\n\s*)")


def paragraphs(text: str) -> list[str]:
    """The text cut at blank lines; even items are paragraphs (maybe empty), odd ones the breaks
    between them, so "".join(paragraphs(text)) == text."""
    return PARAGRAPH_BREAK.split(text)


def translate_text(translator: Translator, text: str, lang: str) -> str:
    """The document translated sentence by sentence, its paragraph structure kept; `lang` is the
    source language, whose rules the sentence splitter follows."""
    parts = paragraphs(text)
    split_parts = [split(part, lang) if i % 2 == 0 else [] for i, part in enumerate(parts)]
    sources = [s.text for sentences in split_parts for s in sentences if s.text]
    found = iter(translator.translate(sources))
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(part)  # a paragraph break, as it was
            continue
        translated = [(s, next(found) if s.text else "") for s in split_parts[i]]
        out.append(_join(translated))
    return "".join(out)


def _join(translated: list[tuple[Sentence, str]]) -> str:
    """A paragraph's translations with the source's spacing. Between two sentences written without
    a space (Chinese, Japanese) a space goes in when the translations are not such a script; between
    two translations in such a script, spaces alone (no line break) go."""
    out = []
    for k, (s, target) in enumerate(translated):
        trail = s.trail
        if k + 1 < len(translated) and target and translated[k + 1][1]:
            both_cjk = is_mostly_cjk([target]) and is_mostly_cjk([translated[k + 1][1]])
            if not trail and not both_cjk:
                trail = " "
            elif both_cjk and not trail.strip(" "):
                trail = ""
        out.append(s.lead + target + trail)
    return "".join(out)
