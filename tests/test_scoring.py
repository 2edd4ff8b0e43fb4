"""`mt score`: forced decoding gives back the score search ranked a hypothesis by."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mt_cli import Translator
from mt_cli.errors import MtError

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
LINES = [
    "Ein hund sieht ein rot haus.",
    "Der mann läuft schnell und der baum.",
    "Kind hat ein ball.",
    "Ein ball.",
]


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu", beam=4, length_penalty=0.0)


def test_scoring_a_hypothesis_gives_back_the_score_beam_search_ranked_it_by(translator):
    compared = 0
    for line, hyps in zip(LINES, translator.search(LINES)):
        for h in hyps:  # every one of the beam's finished hypotheses, not only the best
            if translator.tokenizer.encode_tgt([h.text])[0] != h.tokens:
                continue  # its text re-encodes to other pieces: a different target
            forced = translator.score([line], [h.text])[0]
            assert forced.tokens == h.tokens
            assert forced.score == pytest.approx(h.score, abs=1e-3)
            assert forced.token_logprobs == pytest.approx(h.token_logprobs, abs=1e-4)
            compared += 1
    assert compared >= len(LINES)


def test_scores_do_not_depend_on_the_batch(translator):
    targets = ["A dog sees a red house.", "", "The man runs.", "A ball."]
    one = [
        translator.with_options(batch_size=1).score([s], [t])[0].score
        for s, t in zip(LINES, targets)
    ]
    together = [h.score for h in translator.score(LINES, targets)]
    assert together == pytest.approx(one, abs=1e-5)
    # an empty target: EOS alone
    assert translator.score(LINES[:1], [""])[0].token_logprobs.__len__() == 1


def test_a_source_and_target_count_that_differ_is_one_clear_error(translator):
    with pytest.raises(MtError, match="2 sources but 1 targets"):
        translator.score(LINES[:2], ["x"])


def test_mt_score_writes_one_line_per_pair_and_refuses_files_of_different_lengths(tmp_path):
    src, tgt, short = tmp_path / "s.de", tmp_path / "t.en", tmp_path / "short.en"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    tgt.write_text("A dog.\n\nThe man runs.\nA ball.\n", encoding="utf-8")
    short.write_text("A dog.\n", encoding="utf-8")
    base = [
        sys.executable,
        "-m",
        "mt_cli",
        "score",
        "--checkpoint",
        str(FIXTURE),
        "--src",
        str(src),
        "--device",
        "cpu",
    ]
    text = subprocess.run([*base, "--tgt", str(tgt)], capture_output=True, text=True)
    assert text.returncode == 0, text.stderr
    scores = [float(x) for x in text.stdout.splitlines()]
    assert len(scores) == 4 and all(s < 0 for s in scores)
    done = subprocess.run(
        [*base, "--tgt", str(tgt), "--format", "jsonl", "--normalize"],
        capture_output=True,
        text=True,
    )
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["tokens"][-1] for r in rows] == ["</s>"] * 4
    assert [r["score"] for r in rows] == pytest.approx(
        [s / len(r["token_logprobs"]) for s, r in zip(scores, rows)]
    )
    bad = subprocess.run(
        [*base, "--tgt", str(short), "--output", str(tmp_path / "out.txt")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and not (tmp_path / "out.txt").exists()
    assert (
        bad.stderr.strip()
        == f"mt: error: {src} and {short} differ in length: one ends after 1 lines"
    )
