"""Plain-text documents: paragraphs separated by blank lines, each translated sentence by sentence
(documents/paragraphs.py). Blank lines, indentation and the lines between paragraphs come out as
they went in."""

from __future__ import annotations

import re

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.paragraphs import translate_paragraphs
from mt_cli.documents.protect import Protector

# A blank line (spaces or tabs on it allowed) and any whitespace around it ends a paragraph.
PARAGRAPH_BREAK = re.compile(r"(\s*\n[ \t]*\n\s*)")


def paragraphs(text: str) -> list[str]:
    """The text cut at blank lines; even items are paragraphs (maybe empty), odd ones the breaks
    between them, so "".join(paragraphs(text)) == text."""
    return PARAGRAPH_BREAK.split(text)


def translate_text(
    engine: AlignedTranslator,
    text: str,
    lang: str,
    protector: Protector | None = None,
    cfg: DocumentConfig | None = None,
) -> str:
    """The document translated paragraph by paragraph, its breaks kept as they were."""
    parts = paragraphs(text)
    translated = iter(translate_paragraphs(engine, parts[0::2], lang, protector))
    return "".join(next(translated) if i % 2 == 0 else part for i, part in enumerate(parts))
