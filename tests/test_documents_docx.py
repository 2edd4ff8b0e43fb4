"""Word documents: every paragraph translated with its formatting put back by alignment, everything
else of the package as it was. The files are built with python-docx, and python-docx (the format's
own reader) opens what comes out; a scripted engine makes the expected text known."""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from collections import Counter
from pathlib import Path

import pytest

from mt_cli.config import DocumentConfig
from mt_cli.documents import translate_document
from mt_cli.documents.aligned import Aligned
from mt_cli.errors import MtError

docx = pytest.importorskip("docx")
from docx.oxml import OxmlElement  # noqa: E402
from docx.oxml.ns import qn  # noqa: E402
from docx.shared import Pt, RGBColor  # noqa: E402
from lxml import etree  # noqa: E402

MODEL = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
TEXT_PARTS = re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml")


class Upper:
    """Scripted: each word upper-cased, in its place, aligned to itself (placeholders kept)."""

    def translate_aligned(self, lines, alignment=False) -> list[Aligned]:
        out = []
        for line in lines:
            spans = [m.span() for m in re.finditer(r"\S+", line)]
            out.append(
                Aligned(
                    line.upper(), [*spans, (len(line), len(line))], [*spans, (len(line), len(line))]
                )
            )
        return out


class Reverse:
    """Scripted: the words in reverse order, upper-cased, each aligned to the word it came from."""

    def translate_aligned(self, lines, alignment=False) -> list[Aligned]:
        out = []
        for line in lines:
            text, tgt, src = "", [], []
            for m in reversed(list(re.finditer(r"\S+", line))):
                text += " " if text else ""
                tgt.append((len(text), len(text) + len(m.group())))
                src.append(m.span())
                text += m.group().upper()
            out.append(
                Aligned(text, [*tgt, (len(text), len(text))], [*src, (len(line), len(line))])
            )
        return out


def _png() -> bytes:
    """A 1x1 PNG, for an image in the document."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0\0\0\0"))
        + chunk(b"IEND", b"")
    )


def _hyperlink(paragraph, text: str, url: str) -> None:
    rid = paragraph.part.relate_to(
        url, docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK, is_external=True
    )
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rid)
    run = OxmlElement("w:r")
    props = OxmlElement("w:rPr")
    style = OxmlElement("w:u")
    style.set(qn("w:val"), "single")
    props.append(style)
    run.append(props)
    t = OxmlElement("w:t")
    t.text = text
    run.append(t)
    link.append(run)
    paragraph._p.append(link)


def _field(paragraph, instruction: str, result: str) -> None:
    """A complex field (begin, instruction, separate, its result, end), as Word writes PAGE."""
    for kind, text in (
        ("begin", None),
        ("instr", instruction),
        ("separate", None),
        ("text", result),
        ("end", None),
    ):
        run = OxmlElement("w:r")
        if kind == "instr":
            el = OxmlElement("w:instrText")
            el.text = text
        elif kind == "text":
            el = OxmlElement("w:t")
            el.text = text
        else:
            el = OxmlElement("w:fldChar")
            el.set(qn("w:fldCharType"), kind)
        run.append(el)
        paragraph._p.append(run)


def _tracked(paragraph, inserted: str, deleted: str) -> None:
    """A tracked change: `inserted` in w:ins, then `deleted` in w:del (w:delText)."""
    for kind, text in (("w:ins", inserted), ("w:del", deleted)):
        change, run = OxmlElement(kind), OxmlElement("w:r")
        change.set(qn("w:id"), "9" if kind == "w:ins" else "10")
        change.set(qn("w:author"), "mt")
        t = OxmlElement("w:t" if kind == "w:ins" else "w:delText")
        t.text = text
        run.append(t)
        change.append(run)
        paragraph._p.append(change)


def _bookmark(paragraph, name: str) -> None:
    start, end = OxmlElement("w:bookmarkStart"), OxmlElement("w:bookmarkEnd")
    start.set(qn("w:id"), "7")
    start.set(qn("w:name"), name)
    end.set(qn("w:id"), "7")
    paragraph._p.insert(1, start)
    paragraph._p.append(end)


def german(path: Path) -> bytes:
    d = docx.Document()
    heading = d.add_heading("Ein Hund läuft", level=1)
    _bookmark(heading, "start")
    p = d.add_paragraph("Der Mann sieht ein ")
    p.add_run("rotes").bold = True
    p.add_run(" Haus. Ein Hund läuft.")
    d.add_comment(p.runs[1], text="Bitte prüfen.", author="mt")
    p = d.add_paragraph()
    red = p.add_run("Eine Frau")
    red.italic, red.font.color.rgb, red.font.size = True, RGBColor(0xFF, 0, 0), Pt(14)
    p.add_run(" sitzt auf einer Bank.\tSie liest ")
    code = p.add_run("print(x)")
    code.font.name = "Courier New"
    p.add_run(" und lacht.")
    p = d.add_paragraph("Mehr steht auf ")
    _hyperlink(p, "unserer Seite", "https://example.com/de")
    p.add_run(" im Netz.")
    d.add_paragraph("Ein Bild:").add_run().add_picture(io.BytesIO(_png()))
    table = d.add_table(rows=2, cols=2)
    for cell, text in zip(table._cells, ["Ein Hund.", "Zwei Männer.", "Eine rote Katze.", ""]):
        cell.text = text
    d.add_paragraph("")
    _tracked(d.add_paragraph("Ein Hund "), "läuft", "rennt")
    d.sections[0].header.paragraphs[0].text = "Ein Mann läuft."
    footer = d.sections[0].footer.paragraphs[0]
    footer.add_run("Seite ")
    _field(footer, " PAGE ", "1")
    d.save(path)
    return path.read_bytes()


def translated(data: bytes, engine=None) -> bytes:
    out = translate_document(
        engine or Upper(), data, "docx", DocumentConfig(input_type="docx"), "de"
    )
    assert isinstance(out, bytes)
    return out


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def paragraphs(data: bytes) -> list[etree._Element]:
    return [
        p
        for name, xml in members(data).items()
        if TEXT_PARTS.fullmatch(name)
        for p in etree.fromstring(xml).iter(f"{W}p")
    ]


def run_properties(p: etree._Element) -> Counter:
    """The properties of the runs that hold text, as canonical XML."""
    found: Counter = Counter()
    for r in p.iter(f"{W}r"):
        if any((t.text or "").strip() for t in r.iter(f"{W}t")):
            props = r.find(f"{W}rPr")
            found[b"" if props is None else etree.tostring(props, method="c14n")] += 1
    return found


def skeleton(p: etree._Element) -> Counter:
    """What a paragraph holds besides its text and its runs' boundaries: every element that is
    not a run, a run's properties or a text, with its attributes and what it holds."""
    found: Counter = Counter()
    for el in p.iter():
        if (
            el.tag in (f"{W}r", f"{W}t", f"{W}rPr")
            or el.getparent() is not None
            and el.getparent().tag == f"{W}rPr"
        ):
            continue
        if el.tag == f"{W}p" and el is not p:
            continue
        found[(el.tag, tuple(sorted(el.attrib.items())))] += 1
    return found


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> bytes:
    return german(tmp_path_factory.mktemp("docx") / "de.docx")


