"""PowerPoint and Excel files: slides, tables and notes, and text cells, translated with their
formatting put back by alignment; numbers, formulas and everything else as they were. Built with
python-pptx and openpyxl, which open what comes out."""

from __future__ import annotations

import io
import re
import zipfile

import pytest

from mt_cli.config import DocumentConfig
from mt_cli.documents import translate_document
from mt_cli.errors import MtError

pptx = pytest.importorskip("pptx")
openpyxl = pytest.importorskip("openpyxl")
from openpyxl.cell.rich_text import CellRichText, TextBlock  # noqa: E402
from openpyxl.cell.text import InlineFont  # noqa: E402
from pptx.util import Inches  # noqa: E402
from test_documents_docx import Reverse, Upper, members  # noqa: E402


def translated(data: bytes, kind: str, engine=None) -> bytes:
    out = translate_document(engine or Upper(), data, kind, DocumentConfig(input_type=kind), "de")
    assert isinstance(out, bytes)
    return out


def german_slides() -> bytes:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Ein Hund läuft"
    body = slide.placeholders[1].text_frame
    body.text = "Der Mann sieht ein "
    bold = body.paragraphs[0].add_run()
    bold.text, bold.font.bold = "rotes", True
    tail = body.paragraphs[0].add_run()
    tail.text = " Haus."
    link = body.add_paragraph().add_run()
    link.text = "Unsere Seite"
    link.hyperlink.address = "https://example.com/de"
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(
        Inches(1), Inches(5), Inches(3), Inches(1)
    ).text_frame.text = "Eine Frau sitzt."
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(6), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(1, 1).text = "Zwei Männer.", "Eine Katze."
    slide.notes_slide.notes_text_frame.text = "Langsam sprechen."
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def slides() -> bytes:
    return german_slides()


def texts(deck) -> list[str]:
    out = []
    for slide in deck.slides:
        for shape in slide.shapes:
            for inner in getattr(shape, "shapes", [shape]):
                if inner.has_text_frame:
                    out += [p.text for p in inner.text_frame.paragraphs]
                if getattr(inner, "has_table", False):
                    out += [c.text for row in inner.table.rows for c in row.cells]
        out.append(slide.notes_slide.notes_text_frame.text)
    return out


def test_a_presentation_comes_out_translated_with_its_formatting_links_tables_groups_and_notes(
    slides,
):
    before = pptx.Presentation(io.BytesIO(slides))
    for engine in (Upper(), Reverse()):
        after = pptx.Presentation(io.BytesIO(translated(slides, "pptx", engine)))
        old, new = texts(before), texts(after)
        assert len(new) == len(old)
        if isinstance(engine, Upper):
            assert new == [t.upper() for t in old]
        body = after.slides[0].placeholders[1].text_frame.paragraphs
        assert "".join(r.text for r in body[0].runs if r.font.bold).strip() == "ROTES"
        [link] = [r for r in body[1].runs if r.hyperlink.address]
        assert link.hyperlink.address == "https://example.com/de" and link.text.strip() in (
            "UNSERE SEITE",
            "SEITE UNSERE",
        )
    source, out = members(slides), members(translated(slides, "pptx"))
    assert list(out) == list(source)
    changed = {name for name in source if out[name] != source[name]}
    assert changed == {"ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml"}


S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


def shared(data: bytes) -> bytes:
    """The workbook with its text cells in a shared strings part, as Excel writes them (openpyxl
    writes inline strings), repeated texts sharing one string."""
    from lxml import etree

    files = members(data)
    sheet = etree.fromstring(files["xl/worksheets/sheet1.xml"])
    table = etree.Element(f"{{{S}}}sst", nsmap={None: S})
    index: dict[bytes, int] = {}
    for cell in sheet.iter(f"{{{S}}}c"):
        if cell.get("t") == "inlineStr":
            inline = cell.find(f"{{{S}}}is")
            key = etree.tostring(inline)
            if key not in index:
                index[key] = len(index)
                si = etree.SubElement(table, f"{{{S}}}si")
                si.extend(list(inline))
            cell.remove(inline)
            cell.set("t", "s")
            etree.SubElement(cell, f"{{{S}}}v").text = str(index[key])
    files["xl/worksheets/sheet1.xml"] = etree.tostring(
        sheet, xml_declaration=True, encoding="UTF-8", standalone=True
    )
    files["xl/sharedStrings.xml"] = etree.tostring(
        table, xml_declaration=True, encoding="UTF-8", standalone=True
    )
    files["[Content_Types].xml"] = files["[Content_Types].xml"].replace(
        b"</Types>",
        b'<Override PartName="/xl/sharedStrings.xml" '
        b'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
    )
    files["xl/_rels/workbook.xml.rels"] = files["xl/_rels/workbook.xml.rels"].replace(
        b"</Relationships>",
        b'<Relationship Id="rIdS" Target="sharedStrings.xml" '
        b'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings"/></Relationships>',
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, content in files.items():
            z.writestr(name, content)
    return out.getvalue()


def german_workbook() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Tiere"
    sheet["A1"] = "Ein Hund läuft."
    sheet["A2"] = 42
    sheet["A3"] = "=A2*2"
    sheet["B1"] = CellRichText(
        "Der Mann sieht ein ", TextBlock(InlineFont(b=True), "rotes"), " Haus."
    )
    sheet["B2"] = "Ein Hund läuft."  # the same shared string as A1
    sheet["C1"] = "2024-01-01"
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def workbook() -> bytes:
    return german_workbook()


@pytest.mark.parametrize("strings", ["shared", "inline"])
def test_a_workbooks_text_cells_are_translated_and_its_numbers_formulas_and_names_kept(
    workbook, strings
):
    source = shared(workbook) if strings == "shared" else workbook
    out = translated(source, "xlsx")
    sheet = openpyxl.load_workbook(io.BytesIO(out), rich_text=True)["Tiere"]
    assert sheet["A1"].value == "EIN HUND LÄUFT." and sheet["B2"].value == "EIN HUND LÄUFT."
    assert (
        sheet["A2"].value == 42
        and sheet["A3"].value == "=A2*2"
        and sheet["C1"].value == "2024-01-01"
    )
    rich = sheet["B1"].value
    assert isinstance(rich, CellRichText) and str(rich) == "DER MANN SIEHT EIN ROTES HAUS."
    assert [b.text for b in rich if isinstance(b, TextBlock) and b.font.b] == ["ROTES"]
    changed = {n for n, data in members(out).items() if members(source)[n] != data}
    assert changed == (
        {"xl/sharedStrings.xml"} if strings == "shared" else {"xl/worksheets/sheet1.xml"}
    )


def test_a_file_of_another_office_type_is_refused_naming_it(slides, workbook):
    with pytest.raises(MtError, match=re.escape("not an XLSX file")):
        translated(slides, "xlsx")
    with pytest.raises(MtError, match=re.escape("not a PPTX file")):
        translated(workbook, "pptx")
