"""Excel workbooks (.xlsx, SpreadsheetML): the text cells translated (the shared strings, plain or
rich text, and inline strings), rich text's formatting kept by alignment (documents/ooxml.py).
Numbers, dates, formulas and their cached results, sheet names and everything else as they were."""

from __future__ import annotations

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.ooxml import INLINE_SHEET, SHEET, translate_paragraphs
from mt_cli.documents.package import Package, content_types
from mt_cli.documents.protect import Protector
from mt_cli.errors import MtError


def _parts(package: Package) -> tuple[list[str], list[str]]:
    """The shared strings part(s), and the worksheets (for inline strings)."""
    types = content_types(package)
    if not any(kind.endswith("spreadsheetml.sheet.main+xml") for kind in types.values()):
        raise MtError("not an XLSX file: a package without a workbook part (xl/workbook.xml)")
    shared = [
        n
        for n, k in types.items()
        if k.endswith("spreadsheetml.sharedStrings+xml") and n in package.data
    ]
    sheets = [
        n
        for n, k in types.items()
        if k.endswith("spreadsheetml.worksheet+xml") and n in package.data
    ]
    return shared, sheets


def translate_xlsx(
    engine: AlignedTranslator,
    data: bytes,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> bytes:
    """The workbook translated, as the bytes of a new one."""
    package = Package.read(data, "XLSX")
    shared, sheets = _parts(package)
    strings = [p for name in shared for p in package.xml(name).getroot().iter(SHEET.paragraph)]
    translate_paragraphs(engine, strings, SHEET, lang, protector)
    # inline strings are rare: a sheet is parsed (and rewritten) only when it has them
    for name in sheets:
        if b"inlineStr" in package.data[name]:
            cells = list(package.xml(name).getroot().iter(INLINE_SHEET.paragraph))
            translate_paragraphs(engine, cells, INLINE_SHEET, lang, protector)
    return package.write()