def test_every_paragraph_is_translated_in_order_and_the_format_reader_opens_the_result(source):
    out = translated(source)
    document = docx.Document(io.BytesIO(out))
    before = [p.text for p in docx.Document(io.BytesIO(source)).paragraphs]
    after = [p.text for p in document.paragraphs]
    assert len(after) == len(before)
    for a, b in zip(before, after):
        if "print(x)" in a:  # code-styled text stays as it was
            assert "print(x)" in b and "SIE LIEST" in b
        else:
            assert b == a.upper()
    assert [c.text for c in document.tables[0]._cells] == [
        "EIN HUND.",
        "ZWEI MÄNNER.",
        "EINE ROTE KATZE.",
        "",
    ]
    assert document.sections[0].header.paragraphs[0].text == "EIN MANN LÄUFT."
    # the field's result as it was
    assert document.sections[0].footer.paragraphs[0].text == "SEITE 1"
    assert "BITTE PRÜFEN." in members(out)["word/comments.xml"].decode()  # comments too
    changed = next(p for p in paragraphs(out) if p.find(f"{W}del") is not None)
    # inserted text: translated
    assert "".join(t.text for t in changed.find(f"{W}ins").iter(f"{W}t")) == "LÄUFT"
    # deleted: as it was
    assert "".join(t.text for t in changed.find(f"{W}del").iter(f"{W}delText")) == "rennt"


def test_members_without_text_are_byte_identical_and_text_parts_keep_their_skeleton(source):
    before, after = members(source), members(translated(source))
    assert list(before) == list(after)
    for name in before:
        if not TEXT_PARTS.fullmatch(name):
            assert after[name] == before[name], name
    old, new = paragraphs(source), paragraphs(translated(source))
    assert len(old) == len(new)
    for a, b in zip(old, new):
        assert skeleton(b) == skeleton(a), etree.tostring(a)


