"""Documents in, the same structure out: plain text, HTML, Markdown, subtitles, PO files and office
files, each cut into the sentences the model was trained on and put back together around their
translations. Office files (BINARY) are bytes in and out; the others text.

documents/ knows formats, not models: it translates through any `AlignedTranslator`
(documents/aligned.py), which `Translator` is; `Translator.translate_document` is the way in."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mt_cli.config import DocumentConfig
from mt_cli.config.commands import DOCUMENT_TYPES
from mt_cli.documents.aligned import AlignedTranslator
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
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".odt": "odt",
    ".odp": "odp",
    ".epub": "epub",
}
# zip packages: read and written as bytes
BINARY = frozenset({"docx", "pptx", "xlsx", "odt", "odp", "epub"})
# what a text (a JSON string, a form field) can be
TEXT_KINDS = tuple(k for k in KINDS if k not in BINARY)


def kind_of(path: Path | None, input_type: str) -> str:
    """The document type to read `path` as: `input_type`, or for "auto" its extension's (anything
    else, and stdin, is "lines": one sentence per line)."""
    if input_type != "auto":
        check_kind(input_type)
        return input_type
    return EXTENSIONS.get(path.suffix.lower(), "lines") if path is not None else "lines"


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise MtError(
            f"document.input_type {kind!r} is not a document type; use auto or one of "
            f"{', '.join(KINDS)}"
        )


def translate_document(
    engine: AlignedTranslator, text: str | bytes, kind: str, cfg: DocumentConfig, lang: str
) -> str | bytes:
    """`text` read as a document of `kind`, translated, and written back in the same structure
    (bytes for the BINARY kinds, text for the others). `lang`: the source language, whose rules
    split sentences."""
    check_kind(kind)
    if (kind in BINARY) != isinstance(text, bytes):
        want = "bytes" if kind in BINARY else "text (str)"
        raise MtError(f"a {kind} document is read from {want}, not {type(text).__name__}")
    from mt_cli.documents.protect import Protector, masked_templates, unmasked_templates

    protector = Protector(cfg.protect_pattern) if cfg.protect else None
    if protector is None or not isinstance(text, str) or kind == "lines":
        return _translators()[kind](engine, text, lang, protector, cfg)
    masked, templates = masked_templates(text)  # before the document's parser reads it
    return unmasked_templates(_translators()[kind](engine, masked, lang, protector, cfg), templates)


def text_sample(text: str | bytes, kind: str) -> str:
    """Some of a document's text, to tell its language by: a text document itself; the words of an
    office file or e-book."""
    if isinstance(text, str):
        return text
    from mt_cli.documents.package import Package

    return Package.read(text, kind.upper()).sample()


Translate = Callable[..., Any]


def _translators() -> dict[str, Translate]:
    """Each type's translator, imported when a document of it comes (their parsers load slowly)."""
    from mt_cli.documents import (
        docx,
        epub,
        html,
        lines,
        markdown,
        odf,
        plain_text,
        po,
        pptx,
        subtitles,
        xlsx,
    )

    return {
        "lines": lines.translate_lines,
        "text": plain_text.translate_text,
        "html": html.translate_html,
        "markdown": markdown.translate_markdown,
        "srt": subtitles.translate_srt,
        "vtt": subtitles.translate_vtt,
        "po": po.translate_po,
        "docx": docx.translate_docx,
        "pptx": pptx.translate_pptx,
        "xlsx": xlsx.translate_xlsx,
        "odt": odf.translate_odt,
        "odp": odf.translate_odp,
        "epub": epub.translate_epub,
    }
