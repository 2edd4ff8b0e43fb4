"""Every office and e-book type, German in and English out, through `mt translate FILE --output OUT`
and through LibreTranslate's /translate_file, with the real (tiny) fixture model: what comes out
opens in the format's own reader with as many paragraphs as went in, and both ways give the same
file as Translator.translate_document."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mt_cli import Translator
from mt_cli.cli import app
from mt_cli.documents import text_sample

pytest.importorskip("docx")
pytest.importorskip("pptx")
pytest.importorskip("openpyxl")
pytest.importorskip("odf")
pytest.importorskip("ebooklib")
from test_documents_docx import german  # noqa: E402
from test_documents_epub import german_book  # noqa: E402
from test_documents_odf import german_presentation, german_text  # noqa: E402
from test_documents_odf import paragraphs as odf_paragraphs  # noqa: E402
from test_documents_office import german_slides, german_workbook, shared  # noqa: E402

MODEL = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"


def build(kind: str, tmp: Path) -> bytes:
    return {
        "docx": lambda: german(tmp / "x.docx"),
        "pptx": german_slides,
        "xlsx": lambda: shared(german_workbook()),
        "odt": german_text,
        "odp": german_presentation,
        "epub": lambda: german_book(tmp),
    }[kind]()


def texts(kind: str, data: bytes) -> list[str]:
    """The file's paragraphs (cells, for a workbook) as its own reader gives them."""
    if kind == "docx":
        import docx

        return [p.text for p in docx.Document(io.BytesIO(data)).paragraphs]
    if kind == "pptx":
        import pptx

        deck = pptx.Presentation(io.BytesIO(data))
        return [
            p.text
            for s in deck.slides
            for sh in s.shapes
            if sh.has_text_frame
            for p in sh.text_frame.paragraphs
        ]
    if kind == "xlsx":
        import openpyxl

        return [
            str(c.value)
            for row in openpyxl.load_workbook(io.BytesIO(data)).active.iter_rows()
            for c in row
        ]
    if kind in ("odt", "odp"):
        return odf_paragraphs(data)
    from ebooklib import epub

    path = Path(tempfile.mkdtemp()) / "b.epub"
    path.write_bytes(data)
    return [i.get_content().decode() for i in epub.read_epub(str(path)).get_items_of_type(9)]


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(MODEL, device="cpu")


@pytest.mark.parametrize("kind", ["docx", "pptx", "xlsx", "odt", "odp", "epub"])
def test_each_type_comes_out_translated_from_the_command_line_and_from_the_file_api(
    kind, translator, tmp_path
):
    pytest.importorskip("fastapi")
    requests = pytest.importorskip("requests")
    from mt_cli.config import ServeConfig
    from mt_cli.serve.web_app import create_app
    from serving import Running

    source = build(kind, tmp_path)
    sample = text_sample(source, kind)  # what a server's "auto" source is detected from
    assert "Hund" in sample and "python-docx" not in sample and "<" not in sample
    expected = translator.translate_document(source, kind, source_lang="de")
    assert isinstance(expected, bytes) and expected != source
    assert len(texts(kind, expected)) == len(texts(kind, source))
    given, written = tmp_path / f"de.{kind}", tmp_path / f"en.{kind}"
    given.write_bytes(source)
    asked = [
        "translate",
        "--checkpoint",
        str(MODEL),
        str(given),
        "--output",
        str(written),
        "--source-lang",
        "de",
    ]
    result = CliRunner().invoke(app, asked)
    assert result.exit_code == 0, result.output
    assert written.read_bytes() == expected
    running = Running(
        create_app(lambda: translator, "model.pt", ServeConfig(source_lang="de", target_lang="en"))
    )
    try:
        answer = requests.post(
            running.url + "/translate_file",
            files={"file": (f"brief.{kind}", source)},
            data={"source": "de", "target": "en"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        assert requests.get(answer.json()["translatedFileUrl"], timeout=60).content == expected
    finally:
        running.stop()
