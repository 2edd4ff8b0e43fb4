"""Subtitles (SubRip and WebVTT): everything but the cue text comes out byte for byte, sentences
that run over cues are translated whole and cut over them again, tags come out exactly once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engines import Recorder
from mt_cli import Translator
from mt_cli.config import DocumentConfig
from mt_cli.documents.protect import Protector
from mt_cli.documents.subtitles import cut, translate_srt, translate_vtt
from mt_cli.errors import MtError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FILM = FIXTURES / "documents" / "film.srt"
MODEL = FIXTURES / "decode" / "model.pt"
CFG = DocumentConfig()


def _cue(number: int, timing: str, *text: str) -> str:
    return "\n".join([str(number), timing, *text]) + "\n"


def _blocks(text: str) -> list[list[str]]:
    return [block.split("\n") for block in text.strip("\n").split("\n\n")]


@pytest.fixture(scope="module")
def tr() -> Translator:
    return Translator.load(MODEL, device="cpu")


def test_srt_numbers_and_timings_come_out_byte_identical_and_each_cue_as_the_model_translates_it(
    tr,
):
    src = FILM.read_text(encoding="utf-8")
    out = tr.translate_document(src, "srt", source_lang="de")
    got, want = _blocks(out), _blocks(src)
    assert len(want) == 12
    # numbers, timings (with X1.. settings) as they were
    assert [b[:2] for b in got] == [b[:2] for b in want]
    assert out.endswith("\n") and out.count("\n\n") == src.count("\n\n")

    def one(sentence: str) -> str:
        return tr.translate([sentence])[0]

    for k, sentence in [
        (0, "Und rot rot sieht gross."),
        (1, "Sieht schnell frau."),
        (11, "Läuft blau ball ball."),
    ]:
        assert got[k][2:] == [one(sentence)]
    # cues 4 and 5 are one sentence: translated whole, then cut over both, neither left empty
    assert " ".join(got[3][2:] + got[4][2:]) == one("Läuft rot frau ball sieht blau.")
    assert len(got[3][2:]) == len(got[4][2:]) == 1 and all(got[3][2:] + got[4][2:])
    assert got[5][2:] == [f"<i>{one('Baum gross.')}</i>"]
    assert got[6][2:] == ["{\\an8}" + one("Ball rot kind.")]
    assert len(got[7][2:]) == 2 and " ".join(got[7][2:]) == one("Gross sieht hat hund schnell.")
    # dialogue: line by line
    assert got[8][2:] == [
        "- " + one("Blau rot."),
        "- " + one("Rot schnell."),
    ]


def test_a_sentence_spanning_two_cues_is_translated_once_whole_and_cut_over_both_by_their_lengths():
    src = _cue(1, "00:00:01,000 --> 00:00:02,000", "I think that") + "\n"
    src += _cue(2, "00:00:02,000 --> 00:00:05,000", "we should go home now.")
    engine = Recorder(
        {"I think that we should go home now.": "Ich glaube, wir sollten jetzt nach Hause gehen."}
    )
    out = translate_srt(engine, src, "en", None, CFG)  # type: ignore[arg-type]
    assert engine.asked == [["I think that we should go home now."]]
    assert _blocks(out) == [
        ["1", "00:00:01,000 --> 00:00:02,000", "Ich glaube, wir"],
        ["2", "00:00:02,000 --> 00:00:05,000", "sollten jetzt nach Hause gehen."],
    ]


def test_cues_are_joined_only_until_a_sentence_ends_four_at_most_and_the_file_is_one_batch():
    texts = ["Hello.", "one", "two", "three", "four", "five", "<i>Bye!</i>"]
    src = "\n".join(
        _cue(k + 1, f"00:00:0{k},000 --> 00:00:0{k},900", t) for k, t in enumerate(texts)
    )
    engine = Recorder()
    translate_srt(engine, src, "en", None, CFG)  # type: ignore[arg-type]
    assert engine.asked == [["Hello.", "one two three four", "five Bye!"]]


def test_cut_shares_words_by_weight_leaves_no_piece_empty_and_cuts_chinese_between_characters():
    assert cut("a b c d e f g h", [1, 3]) == ["a b", "c d e f g h"]
    # fewer words than pieces: the last go empty
    assert cut("one two", [9, 1, 1]) == [
        "one",
        "two",
        "",
    ]
    assert cut("alpha beta gamma", [100, 1, 1]) == ["alpha", "beta", "gamma"]
    # a cut after punctuation wins
    assert cut("Re dog. Blue and tree.", [1, 1]) == [
        "Re dog.",
        "Blue and tree.",
    ]
    assert cut("我们应该在晚上之前去大房子。", [1, 1]) == ["我们应该在晚上", "之前去大房子。"]
    # punctuation stays with its sentence
    assert cut("我们走吧。好的！", [1, 1]) == [
        "我们走吧。",
        "好的！",
    ]
    assert cut('The <font color="red">red</font> dog', [1, 1, 1]) == [
        "The",
        '<font color="red">red</font>',
        "dog",
    ]


def test_a_two_line_cue_is_rewrapped_near_the_middle_a_one_line_cue_stays_one_and_none_blank():
    src = _cue(1, "00:00:01,000 --> 00:00:03,000", "Hello there", "my old friend.") + "\n"
    src += _cue(2, "00:00:03,000 --> 00:00:06,000", "Short line, long translation.") + "\n"
    src += _cue(3, "00:00:06,000 --> 00:00:07,000", "Yes,", "sir.")
    answers = {
        "Hello there my old friend.": "Hallo da, mein alter Freund aus alten Tagen.",
        "Short line, long translation.": (
            "Eine kurze Zeile, aber eine viel, viel längere Übersetzung."
        ),
        "Yes, sir.": "Jawohl.",
    }
    out = translate_srt(Recorder(answers), src, "en", None, CFG)  # type: ignore[arg-type]
    assert [b[2:] for b in _blocks(out)] == [
        ["Hallo da, mein alter", "Freund aus alten Tagen."],
        ["Eine kurze Zeile, aber eine viel, viel längere Übersetzung."],
        ["Jawohl."],  # one word cannot fill two lines; a blank line would end the cue
    ]


def test_crlf_line_endings_a_bom_trailing_blank_lines_and_a_cue_without_text_are_kept():
    src = (
        "\ufeff1\r\n00:00:01,000 --> 00:00:02,000\r\nHello there\r\nmy friend.\r\n\r\n"
        "2\r\n00:00:03,000 --> 00:00:04,000\r\n\r\n"
        "3\r\n00:00:05,000 --> 00:00:06,000\r\nBye.\r\n\r\n\r\n"
    )
    out = translate_srt(Recorder(), src, "en", None, CFG)  # type: ignore[arg-type]
    assert out == (
        "\ufeff1\r\n00:00:01,000 --> 00:00:02,000\r\nHELLO THERE\r\nMY FRIEND.\r\n\r\n"
        "2\r\n00:00:03,000 --> 00:00:04,000\r\n\r\n"
        "3\r\n00:00:05,000 --> 00:00:06,000\r\nBYE.\r\n\r\n\r\n"
    )
    no_final_newline = "1\n00:00:01,000 --> 00:00:02,000\nBye."
    assert translate_srt(Recorder(), no_final_newline, "en", None, CFG) == no_final_newline.upper()  # type: ignore[arg-type]


TAGGED = (
    _cue(
        1,
        "00:00:01,000 --> 00:00:02,000",
        'The <b>big</b> dog <font color="#ff0000">runs</font> home.',
    )
    + "\n"
    + _cue(2, "00:00:02,000 --> 00:00:03,000", "<i>Line one</i>", "<i>line two.</i>")
    + "\n"
    + _cue(3, "00:00:03,000 --> 00:00:04,000", "{\\an8}<i>Up here, see www.example.org.</i>")
)


@pytest.mark.parametrize("protect", [True, False])
def test_tags_wrapping_a_cue_stay_around_it_and_inline_tags_come_out_once_even_unprotected(
    protect,
):
    engine = Recorder()
    cfg = DocumentConfig(protect=protect)
    out = translate_srt(engine, TAGGED, "en", Protector() if protect else None, cfg)  # type: ignore[arg-type]
    # the model saw no tag
    assert not any("<" in line or "{" in line for batch in engine.asked for line in batch)
    # the rest of protection follows the setting
    url = "www.example.org" if protect else "WWW.EXAMPLE.ORG"
    assert [b[2:] for b in _blocks(out)] == [
        ['THE <b>BIG</b> DOG <font color="#ff0000">RUNS</font> HOME.'],
        ["<i>LINE ONE</i>", "<i>LINE TWO.</i>"],
        [f"{{\\an8}}<i>UP HERE, SEE {url}.</i>"],
    ]


def test_inline_tags_a_model_dropped_or_repeated_still_come_out_exactly_once():
    src = _cue(1, "00:00:01,000 --> 00:00:02,000", "The <b>big</b> dog <u>runs</u> home.")
    masked = "The 7001 big 7002 dog 7003 runs 7004 home."
    engine = Recorder({masked: "Der 7001 7001 große Hund läuft 7004 7004 nach Hause."})
    out = translate_srt(engine, src, "en", Protector(), CFG)  # type: ignore[arg-type]
    assert engine.asked == [[masked]]
    text = _blocks(out)[0][2]
    for tag in ("<b>", "</b>", "<u>", "</u>"):
        assert text.count(tag) == 1, text


VTT = """WEBVTT - Kapitel eins
Kind: captions
Language: de

