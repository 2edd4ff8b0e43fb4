"""Documents as real pages come: in the encoding they declare (HTML's XML declaration or meta
charset, a PO header's charset), written back in UTF-8 saying so; and template syntax of
static-site generators (Hugo's shortcodes, Jinja's and Liquid's tags) carried through untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_documents_docx import Upper
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.config import DocumentConfig
from mt_cli.documents import translate_document
from mt_cli.documents.encoding import read_document
from mt_cli.errors import MtError

MODEL = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
LATIN = (
    '<?xml version="1.0" encoding="ISO-8859-1"?>\n<html><head>'
    '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"></head>'
    "<body><p>Ein Hund läuft über die Straße.</p></body></html>\n"
)


def test_an_html_page_declared_latin_1_is_read_as_such_and_written_in_utf8_saying_so(tmp_path):
    page = tmp_path / "seite.html"
    page.write_bytes(LATIN.encode("latin-1"))
    text = read_document(page.read_bytes(), "html", str(page))
    assert "läuft über die Straße" in text
    assert 'encoding="UTF-8"' in text and "charset=UTF-8" in text and "ISO-8859-1" not in text
    result = CliRunner().invoke(
        app,
        ["translate", "--checkpoint", str(MODEL), str(page), "--output", str(tmp_path / "en.html")],
    )
    assert result.exit_code == 0, result.output
    out = (tmp_path / "en.html").read_bytes().decode("utf-8")  # UTF-8, as it now says
    assert out.startswith('<?xml version="1.0" encoding="UTF-8"?>') and "charset=UTF-8" in out


def test_a_meta_charset_windows_1252_quote_and_a_po_header_charset_are_honoured():
    html = (
        "<html><head><meta "
        'charset="windows-1252"></head><body><p>\u201eHallo\u201c</p></body></html>'
    )
    assert "\u201eHallo\u201c" in read_document(html.encode("cp1252"), "html", "x.html")
    # A page labelled ISO-8859-1 is read as browsers read it: windows-1252 (0x84 is a quote there).
    assert "\u201e" in read_document(
        b'<meta charset="iso-8859-1"><p>\x84Hallo</p>', "html", "x.html"
    )
    po = (
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=ISO-8859-15\\n"\n\nmsgid '
        '"Größe"\nmsgstr ""\n'
    )
    text = read_document(po.encode("iso-8859-15"), "po", "de.po")
    assert 'msgid "Größe"' in text and "charset=UTF-8" in text


def test_an_undeclared_non_utf8_file_and_an_unknown_encoding_get_one_line_naming_the_file():
    with pytest.raises(MtError, match=r"^x\.html: not UTF-8 text \(byte 7\); convert it"):
        read_document("<p>Straße</p>".encode("latin-1"), "html", "x.html")
    with pytest.raises(MtError, match=r"^x\.html: declares the encoding 'klingon'"):
        read_document(b'<meta charset="klingon"><p>x</p>', "html", "x.html")


@pytest.mark.parametrize(
    ("kind", "source", "kept"),
    [
        (
            "markdown",
            'Siehe [den Beitrag]({{< ref "/blog/post.md" >}}) heute.\n',
            ['({{< ref "/blog/post.md" >}})'],
        ),
        (
            "markdown",
            "{{% hinweis %}}Achtung{{% /hinweis %}} und {{ .Title }}.\n",
            ["{{% hinweis %}}", "{{ .Title }}"],
        ),
        (
            "html",
            '<p>Hallo {{ name }}, siehe {{< ref "a.md" >}}. {% if x %}Ja{% endif %}</p>',
            ["{{ name }}", '{{< ref "a.md" >}}', "{% if x %}", "{% endif %}"],
        ),
        ("text", "Hallo {{ user.name }}, willkommen.\n", ["{{ user.name }}"]),
    ],
)
def test_template_syntax_comes_through_untranslated_in_every_document_type(kind, source, kept):
    out = translate_document(Upper(), source, kind, DocumentConfig(input_type=kind), "de")
    assert isinstance(out, str)
    for span in kept:
        assert span in out, out
    assert "SIEHE" in out or "HALLO" in out or "ACHTUNG" in out
