"""`mt clean`: each rule on pairs made to break it, the streaming runner on real and generated files
(the inputs untouched, duplicates found across buckets, memory bounded), and a model's score."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_DATA, make_pairs, write_lines
from mt_cli.config.pipeline import CleanConfig
from mt_cli.data.cleaning import Sides, first_rule, pair_key, script_ratio, units
from mt_cli.errors import MtError
from mt_cli.tools import clean as clean_tool
from mt_cli.tools.clean import clean_corpus
from mt_cli.tools.pipeline_config import clean_config

MULTI30K = SHARED_DATA / "multi30k"
CFG = CleanConfig()


@pytest.mark.parametrize(
    "src, tgt, rule",
    [
        ("Ein Hund.", "   ", "empty"),
        (" ".join(["Wort"] * 151), " ".join(["word"] * 151), "length"),
        ("Ein Mann.", "A man walks along the river with his two big dogs in the rain.", "ratio"),
        ("Ein Mann läuft.", "ein mann läuft!", "copy"),
        ("Er hat 3 Hunde.", "He has 4 dogs.", "numbers"),
        ("Siehe https://a.example/x dort.", "See https://b.example/y there.", "urls"),
        ("#### ---- !!!! a", "#### ---- !!!! b", "symbols"),
        ("Ein Mann läuft schnell.", "Мужчина быстро бежит.", "script"),
        ("Ein Mann läuft schnell.", "A man runs fast.", ""),
        ("Er zahlt 3,5 Euro.", "He pays 3.5 euros.", ""),
    ],
)
def test_each_pair_rule_removes_the_pair_made_to_break_it_and_no_other(src, tgt, rule):
    assert first_rule(Sides(src, tgt, "de", "en"), CFG) == rule


def test_a_rule_left_out_of_clean_rules_removes_nothing():
    pair = Sides("Er hat 3 Hunde.", "He has 4 dogs.", "de", "en")
    assert first_rule(pair, CleanConfig(rules=("empty", "duplicate"))) == ""


def test_chinese_is_measured_in_characters_and_a_latin_name_weighs_one_character():
    # two Han characters count as 2 words (2 * 2 + 2) // 3, Twitter 1
    assert units("我用Twitter。") == 3
    assert script_ratio("Tom游泳。", {"CJK"}) == pytest.approx(2 / 3)
    assert (
        first_rule(Sides("现在是七点四十五分", "It is a quarter to eight.", "zh", "en"), CFG) == ""
    )


def test_near_exact_duplicates_share_a_key_and_different_pairs_do_not():
    assert pair_key("Ein Hund.", "A dog.") == pair_key("ein  hund", "A DOG!")
    assert pair_key("Ein Hund.", "A dog.") != pair_key("Ein Hund.", "A cat.")


def test_bad_clean_settings_name_the_field():
    with pytest.raises(MtError, match="clean.rules: unknown rule"):
        clean_config({}, ["clean.rules=empty,typo"])
    with pytest.raises(MtError, match="takes clean"):
        clean_config({}, ["decode.beam=2"])
    assert clean_config({"max_words": 20}, ["clean.rules=[empty, duplicate]"]).rules == (
        "empty",
        "duplicate",
    )


def _digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def test_clean_writes_kept_pairs_and_removed_line_numbers_and_leaves_the_inputs(tmp_path):
    src = ["Ein Hund läuft.", "", "Ein Hund läuft!", "Er hat 3 Hunde.", "Der Ball ist rot.", "bad"]
    tgt = [
        "A dog runs.",
        "Empty source.",
        "a dog runs",
        "He has 4 dogs.",
        "The ball is red.",
        "bad",
    ]
    a, b = write_lines(tmp_path / "c.de", src), write_lines(tmp_path / "c.en", tgt)
    b.write_bytes(b.read_bytes().replace(b"bad\n", b"b\xffd\n"))  # line 6: not UTF-8
    before = _digest(a, b)
    report = clean_corpus(a, b, tmp_path / "out" / "clean", CFG)
    assert _digest(a, b) == before
    out = tmp_path / "out"
    assert (out / "clean.de").read_text(encoding="utf-8").splitlines() == [
        "Ein Hund läuft.",
        "Der Ball ist rot.",
    ]
    assert (out / "clean.en").read_text(encoding="utf-8").splitlines() == [
        "A dog runs.",
        "The ball is red.",
    ]
    removed = [line.split("\t") for line in (out / "clean.removed.tsv").read_text().splitlines()]
    assert removed == [["2", "empty"], ["3", "duplicate"], ["4", "numbers"], ["6", "encoding"]]
    assert report.total == 6 and report.kept == 2
    assert report.removed == {"encoding": 1, "empty": 1, "numbers": 1, "duplicate": 1}


def test_files_of_different_lengths_stop_clean_and_write_nothing(tmp_path):
    a, b = (
        write_lines(tmp_path / "c.de", ["Ein Hund.", "Ein Ball."]),
        write_lines(tmp_path / "c.en", ["A dog."]),
    )
    with pytest.raises(MtError, match="c.en ends after 1 lines but .*c.de goes on"):
        clean_corpus(a, b, tmp_path / "out", CFG)
    assert not list(tmp_path.glob("out*"))


def test_an_output_that_is_an_input_is_refused(tmp_path):
    a, b = write_lines(tmp_path / "c.de", ["Ein Hund."]), write_lines(tmp_path / "c.en", ["A dog."])
    with pytest.raises(MtError, match="never writes over its inputs"):
        clean_corpus(a, b, tmp_path / "c", CFG)


def test_duplicates_are_found_across_many_buckets_as_in_one(tmp_path, monkeypatch):
    src, tgt = make_pairs(3000, seed=5)  # the toy language repeats many short sentences
    a, b = write_lines(tmp_path / "t.de", src), write_lines(tmp_path / "t.en", tgt)
    one = clean_corpus(a, b, tmp_path / "one", CFG)
    monkeypatch.setattr(clean_tool, "BUCKET_BYTES", 1000)  # about 100 buckets
    clean_corpus(a, b, tmp_path / "many", CFG)
    assert one.removed["duplicate"] > 100
    assert (tmp_path / "one.removed.tsv").read_text() == (tmp_path / "many.removed.tsv").read_text()


@pytest.mark.skipif(not (MULTI30K / "train.de").is_file(), reason="needs ../shared/data/multi30k")
def test_multi30k_cleaned_keeps_no_duplicate_and_accounts_for_every_line(tmp_path):
    report = clean_corpus(MULTI30K / "train.de", MULTI30K / "train.en", tmp_path / "m", CFG)
    kept = [(tmp_path / f"m.{s}").read_text(encoding="utf-8").splitlines() for s in ("de", "en")]
    removed = (tmp_path / "m.removed.tsv").read_text().splitlines()
    assert report.total == 29000 == len(kept[0]) + len(removed) and len(kept[0]) == len(kept[1])
    assert len({pair_key(s, t) for s, t in zip(*kept)}) == len(kept[0])
    # mt doctor finds 3 exact repeats; normalising finds more
    assert report.removed["duplicate"] >= 3


def test_a_swapped_side_is_identified_as_the_wrong_language(tmp_path):
    pytest.importorskip("lingua")
    src = [
        "Ein Mann mit einem roten Hut spielt Gitarre auf der Straße.",
        "A man in a red hat plays the guitar.",
    ]
    tgt = [
        "A man in a red hat plays the guitar in the street.",
        "A woman walks her dog along the beach.",
    ]
    a, b = write_lines(tmp_path / "c.de", src), write_lines(tmp_path / "c.en", tgt)
    report = clean_corpus(a, b, tmp_path / "o", CFG)
    assert (tmp_path / "o.removed.tsv").read_text() == "2\tlanguage\n" and report.kept == 1


def test_a_models_score_removes_mistranslations_and_keeps_translations(trained, tmp_path):
    ckpt, d = trained
    src, tgt = make_pairs(60, seed=9)
    wrong = set(range(0, 60, 6))  # every sixth target belongs to another line
    tgt = [tgt[(i + 17) % 60] if i in wrong else t for i, t in enumerate(tgt)]
    a, b = write_lines(tmp_path / "s.de", src), write_lines(tmp_path / "s.en", tgt)
    cfg = CleanConfig(
        rules=("score",), score_checkpoint=str(d / "run" / "best.pt"), max_cross_entropy=2.3
    )
    clean_corpus(a, b, tmp_path / "o", cfg, device="cpu")
    removed = {
        int(line.split("\t")[0]) - 1
        for line in (tmp_path / "o.removed.tsv").read_text().splitlines()
    }
    assert removed == wrong


def test_two_million_pairs_stream_through_in_bounded_memory(tmp_path):
    """A 2M-line pair (110 MB) cleaned by the command, duplicates and empty lines only: the
    process's peak memory (VmHWM: a fresh count after exec, unlike ru_maxrss) stays far below what
    holding the text, or a set of its lines' hashes, would take."""
    n = 2_000_000
    with open(tmp_path / "big.de", "w") as a, open(tmp_path / "big.en", "w") as b:
        for i in range(n):
            k = i % 1_500_000  # the last 500,000 repeat earlier pairs
            a.write(f"Satz Nummer {k} ist hier.\n")
            b.write(f"Sentence number {k} is here.\n")
    code = (
        "import sys; from mt_cli.cli import main; sys.argv = ['mt', 'clean', '--src', sys.argv[1],"
        " '--tgt', sys.argv[2], '--out-prefix', sys.argv[3], '--set', "
        "'clean.rules=empty,duplicate'];\n"
        "try: main()\nexcept SystemExit: pass\n"
        "print('peak', next(int(x.split()[1]) for x in open('/proc/self/status') if "
        "x.startswith('VmHWM')) // 1024)"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(tmp_path / "big.de"),
            str(tmp_path / "big.en"),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "duplicate       500,000" in done.stdout
    peak_mb = int(done.stdout.split("peak")[-1])
    # 2M lines as Python strings alone: over 250 MB
    assert peak_mb < 120, f"peak memory {peak_mb} MB"
    assert sum(1 for _ in open(tmp_path / "out.de")) == 1_500_000
