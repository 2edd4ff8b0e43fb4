"""gettext PO files: untranslated entries get their msgid's translation in one batch, placeholders
come through unchanged (msgfmt --check is the judge), plural forms follow the header, and every
other byte of the file stays as it was."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import polib
import pytest

from engines import Recorder
from mt_cli import Translator
from mt_cli.config import DocumentConfig
from mt_cli.documents.po import translate_po
from mt_cli.documents.protect import BRACE, PRINTF, Protector
from mt_cli.errors import MtError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
APP = FIXTURES / "documents" / "app.po"
MODEL = FIXTURES / "decode" / "model.pt"
CFG = DocumentConfig()
needs_msgfmt = pytest.mark.skipif(
    shutil.which("msgfmt") is None,
    reason="msgfmt not found (Debian's gettext package: apt-get install gettext)",
)


def _msgfmt_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True, text=True
    )


def _placeholders(text: str) -> list[str]:
    return sorted(re.findall(f"%%|{PRINTF}|{BRACE}", text))


@pytest.fixture(scope="module")
def tr() -> Translator:
    return Translator.load(MODEL, device="cpu")


@needs_msgfmt
@pytest.mark.parametrize("protect", [True, False])
def test_the_translated_file_passes_msgfmt_check_with_every_placeholder_kept(tr, tmp_path, protect):
    assert _msgfmt_check(APP).returncode == 0  # the source is a valid catalogue
    out = tmp_path / "app.po"
    out.write_text(
        tr.translate_document(APP.read_text(encoding="utf-8"), "po", protect=protect),
        encoding="utf-8",
    )
    done = _msgfmt_check(out)
    assert done.returncode == 0 and not done.stderr, done.stderr
    for entry in polib.pofile(str(out)):
        if entry.obsolete:
            continue
        for translated in entry.msgstr_plural.values() if entry.msgid_plural else [entry.msgstr]:
            assert translated, entry.msgid
            assert _placeholders(translated) == _placeholders(entry.msgid), (
                entry.msgid,
                translated,
            )


@needs_msgfmt
def test_msgfmt_rejects_swapped_conversions_and_plain_ones_the_model_swapped_are_put_back_in_order(
    tmp_path,
):
    src = '#, c-format\nmsgid "%s has %d files"\nmsgstr ""\n'
    swapped = tmp_path / "swapped.po"
    swapped.write_text(src.replace('msgstr ""', 'msgstr "%d Dateien hat %s"'), encoding="utf-8")
    assert _msgfmt_check(swapped).returncode != 0  # the oracle sees the difference
    engine = Recorder({"7001 has 7002 files": "7002 Dateien hat 7001"})
    out = translate_po(engine, src, "en", Protector(), CFG)  # type: ignore[arg-type]
    assert out == '#, c-format\nmsgid "%s has %d files"\nmsgstr "%s Dateien hat %d"\n'


SMALL = """\
# Header comment.
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=3; plural=(n==1 ? 0 : n==2 ? 1 : 2);\\n"

#. generated comment
#: src/a.c:1
#, c-format
msgctxt "button"
msgid "Open %s"
msgstr ""

#, fuzzy
msgid "Close"
msgstr "Schliessen"

msgid "One file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

msgid ""
"First line.\\n"
"Second line.\\n"
msgstr ""

