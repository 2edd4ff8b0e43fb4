"""E-books (EPUB 2 and 3): every XHTML document of the book through the HTML path (the navigation
document too), the table of contents' labels (NCX) and the title in the package metadata; the
archive written back with `mimetype` first and stored, every other member as it was."""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.encoding import read_document, written
from mt_cli.documents.html import translate_html
from mt_cli.documents.package import Package
from mt_cli.documents.paragraphs import translate_paragraphs
from mt_cli.documents.protect import Protector
from mt_cli.errors import MtError

CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
OPF = "{http://www.idpf.org/2007/opf}"
NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
DC = "{http://purl.org/dc/elements/1.1/}"
XHTML = ("application/xhtml+xml", "text/html")


def _book(data: bytes) -> tuple[Package, str, dict[str, str]]:
    """The package, its OPF's path and each manifest item's path -> media type."""
    package = Package.read(data, "EPUB")
    if (
        package.data.get("mimetype", b"").strip() != b"application/epub+zip"
        or "META-INF/container.xml" not in package.data
    ):
        raise MtError(
            "not an EPUB file: no application/epub+zip mimetype and META-INF/container.xml"
        )
    if "META-INF/encryption.xml" in package.data and re.search(
        rb"URI=\"[^\"]+\.x?html?\"", package.data["META-INF/encryption.xml"]
    ):
        raise MtError("an EPUB whose text is encrypted (DRM); not translated")
    rootfile = package.parsed("META-INF/container.xml").find(f".//{CONTAINER}rootfile")
    opf = rootfile.get("full-path", "") if rootfile is not None else ""
    if opf not in package.data:
        raise MtError(
            f"not an EPUB file: its container names the package document {opf!r}, which it lacks"
        )
    base = posixpath.dirname(opf)
    items = {
        posixpath.normpath(posixpath.join(base, unquote(item.get("href", "")))): item.get(
            "media-type", ""
        )
        for item in package.parsed(opf).iter(f"{OPF}item")
    }
    return package, opf, items


def translate_epub(
    engine: AlignedTranslator,
    data: bytes,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> bytes:
    """The book translated, as the bytes of a new one."""
    package, opf, items = _book(data)
    for name, kind in items.items():
        if kind in XHTML and name in package.data:
            # as its declaration says; written in UTF-8
            text = str(read_document(package.data[name], "html", name))
            package.replaced[name] = written(
                translate_html(engine, text, lang, protector, cfg, xml=True)
            )
    labels = [
        t
        for name, kind in items.items()
        if kind == "application/x-dtbncx+xml" and name in package.data
        for t in package.xml(name).getroot().iter(f"{NCX}text")
        if (t.text or "").strip()
    ]
    titles = [t for t in package.xml(opf).getroot().iter(f"{DC}title") if (t.text or "").strip()]
    plain = labels + titles
    for element, text in zip(
        plain, translate_paragraphs(engine, [e.text for e in plain], lang, protector)
    ):
        element.text = text
    return package.write(stored_first="mimetype")
