"""OpenDocument text and presentations: paragraphs, headings, spans, links, notes, headers and the
title translated, everything else as it was. Built with odfpy, which reads what comes out."""

from __future__ import annotations

import io
import re
import zipfile

import pytest

from mt_cli.config import DocumentConfig
from mt_cli.documents import translate_document
from mt_cli.errors import MtError

odf = pytest.importorskip("odf")
from odf import teletype  # noqa: E402
from odf.draw import Frame, Page, TextBox  # noqa: E402
from odf.opendocument import OpenDocumentPresentation, OpenDocumentText, load  # noqa: E402
from odf.style import Footer, MasterPage, PageLayout, Style, TextProperties  # noqa: E402
from odf.text import A, H, LineBreak, Note, NoteBody, NoteCitation, P, PageNumber, Span, Tab  # noqa: E402
from test_documents_docx import Reverse, Upper, members  # noqa: E402


def translated(data: bytes, kind: str, engine=None) -> bytes:
    out = translate_document(engine or Upper(), data, kind, DocumentConfig(input_type=kind), "de")
    assert isinstance(out, bytes)
    return out


def saved(document) -> bytes:
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def german_text() -> bytes:
    d = OpenDocumentText()
    bold = Style(name="Fett", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    d.automaticstyles.addElement(bold)
    layout = PageLayout(name="Seite")
    d.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    footer = Footer()
    page = P(text="Seite ")
    page.addElement(PageNumber(selectpage="current", text="1"))
    footer.addElement(page)
    master.addElement(footer)
    d.masterstyles.addElement(master)
    d.meta.addElement(__import__("odf.dc", fromlist=["Title"]).Title(text="Ein Hund läuft"))
    d.text.addElement(H(outlinelevel=1, text="Ein Hund läuft"))
    p = P(text="Der Mann sieht ein ")
    p.addElement(Span(stylename=bold, text="rotes"))
    p.addText(" Haus.")
    p.addElement(Tab())
    p.addText("Ein Hund läuft.")
    d.text.addElement(p)
    p = P(text="Mehr auf ")
    p.addElement(A(href="https://example.com/de", text="unserer Seite"))
    p.addText(" im Netz.")
    note = Note(noteclass="footnote", id="n1")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text="Eine Frau liest."))
    note.addElement(body)
    p.addElement(note)
    p.addElement(LineBreak())
    p.addText("Zwei Männer.")
    d.text.addElement(p)
    return saved(d)


@pytest.fixture(scope="module")
def text_document() -> bytes:
    return german_text()


def paragraphs(data: bytes) -> list[str]:
    document = load(io.BytesIO(data))
    return [
        teletype.extractText(p)
        for p in document.getElementsByType(P) + document.getElementsByType(H)
    ]


def test_a_text_document_comes_out_translated_with_its_spans_links_notes_footer_and_title(
    text_document,
):
    out = translated(text_document, "odt")
    before, after = paragraphs(text_document), paragraphs(out)
    assert len(after) == len(before)
    # the footer's page number "1" upper-cases to itself
    assert after == [t.upper() for t in before]
    content = members(out)["content.xml"].decode()
    assert '<text:span text:style-name="Fett">ROTES</text:span>' in content
    assert re.search(
        r'<text:a [^>]*xlink:href="https://example.com/de"[^>]*>UNSERER SEITE</text:a>', content
    )
    assert content.count("<text:note ") == 1 and content.count("<text:tab/>") == 1
    assert "<dc:title>EIN HUND LÄUFT</dc:title>" in members(out)["meta.xml"].decode()
    assert "<text:page-number" in members(out)["styles.xml"].decode()
    for name, data in members(text_document).items():
        if name not in ("content.xml", "styles.xml", "meta.xml"):
            assert members(out)[name] == data, name
    assert list(members(out))[0] == "mimetype"


def test_a_span_follows_its_word_when_the_translation_reorders_them(text_document):
    content = members(translated(text_document, "odt", Reverse()))["content.xml"].decode()
    assert '<text:span text:style-name="Fett">ROTES</text:span>' in content


def german_presentation() -> bytes:
    d = OpenDocumentPresentation()
    layout = PageLayout(name="Folie")
    d.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    d.masterstyles.addElement(master)
    for words in ("Ein Hund läuft.", "Zwei Männer sitzen."):
        page = Page(masterpagename=master)
        frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
        box = TextBox()
        box.addElement(P(text=words))
        frame.addElement(box)
        page.addElement(frame)
        d.presentation.addElement(page)
    return saved(d)


def test_a_presentations_frames_are_translated_and_its_pages_kept():
    data = german_presentation()
    out = translated(data, "odp")
    assert paragraphs(out) == ["EIN HUND LÄUFT.", "ZWEI MÄNNER SITZEN."]
    assert members(out)["content.xml"].count(b"<draw:page ") == 2
    with pytest.raises(MtError, match="not an ODT file"):
        translated(data, "odt")


def test_a_part_with_nothing_to_translate_is_written_as_it_was_byte_for_byte():
    d = OpenDocumentText()
    d.text.addElement(P(text="Ein Hund läuft."))
    data = saved(d)
    # lxml: <a/>
    assert b"<office:automatic-styles></office:automatic-styles>" in members(data)["styles.xml"]
    out = translated(data, "odt")
    assert {name for name, old in members(data).items() if members(out)[name] != old} == {
        "content.xml"
    }


def test_an_encrypted_or_macro_carrying_opendocument_file_is_refused_in_one_line():
    data = german_presentation()

    def changed(extra: dict[str, bytes]) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for name, content in {**members(data), **extra}.items():
                z.writestr(name, content)
        return out.getvalue()

    encrypted = members(data)["META-INF/manifest.xml"].replace(
        b"</manifest:manifest>", b"<manifest:encryption-data/></manifest:manifest>"
    )
    with pytest.raises(MtError, match="an encrypted \\(password-protected\\) ODP file"):
        translated(changed({"META-INF/manifest.xml": encrypted}), "odp")
    with pytest.raises(MtError, match="an ODP file with macros"):
        translated(changed({"Basic/Standard/Module1.xml": b"<x/>"}), "odp")
