"""Documents in, the same structure out: plain text, HTML, Markdown, subtitles and PO files, each
cut into the sentences the model was trained on and put back together around their translations.

documents/ knows formats, not models: it translates through any `Engine` (documents/engine.py),
which `Translator` is; `Translator.translate_document` is the way in."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mt_cli.config import DocumentConfig
from mt_cli.config.commands import DOCUMENT_TYPES
from mt_cli.documents.engine import Engine
from mt_cli.errors import MtError

KINDS = DOCUMENT_TYPES[1:]  # every type but "auto", which picks one of them
EXTENSIONS = {
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".srt": "srt",
    ".vtt": "vtt",
    ".po": "po",
    ".pot": "po",
}


def kind_of(path: Path | None, input_type: str) -> str:
    """The document type to read `path` as: `input_type`, or for "auto" its extension's (anything
    else, and stdin, is "lines": one sentence per line)."""
    if input_type != "auto":
        check_kind(input_type)
        return input_type
    return EXTENSIONS.get(path.suffix.lower(), "lines") if path is not None else "lines"


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise MtError(f"document.input_type {kind!r} is not a document type; use auto or one of {', '.join(KINDS)}")


def translate_document(engine: Engine, text: str, kind: str, cfg: DocumentConfig, lang: str) -> str:
    """`text` read as a document of `kind`, translated, and written back in the same structure.
    `lang`: the source language, whose rules split sentences."""
    check_kind(kind)
    from mt_cli.documents.protect import Protector

    protector = Protector(cfg.protect_pattern) if cfg.protect else None
    return _translators()[kind](engine, text, lang, protector, cfg)


Translate = Callable[..., str]


def _translators() -> dict[str, Translate]:
    """Each type's translator, imported when a document of it comes (their parsers load slowly)."""
    from mt_cli.documents import html, lines, markdown, po, subtitles, text

    return {
        "lines": lines.translate_lines,
        "text": text.translate_text,
        "html": html.translate_html,
        "markdown": markdown.translate_markdown,
        "srt": subtitles.translate_srt,
        "vtt": subtitles.translate_vtt,
        "po": po.translate_po,
    }
