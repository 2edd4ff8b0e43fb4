"""Plain-text documents: sentences split with their spacing kept, paragraphs translated as the
sentences they hold, the document's blank lines and indentation kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from mt_cli import Translator
from mt_cli.documents.aligned import Aligned
from mt_cli.documents.plain_text import paragraphs, translate_text
from mt_cli.documents.sentences import split
from mt_cli.errors import MtError

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode"
MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


def _whole(sentences) -> str:
    return "".join(s.lead + s.text + s.trail for s in sentences)


def test_german_abbreviations_and_ordinals_stay_inside_their_sentence_and_spacing_is_kept():
    text = 'Herr Dr. Müller kam am 3. Mai um 9 Uhr.  Er sagte: "Hallo!"\nDann ging er.   '
    got = split(text, "de")
    assert [s.text for s in got] == [
        "Herr Dr. Müller kam am 3. Mai um 9 Uhr.",
        'Er sagte: "Hallo!"',
        "Dann ging er.",
    ]
    assert _whole(got) == text


def test_chinese_splits_at_full_width_stops():
    assert [s.text for s in split("我来了。你呢？好的！", "zh")] == ["我来了。", "你呢？", "好的！"]


@pytest.mark.skipif(not (MULTI30K / "test2016.de").is_file(), reason="Multi30k not found")
def test_joined_sentences_of_a_real_test_set_come_back_whole_byte_for_byte():
    lines = (MULTI30K / "test2016.de").read_text(encoding="utf-8").splitlines()[:400]
    for i in range(0, len(lines), 5):
        text = " ".join(lines[i : i + 5])
        assert _whole(split(text, "de")) == text


def test_a_bad_language_code_is_one_clear_error():
    with pytest.raises(MtError, match="language code"):
        split("Hallo.", "de; rm -rf")


def test_paragraphs_cut_at_blank_lines_and_put_back_are_the_text():
    text = "  A b.\nC d.\n\n\n\tE f.\n \nG.\n"
    parts = paragraphs(text)
    assert "".join(parts) == text
    assert [p for p in parts[::2]] == ["  A b.\nC d.", "E f.", "G.\n"]


def test_a_paragraph_translates_as_its_sentences_one_by_one_joined_and_the_layout_is_kept():
    tr = Translator.load(FIXTURE / "model.pt", device="cpu")
    lines = (FIXTURE / "src.txt").read_text(encoding="utf-8").splitlines()[:24]
    groups = [lines[i : i + n] for i, n in zip((0, 4, 9, 12, 18), (4, 5, 3, 6, 6))]
    text = (
        "  "
        + "\n\n".join(" ".join(g) for g in groups[:3])
        + "\n \n\n"
        + "\n\n".join(" ".join(g) for g in groups[3:])
    )
    want_groups = [" ".join(tr.translate([s])[0] for s in g) for g in groups]
    want = "  " + "\n\n".join(want_groups[:3]) + "\n \n\n" + "\n\n".join(want_groups[3:])
    # the fixture's lines are sentences
    assert [s.text for s in split(" ".join(groups[0]), "de")] == groups[0]
    assert translate_text(tr, text, "de") == want


class Scripted:
    """A translator with fixed answers, for the spacing rules alone."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def translate_aligned(self, lines, alignment=False) -> list[Aligned]:
        return [Aligned(self.answers[line]) for line in lines]


def test_sentences_written_without_spaces_get_one_in_a_spaced_script_and_lose_it_the_other_way():
    zh_en = Scripted({"我来了。": "I came.", "你呢？": "And you?"})
    assert translate_text(zh_en, "我来了。你呢？", "zh") == "I came. And you?"  # type: ignore[arg-type]
    en_zh = Scripted({"I came.": "我来了。", "And you?": "你呢？"})
    assert translate_text(en_zh, "I came. And you?", "en") == "我来了。你呢？"  # type: ignore[arg-type]
    assert translate_text(en_zh, "I came.\nAnd you?", "en") == "我来了。\n你呢？"  # type: ignore[arg-type]  # a line break stays


def test_mt_translate_reads_a_document_by_its_extension_or_from_stdin_when_told_its_type(tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    tr = Translator.load(FIXTURE / "model.pt", device="cpu")
    page = "<p>Rot hund.</p>\n<pre>Rot hund.</pre>\n"
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    base = ["translate", "--checkpoint", str(FIXTURE / "model.pt"), "--source-lang", "de"]
    by_name = CliRunner().invoke(
        app, [*base, str(tmp_path / "page.html"), "--output", str(tmp_path / "out.html")]
    )
    assert by_name.exit_code == 0, by_name.output
    want = tr.translate_document(page, "html", source_lang="de")
    assert (tmp_path / "out.html").read_text(encoding="utf-8") == want
    assert want.endswith("<pre>Rot hund.</pre>\n") and want != page
    from_stdin = CliRunner().invoke(app, [*base, "--input-type", "html"], input=page)
    assert from_stdin.exit_code == 0 and from_stdin.stdout == want
    as_lines = CliRunner().invoke(
        app, base, input=page
    )  # stdin without a type: one sentence per line
    assert as_lines.stdout.count("\n") == 2 and "<p>" not in as_lines.stdout


def test_per_line_options_on_a_document_and_a_file_that_is_not_utf8_are_one_clear_error(tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    (tmp_path / "page.html").write_text("<p>Rot hund.</p>", encoding="utf-8")
    (tmp_path / "latin1.md").write_bytes("Größe.".encode("latin-1"))
    base = ["translate", "--checkpoint", str(FIXTURE / "model.pt")]
    jsonl = CliRunner().invoke(app, [*base, str(tmp_path / "page.html"), "--format", "jsonl"])
    assert (
        jsonl.exit_code != 0
        and "need --input-type lines" in jsonl.output
        and "Traceback" not in jsonl.output
    )
    latin = CliRunner().invoke(app, [*base, str(tmp_path / "latin1.md")])
    assert latin.exit_code != 0 and "latin1.md: not UTF-8 text" in latin.output
