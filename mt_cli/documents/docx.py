"""Word documents (.docx, WordprocessingML): the body, tables, headers, footers, footnotes,
endnotes, comments and text boxes translated paragraph by paragraph, formatting kept by alignment
(documents/ooxml.py); every other part of the package as it was (documents/package.py)."""

from __future__ import annotations

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.ooxml import WORD, translate_paragraphs
from mt_cli.documents.package import Package, content_types
from mt_cli.documents.protect import Protector
from mt_cli.errors import MtError

# The parts that hold a document's text, by content type.
TEXT_PARTS = (
    "wordprocessingml.document.main+xml",
    "wordprocessingml.template.main+xml",
    "wordprocessingml.header+xml",
    "wordprocessingml.footer+xml",
    "wordprocessingml.footnotes+xml",
    "wordprocessingml.endnotes+xml",
    "wordprocessingml.comments+xml",
)


def translate_docx(
    engine: AlignedTranslator,
    data: bytes,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> bytes:
    """The Word document translated, as the bytes of a new one."""
    package = Package.read(data, "DOCX")
    types = content_types(package)
    if not any(kind.endswith(TEXT_PARTS[:2]) for kind in types.values()):
        raise MtError("not a DOCX file: a package without a Word document part (word/document.xml)")
    parts = [
        name for name, kind in types.items() if kind.endswith(TEXT_PARTS) and name in package.data
    ]
    paragraphs = [p for name in parts for p in package.xml(name).getroot().iter(WORD.paragraph)]
    translate_paragraphs(engine, paragraphs, WORD, lang, protector)
    return package.write()