NOTE Dies bleibt,
wie es ist.

STYLE
::cue(.gelb) { color: yellow }

REGION
id:unten
width:40%

intro
00:01.000 --> 00:04.000 align:start line:0
<v Anna>Rot hund.

00:00:05.000 --> 00:00:07.500 position:10%
<c.gelb>Blau</c> und <i>baum</i>.

3
00:08.000 --> 00:09.000
<v.laut Bob>Läuft <00:08.500>rot &amp; blau.</v>
"""


def test_vtt_header_note_style_region_identifiers_and_timings_are_untouched_tags_out_once():
    engine = Recorder()
    out = translate_vtt(engine, VTT, "de", Protector(), CFG)  # type: ignore[arg-type]
    assert out == (
        VTT.replace("Rot hund.", "ROT HUND.")
        .replace("<c.gelb>Blau</c> und <i>baum</i>.", "<c.gelb>BLAU</c> UND <i>BAUM</i>.")
        .replace("Läuft <00:08.500>rot &amp; blau.", "LÄUFT <00:08.500>ROT &amp; BLAU.")
    )
    assert len(engine.asked) == 1 and not any(
        "Dies" in line or "<" in line for line in engine.asked[0]
    )


def test_translator_translate_document_reads_vtt_with_the_real_model(tr):
    out = tr.translate_document(
        "\ufeffWEBVTT\n\n00:01.000 --> 00:02.000\nRot hund.\n", "vtt", source_lang="de"
    )
    assert out == f"\ufeffWEBVTT\n\n00:01.000 --> 00:02.000\n{tr.translate(['Rot hund.'])[0]}\n"


@pytest.mark.parametrize(
    "vtt, src, where",
    [
        (
            False,
            "1\n00:00:01,000 --> 00:00:02,000\nHello.\n\n2\nHello again.\n",
            "line 6: expected a timing line",
        ),
        (
            False,
            "1\n00:00:01,000 --> 00:00:02,000\nHello.\n\nstill the cue\n",
            "line 5: expected a timing line",
        ),
        (
            False,
            "1\n00:00:01,000 --> 00:00:02,000\nHello.\n2\n00:00:02,000 --> 00:00:03,000\n",
            "line 5: a timing",
        ),
        (
            True,
            "1\n00:00:01.000 --> 00:00:02.000\nHello.\n",
            "line 1: a WebVTT file starts with the line WEBVTT",
        ),
        (
            True,
            "WEBVTT\n\nHello.\n",
            "line 3: expected a timing line like 00:00:01.000 --> 00:00:04.000",
        ),
    ],
)
def test_a_malformed_subtitle_file_is_one_mt_error_naming_the_line(vtt, src, where):
    with pytest.raises(MtError, match=where):
        (translate_vtt if vtt else translate_srt)(Recorder(), src, "en", None, CFG)  # type: ignore[arg-type]


def test_mt_translate_writes_a_translated_srt_file_and_names_the_file_in_an_error(tmp_path, tr):
    from mt_cli.cli import app

    src, out = tmp_path / "x.srt", tmp_path / "out.srt"
    shutil.copy(FILM, src)
    runner = CliRunner()
    args = [
        "translate",
        str(src),
        "--checkpoint",
        str(MODEL),
        "--output",
        str(out),
        "--device",
        "cpu",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == tr.translate_document(
        FILM.read_text(encoding="utf-8"), "srt"
    )
    src.write_text(
        "1\n00:00:01,000 --> 00:00:02,000\nHello.\n\n2\nHello again.\n", encoding="utf-8"
    )
    result = runner.invoke(app, args)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"{src}: line 6: expected a timing line" in result.output, result.output
