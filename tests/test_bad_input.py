"""Input that breaks other toolkits: every line in gives exactly one line out, and nothing crashes."""

from dataclasses import replace

from mt_cli.data import read_parallel
from mt_cli.translate import translate_lines

AWKWARD = [
    "",  # empty
    "   \t ",  # whitespace only
    "Ein Hund " * 333 + "läuft.",  # 3,000 characters: more tokens than the model's positions
    "Ein\x00Hund\x01läuft\x1b[31m.",  # NUL and control characters
    "Ein Hund 🐕 läuft 🙂.",  # emoji
    "שלום עולם",  # right-to-left (Hebrew)
    "مرحبا بالعالم",  # right-to-left (Arabic)
    "Ein Hund\u2028läuft\u0085.",  # Unicode line and next-line separators inside a line
]


def test_awkward_translation_input_gives_one_line_out_per_line_in(trained):
    ckpt, _ = trained
    model = ckpt.build_model()
    for beam in (1, 3):
        out = translate_lines(model, ckpt.tokenizer, AWKWARD, replace(ckpt.config.decode, beam=beam))
        assert len(out) == len(AWKWARD)
        assert out[0] == "" and out[1] == ""
        assert all("\n" not in line and "\r" not in line for line in out)
        assert out[2] != ""  # the over-long line is cut to what the model reads, not dropped


def test_a_stray_carriage_return_inside_a_line_never_reaches_the_data(tmp_path):
    (tmp_path / "a.de").write_bytes("\ufeffEin\rHund.\r\nZwei.\r\n".encode())
    (tmp_path / "a.en").write_bytes(b"A\rdog.\r\nTwo.\n")
    corpus = read_parallel(tmp_path / "a.de", tmp_path / "a.en")
    assert corpus.src == ["Ein Hund.", "Zwei."] and corpus.tgt == ["A dog.", "Two."]


def test_bad_utf8_stops_with_file_and_line_unless_skipped_or_replaced(tmp_path):
    import pytest

    from mt_cli.errors import MtError

    (tmp_path / "a.de").write_bytes(b"Gut.\nSchlecht \xff.\nDrei.\n")
    (tmp_path / "a.en").write_bytes(b"Good.\nBad.\nThree.\n")
    with pytest.raises(MtError, match=r"a\.de:2: not valid UTF-8 .*--on-bad-utf8 skip"):
        read_parallel(tmp_path / "a.de", tmp_path / "a.en")
    skipped = read_parallel(tmp_path / "a.de", tmp_path / "a.en", "skip")
    assert skipped.src == ["Gut.", "Drei."] and skipped.tgt == ["Good.", "Three."] and skipped.bad_utf8 == 1
    replaced = read_parallel(tmp_path / "a.de", tmp_path / "a.en", "replace")
    assert replaced.src[1] == "Schlecht \ufffd." and replaced.tgt[1] == "Bad." and replaced.bad_utf8 == 1


def test_mt_train_reports_skipped_bad_utf8_pairs(tmp_path, corpus_files):
    from mt_cli.config import build_config
    from mt_cli.train import TrainPaths, train

    f = corpus_files
    src = tmp_path / "train.de"
    src.write_bytes(f["train_src"].read_bytes().replace(b"\n", b" \xff\n", 1))  # first line gets a bad byte
    cfg = build_config(
        "tiny", options={"train": {"max_steps": 2, "on_bad_utf8": "skip"}, "tokenizer": {"vocab_size": 100}}
    )
    logged: list[str] = []
    train(TrainPaths(src, f["train_tgt"], f["valid_src"], f["valid_tgt"], tmp_path / "run"), cfg, log=logged.append)
    assert any("dropped 1 with bytes that are not UTF-8" in line for line in logged)
