"""PowerPoint presentations (.pptx, PresentationML): the text of every slide (shapes, grouped
shapes, tables) and of its speaker notes translated paragraph by paragraph, formatting and links
kept by alignment (documents/ooxml.py); layouts, masters, media and the rest as they were."""

from __future__ import annotations

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.ooxml import DRAWING, translate_paragraphs
from mt_cli.documents.package import Package, content_types
from mt_cli.documents.protect import Protector
from mt_cli.errors import MtError

TEXT_PARTS = ("presentationml.slide+xml", "presentationml.notesSlide+xml")


def _parts(package: Package) -> list[str]:
    types = content_types(package)
    if not any(kind.endswith("presentationml.presentation.main+xml") for kind in types.values()):
        raise MtError(
            "not a PPTX file: a package without a presentation part (ppt/presentation.xml)"
        )
    return [
        name for name, kind in types.items() if kind.endswith(TEXT_PARTS) and name in package.data
    ]


def translate_pptx(
    engine: AlignedTranslator,
    data: bytes,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> bytes:
    """The presentation translated, as the bytes of a new one."""
    package = Package.read(data, "PPTX")
    paragraphs = [
        p for name in _parts(package) for p in package.xml(name).getroot().iter(DRAWING.paragraph)
    ]
    translate_paragraphs(engine, paragraphs, DRAWING, lang, protector)
    return package.write()