#~ msgid "Gone"
#~ msgstr ""
"""


def test_only_the_new_msgstrs_change_in_one_batch_none_marked_fuzzy_and_plurals_follow_nplurals():
    engine = Recorder()
    out = translate_po(engine, SMALL, "en", None, CFG)  # type: ignore[arg-type]
    assert engine.asked == [["Open 7001", "One file", "7001 files", "First line.", "Second line."]]
    assert out == (
        SMALL.replace('msgid "Open %s"\nmsgstr ""', 'msgid "Open %s"\nmsgstr "OPEN %s"')
        .replace(
            'msgstr[0] ""\nmsgstr[1] ""',
            'msgstr[0] "ONE FILE"\nmsgstr[1] "%d FILES"\nmsgstr[2] "%d FILES"',
        )
        .replace(
            '"Second line.\\n"\nmsgstr ""\n',
            '"Second line.\\n"\nmsgstr ""\n"FIRST LINE.\\n"\n"SECOND LINE.\\n"\n',
        )
    )


def test_existing_translations_are_kept_and_replaced_with_overwrite():
    out = translate_po(Recorder(), SMALL, "en", None, DocumentConfig(overwrite=True))  # type: ignore[arg-type]
    assert 'msgid "Close"\nmsgstr "CLOSE"\n' in out
    assert "#, fuzzy\n" in out and out.count("fuzzy") == 1  # its flags are its own, as they were
    assert out.startswith(SMALL[: SMALL.index("#. generated")])  # the header entry untouched


@pytest.mark.parametrize(
    "header, keys, want",
    [
        ('"Plural-Forms: nplurals=1; plural=0;\\n"\n', 2, 1),
        ("", 4, 4),  # no header: the entry's own count
        ("", 0, 2),  # nothing to go by (a bare msgstr): two
    ],
)
def test_plural_forms_come_from_the_header_else_the_entry_else_two(header, keys, want):
    head = f'msgid ""\nmsgstr ""\n{header}\n' if header else ""
    forms = "".join(f'msgstr[{k}] ""\n' for k in range(keys)) or 'msgstr ""\n'
    src = f'{head}msgid "one"\nmsgid_plural "many"\n{forms}'
    out = translate_po(Recorder(), src, "en", None, CFG)  # type: ignore[arg-type]
    assert out.endswith(
        "".join(f'msgstr[{k}] "{"ONE" if k == 0 else "MANY"}"\n' for k in range(want))
    )


def test_placeholders_are_protected_even_with_protection_off():
    src = 'msgid "Hi %(name)s, {count} new at %1$s: 100%%"\nmsgstr ""\n'
    engine = Recorder()
    out = translate_po(engine, src, "en", None, DocumentConfig(protect=False))  # type: ignore[arg-type]
    assert "%" not in engine.asked[0][0] and "{" not in engine.asked[0][0]
    assert out.endswith('msgstr "HI %(name)s, {count} NEW AT %1$s: 100%%"\n')


def test_crlf_line_endings_and_a_bom_are_kept():
    src = '\ufeffmsgid ""\r\nmsgstr ""\r\n"Content-Type: text/plain; charset=UTF-8\\n"\r\n\r\n'
    src += 'msgid "Yes"\r\nmsgstr ""\r\n'
    out = translate_po(Recorder(), src, "en", None, CFG)  # type: ignore[arg-type]
    assert out == src.replace('msgid "Yes"\r\nmsgstr ""', 'msgid "Yes"\r\nmsgstr "YES"')


@pytest.mark.parametrize(
    "src, where",
    [
        ('msgid "a"\nmsgid "b"\nmsgstr ""\n', "line 2: "),
        ('msgid "a"\nmsgstr "say "hi""\n', "line 2: unescaped double quote found"),
        ("hello world\n", "line 1: "),
    ],
)
def test_a_po_file_polib_cannot_read_is_one_mt_error_naming_the_line(src, where):
    with pytest.raises(MtError, match=f"^{where}.*msgid"):
        translate_po(Recorder(), src, "en", None, CFG)  # type: ignore[arg-type]


def test_a_placeholder_glued_to_a_word_is_set_apart_for_the_model_and_glued_back_after():
    src = '#, c-format\nmsgid "Up to 100%% of %dpx, %s"\nmsgstr ""\n'
    masked = "Up to 100 7001 of 7002 px, 7003"
    engine = Recorder({masked: "Bis zu 100 7001 von 7002 px, Pixel 7003"})
    out = translate_po(engine, src, "en", Protector(), CFG)  # type: ignore[arg-type]
    assert engine.asked == [[masked]]
    # %s was never glued: it stays apart
    assert out.endswith('msgstr "Bis zu 100%% von %dpx, Pixel %s"\n')
    moved = Recorder({masked: "7002 px sind 7001 bei 100 7003"})
    assert translate_po(moved, src, "en", Protector(), CFG).endswith(
        'msgstr "%dpx sind %% bei 100 %s"\n'
    )  # type: ignore[arg-type]
