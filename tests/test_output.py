"""`mt translate --format jsonl`: one JSON object per input line, with scores, n-best lists and
per-token log-probabilities that agree with what search ranked by."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest

from mt_cli import Translator
from mt_cli.config import OutputConfig
from mt_cli.errors import MtError
from mt_cli.tools.translate_files import translate_stream

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
LINES = [
    "Ein hund sieht ein rot haus.",
    "",
    "Der mann läuft schnell und der baum.",
    "Kind hat ein ball.",
]


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu", beam=4, length_penalty=1.0)


def _jsonl(tr: Translator, out: OutputConfig, lines: list[str] = LINES) -> list[dict]:
    buf = io.StringIO()
    assert translate_stream(tr, lines, buf, out) == len(lines)
    rows = buf.getvalue().split("\n")
    assert rows[-1] == "" and len(rows) == len(lines) + 1  # one line per input line, always
    return [json.loads(row) for row in rows[:-1]]


def test_jsonl_gives_the_text_output_with_its_score_and_a_blank_line_a_null_score(translator):
    rows = _jsonl(translator, OutputConfig("jsonl"))
    assert [r["translation"] for r in rows] == translator.translate(LINES)
    assert rows[1] == {"translation": "", "score": None}
    for row, hyps in zip(rows, translator.search(LINES)):
        if row["score"] is not None:
            assert set(row) == {"translation", "score"}
            assert row["score"] == pytest.approx(hyps[0].score)


def test_the_nbest_list_is_k_distinct_hypotheses_best_first_led_by_the_translation(translator):
    rows = _jsonl(translator, OutputConfig("jsonl", nbest=3, token_scores=True))
    for row in (r for r in rows if r["score"] is not None):
        nbest = row["nbest"]
        assert len(nbest) == 3
        assert nbest[0]["translation"] == row["translation"] and nbest[0]["score"] == row["score"]
        assert [h["score"] for h in nbest] == sorted((h["score"] for h in nbest), reverse=True)
        assert len({tuple(h["tokens"]) for h in nbest}) == 3  # distinct token sequences


def test_token_scores_are_the_pieces_and_eos_whose_log_probabilities_make_the_score(translator):
    alpha = 0.6
    tr = translator.with_options(length_penalty=alpha)
    rows = _jsonl(tr, OutputConfig("jsonl", token_scores=True))
    sp = tr.tokenizer.tgt
    for row in (r for r in rows if r["score"] is not None):
        tokens, lps = row["tokens"], row["token_logprobs"]
        assert tokens[-1] == "</s>" and len(tokens) == len(lps)
        assert sp.decode_pieces(tokens[:-1]) == row["translation"]
        assert all(lp <= 0 for lp in lps)
        assert row["score"] == pytest.approx(sum(lps) / len(lps) ** alpha)
    plain = _jsonl(tr.with_options(length_penalty=0.0), OutputConfig("jsonl", token_scores=True))
    for row in (r for r in plain if r["score"] is not None):
        # alpha 0: the plain sum
        assert math.isclose(row["score"], sum(row["token_logprobs"]), rel_tol=1e-6)


def test_an_nbest_longer_than_the_beam_or_text_with_nbest_is_one_clear_error(translator):
    with pytest.raises(
        MtError, match=r"output.nbest 5 is larger than the beam \(4\).*raise decode.beam to 5"
    ):
        translate_stream(translator, LINES, io.StringIO(), OutputConfig("jsonl", nbest=5))
    with pytest.raises(MtError, match=r"larger than the beam \(1\)"):
        translate_stream(
            translator.with_options(beam=1), LINES, io.StringIO(), OutputConfig("jsonl", nbest=2)
        )
    with pytest.raises(MtError, match="need output.format jsonl"):
        OutputConfig("text", nbest=2)
    with pytest.raises(MtError, match="output.format must be text or jsonl"):
        OutputConfig("csv")


def test_mt_translate_writes_jsonl_and_refuses_bad_combinations_in_one_line(tmp_path):
    import subprocess
    import sys

    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    base = [
        sys.executable,
        "-m",
        "mt_cli",
        "translate",
        "--checkpoint",
        str(FIXTURE),
        str(src),
        "--device",
        "cpu",
    ]
    done = subprocess.run(
        [*base, "--beam", "4", "--format", "jsonl", "--nbest", "2"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == len(LINES) and rows[1] == {"translation": "", "score": None}
    assert all(len(r["nbest"]) == 2 for r in rows if r["score"] is not None)
    for bad in (["--nbest", "2"], ["--format", "jsonl", "--beam", "2", "--nbest", "3"]):
        done = subprocess.run([*base, *bad], capture_output=True, text=True)
        assert done.returncode != 0 and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith(
            "mt: error: --nbest"
        )