def test_a_bold_word_stays_bold_on_its_translation_and_every_property_survives(source):
    for engine in (Upper(), Reverse()):
        document = docx.Document(io.BytesIO(translated(source, engine)))
        bold = [r.text for p in document.paragraphs for r in p.runs if r.bold]
        assert "".join(bold).strip() == "ROTES"
        red = [r for p in document.paragraphs for r in p.runs if r.italic]
        assert "".join(r.text for r in red).strip() == (
            "EINE FRAU" if isinstance(engine, Upper) else "FRAU EINE"
        )
        assert all(r.font.color.rgb == RGBColor(0xFF, 0, 0) and r.font.size == Pt(14) for r in red)
        for a, b in zip(paragraphs(source), paragraphs(translated(source, engine))):
            assert set(run_properties(a)) <= set(run_properties(b))


def test_links_images_tables_and_fields_keep_their_count_and_targets(source):
    out = translated(source)
    for name in ("hyperlink", "drawing", "tbl", "fldChar", "instrText", "tab", "bookmarkStart"):
        assert members(out)["word/document.xml"].count(f"<w:{name}".encode()) == members(source)[
            "word/document.xml"
        ].count(f"<w:{name}".encode()), name
    rels = "word/_rels/document.xml.rels"
    assert members(out)[rels] == members(source)[rels]
    link = docx.Document(io.BytesIO(out)).paragraphs[3]._p.find(f"{W}hyperlink")
    assert "".join(t.text for t in link.iter(f"{W}t")) == "UNSERER SEITE"


def test_the_real_model_translates_a_docx_through_the_command_line(source, tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    (tmp_path / "de.docx").write_bytes(source)
    result = CliRunner().invoke(
        app,
        [
            "translate",
            "--checkpoint",
            str(MODEL),
            str(tmp_path / "de.docx"),
            "--output",
            str(tmp_path / "en.docx"),
        ],
    )
    assert result.exit_code == 0, result.output
    document = docx.Document(tmp_path / "en.docx")
    assert len(document.paragraphs) == len(docx.Document(io.BytesIO(source)).paragraphs)
    assert any(r.bold for p in document.paragraphs for r in p.runs)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"Ein Hund.\n", "not a DOCX file: not a zip package"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100), "encrypted"),
    ],
)
def test_a_file_that_is_not_a_docx_is_refused_in_one_line(data, message):
    with pytest.raises(MtError, match=message):
        translated(data)


def test_a_zip_bomb_a_macro_enabled_file_and_a_zip_without_a_document_are_refused(source):
    def zipped(files: dict[str, bytes]) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in files.items():
                z.writestr(name, data)
        return out.getvalue()

    with pytest.raises(MtError, match="zip bomb"):
        translated(zipped({**members(source), "word/media/big.bin": bytes(300 << 20)}))
    with pytest.raises(MtError, match="macro-enabled"):
        translated(zipped({**members(source), "word/vbaProject.bin": b"x"}))
    with pytest.raises(MtError, match="not a DOCX file"):
        translated(zipped({"hello.txt": b"Hallo"}))
    locked = bytearray(zipped(members(source)))  # the encrypted flag set on the first member
    locked[6] |= 1
    central = locked.rfind(b"PK\x01\x02", 0, len(locked))
    while central > 0:  # and in the central directory, where zipfile reads it
        locked[central + 8] |= 1
        central = locked.rfind(b"PK\x01\x02", 0, central)
    with pytest.raises(MtError, match="encrypted members"):
        translated(bytes(locked))


def test_libretranslates_file_api_translates_a_docx_and_lists_the_type(source):
    pytest.importorskip("fastapi")
    requests = pytest.importorskip("requests")
    from mt_cli import Translator
    from mt_cli.config import ServeConfig
    from mt_cli.serve.web_app import create_app
    from serving import Running, call

    translator = Translator.load(MODEL, device="cpu")
    running = Running(
        create_app(lambda: translator, "model.pt", ServeConfig(source_lang="de", target_lang="en"))
    )
    try:
        assert ".docx" in call(running.url, "GET", "/frontend/settings")[2]["supportedFilesFormat"]
        for source_lang in ("de", "auto"):
            answer = requests.post(
                running.url + "/translate_file",
                files={"file": ("brief.docx", source)},
                data={"source": source_lang, "target": "en"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            download = requests.get(answer.json()["translatedFileUrl"], timeout=60)
            assert download.content == translator.translate_document(source, "docx")
            assert download.headers["content-type"].startswith("application/vnd.openxmlformats")
            assert len(docx.Document(io.BytesIO(download.content)).paragraphs) == len(
                docx.Document(io.BytesIO(source)).paragraphs
            )
        broken = requests.post(
            running.url + "/translate_file",
            files={"file": ("brief.docx", b"Hallo")},
            data={"source": "de", "target": "en"},
            timeout=60,
        )
        assert broken.status_code == 400 and "not a DOCX file" in broken.json()["error"], (
            broken.text
        )
    finally:
        running.stop()
