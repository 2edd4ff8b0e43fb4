"""E-books: each chapter through the HTML path, the table of contents and the title translated, the
archive written with its mimetype first and stored. Built with ebooklib, which reads the result."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from mt_cli.config import DocumentConfig
from mt_cli.documents import translate_document
from mt_cli.errors import MtError

epub = pytest.importorskip("ebooklib.epub")
from lxml import etree  # noqa: E402
from test_documents_docx import Upper, members  # noqa: E402

CHAPTERS = [
    ("Erstes Kapitel", "<p>Der Mann sieht ein <b>rotes</b> Haus.</p><p>Ein Hund&#160;läuft.</p>"),
    ("Zweites Kapitel", '<p>Eine Frau liest.<img src="bild.png" alt="Ein Bild"/></p>'),
]


def german_book(tmp: Path) -> bytes:
    b = epub.EpubBook()
    b.set_identifier("mt-test")
    b.set_title("Ein Hund läuft")
    b.set_language("de")
    chapters = []
    for k, (title, body) in enumerate(CHAPTERS):
        c = epub.EpubHtml(title=title, file_name=f"kapitel{k}.xhtml", lang="de")
        c.content = f"<h1>{title}</h1>{body}"
        b.add_item(c)
        chapters.append(c)
    b.toc = chapters
    b.add_item(epub.EpubNcx())
    b.add_item(epub.EpubNav())
    b.spine = ["nav", *chapters]
    path = tmp / "buch.epub"
    epub.write_epub(str(path), b)
    return path.read_bytes()


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> bytes:
    return german_book(tmp_path_factory.mktemp("epub"))


def test_a_books_chapters_contents_and_title_come_out_translated_and_it_opens(book, tmp_path):
    out = translate_document(Upper(), book, "epub", DocumentConfig(input_type="epub"), "de")
    assert isinstance(out, bytes)
    with zipfile.ZipFile(io.BytesIO(out)) as z:
        first = z.infolist()[0]
        assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
    (tmp_path / "en.epub").write_bytes(out)
    read = epub.read_epub(str(tmp_path / "en.epub"))
    assert read.get_metadata("DC", "title")[0][0] == "EIN HUND LÄUFT"
    # documents
    texts = {item.file_name: item.get_content().decode() for item in read.get_items_of_type(9)}
    assert "DER MANN SIEHT EIN <b>ROTES</b> HAUS." in texts["kapitel0.xhtml"]
    chapter = next(
        data for name, data in members(out).items() if name.endswith("kapitel0.xhtml")
    ).decode()
    assert "EIN HUND&#160;LÄUFT." in chapter  # XHTML: no &nbsp;
    assert 'alt="EIN BILD"' in texts["kapitel1.xhtml"]
    for name, data in members(out).items():
        if name.endswith((".xhtml", ".ncx")):
            etree.fromstring(data)  # well-formed XML still
    ncx = next(data for name, data in members(out).items() if name.endswith(".ncx")).decode()
    assert "<text>ERSTES KAPITEL</text>" in ncx and "<text>ZWEITES KAPITEL</text>" in ncx
    assert "ERSTES KAPITEL" in texts["nav.xhtml"]


def test_a_zip_that_is_not_an_epub_is_refused(book):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "text/plain")
    with pytest.raises(MtError, match="not an EPUB file"):
        translate_document(Upper(), out.getvalue(), "epub", DocumentConfig(input_type="epub"), "de")


def test_an_epub_whose_text_is_encrypted_is_refused(book):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, content in members(book).items():
            z.writestr(name, content)
        z.writestr(
            "META-INF/encryption.xml",
            b'<encryption><EncryptedData><CipherReference URI="EPUB/kapitel0.xhtml"/>'
            b"</EncryptedData></encryption>",
        )
    with pytest.raises(MtError, match="DRM"):
        translate_document(Upper(), out.getvalue(), "epub", DocumentConfig(input_type="epub"), "de")
