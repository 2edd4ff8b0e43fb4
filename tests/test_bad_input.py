"""Input that breaks other toolkits: every line in gives exactly one line out, and nothing
crashes."""

from dataclasses import replace

from mt_cli.data.sources import read_parallel
from mt_cli.decode.translator import Translator

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
        out = Translator(model, ckpt.tokenizer, replace(ckpt.config.decode, beam=beam)).translate(
            AWKWARD
        )
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
    with pytest.raises(MtError, match=r"a\.de:2: not valid UTF-8 .*train\.on_bad_utf8 to skip"):
        read_parallel(tmp_path / "a.de", tmp_path / "a.en")
    skipped = read_parallel(tmp_path / "a.de", tmp_path / "a.en", "skip")
    assert (
        skipped.src == ["Gut.", "Drei."]
        and skipped.tgt == ["Good.", "Three."]
        and skipped.bad_utf8 == 1
    )
    replaced = read_parallel(tmp_path / "a.de", tmp_path / "a.en", "replace")
    assert (
        replaced.src[1] == "Schlecht \ufffd."
        and replaced.tgt[1] == "Bad."
        and replaced.bad_utf8 == 1
    )


def test_mt_train_reports_skipped_bad_utf8_pairs(tmp_path, corpus_files):
    from mt_cli.config import build_config
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    f = corpus_files
    src = tmp_path / "train.de"
    # first line gets a bad byte
    src.write_bytes(f["train_src"].read_bytes().replace(b"\n", b" \xff\n", 1))
    cfg = build_config(
        "tiny",
        options={
            "train": {"max_steps": 2, "on_bad_utf8": "skip"},
            "tokenizer": {"vocab_size": 100},
        },
    )
    logged: list[str] = []
    train(
        DataSpec.text_files(src, f["train_tgt"], f["valid_src"], f["valid_tgt"]),
        tmp_path / "run",
        cfg,
        log=logged.append,
    )
    assert any("dropped 1 with bytes that are not UTF-8" in line for line in logged)


def _tiny_train(tmp_path, src, tgt, f, **train_options):
    from mt_cli.config import build_config
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    options = {
        "train": {"max_steps": 2, "valid_every": 2, **train_options},
        "tokenizer": {"vocab_size": 100},
    }
    logged: list[str] = []
    paths = (DataSpec.text_files(src, tgt, f["valid_src"], f["valid_tgt"]), tmp_path / "run")
    train(*paths, build_config("tiny", options=options), log=logged.append)
    return logged


def test_mt_train_truncates_over_long_pairs_when_asked_and_reports_how_many(tmp_path, corpus_files):
    f = corpus_files
    dropped = _tiny_train(tmp_path / "a", f["train_src"], f["train_tgt"], f, max_len=6)
    truncated = _tiny_train(
        tmp_path / "b", f["train_src"], f["train_tgt"], f, max_len=6, long_pairs="truncate"
    )
    n_lines = len(f["train_src"].read_text().splitlines())
    drop_line = next(line for line in dropped if "longer than 6 tokens" in line)
    cut_line = next(line for line in truncated if "longer than 6 tokens" in line)
    n_long = int(drop_line.split("dropped ")[-1].split()[0])
    assert 0 < n_long < n_lines
    assert f"{n_lines - n_long} pairs (" in drop_line
    assert (
        f"{n_lines} pairs (" in cut_line and f"truncated {n_long} longer than 6 tokens" in cut_line
    )


def test_mt_train_warns_about_what_the_doctor_finds_and_stops_on_misaligned_files_before_any_work(
    tmp_path, corpus_files
):
    import pytest

    from mt_cli.errors import MtError

    f = corpus_files
    src, tgt = f["train_src"].read_text().splitlines(), f["train_tgt"].read_text().splitlines()
    src_file, tgt_file = tmp_path / "train.de", tmp_path / "train.en"
    write = lambda path, lines: path.write_text("".join(x + "\n" for x in lines))  # noqa: E731
    write(src_file, src + src[:3] + ["Hund."])  # three duplicate pairs and one copied unchanged
    write(tgt_file, tgt + tgt[:3] + ["Hund."])
    logged = _tiny_train(tmp_path / "warn", src_file, tgt_file, f)
    warnings = [line for line in logged if line.startswith("data warning")]
    from mt_cli.data.doctor import diagnose

    before = [
        x.count
        for x in diagnose({"train": (f["train_src"], f["train_tgt"])})
        if x.check == "duplicate pairs"
    ]
    # the toy corpus has some
    assert any(f"duplicate pairs: {sum(before) + 3} in train" in w for w in warnings)
    assert any("source = target: 1 in train" in w and str(len(src) + 4) in w for w in warnings)
    assert (tmp_path / "warn" / "run" / "last.pt").is_file()  # warnings do not stop training
    assert not any(
        line.startswith("data warning")
        for line in _tiny_train(tmp_path / "off", src_file, tgt_file, f, doctor=False)
    )

    write(tgt_file, tgt)  # now one line short of the source
    with pytest.raises(
        MtError, match=r"train\.de has 404 lines but .*train\.en has 400; .*must be line-aligned"
    ):
        _tiny_train(tmp_path / "err", src_file, tgt_file, f)
    assert not (tmp_path / "err" / "run" / "tokenizer").exists()  # stopped before any work
