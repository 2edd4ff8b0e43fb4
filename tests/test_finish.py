"""The end of a run (train/finish.py): best.pt becomes the validated choice, with tuned decoding."""

import json
from pathlib import Path

import pytest
import torch

from mt_cli.config import build_config
from mt_cli.data.text import read_lines
from mt_cli.decode.translator import Translator
from mt_cli.decode.tuning import tune_precision
from mt_cli.errors import MtError
from mt_cli.metrics import score
from mt_cli.model import checkpoint
from mt_cli.tools.report import write_report
from mt_cli.train import finish
from mt_cli.train.inputs import DataSpec
from mt_cli.train.loop import train
from mt_cli.train.validation import Validation


def _run(files, out: Path, log=lambda m: None, **train_fields) -> list[dict]:
    cfg = build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": {
                "batch_tokens": 300,
                "valid_every": 10,
                "log_every": 5,
                "device": "cpu",
                **train_fields,
            },
            "decode": {"beam": 2, "max_len_offset": 5},
        },
    )
    spec = DataSpec.text_files(
        files["train_src"], files["train_tgt"], files["valid_src"], files["valid_tgt"]
    )
    train(spec, out, cfg, log=log)
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def _last(log: list[dict], key: str, field: str | None = None):
    """The last log record with `key`: its value, or its `field`."""
    record = [r for r in log if key in r][-1]
    return record[field or key]


def _same_weights(a: Path, b: Path) -> bool:
    x, y = checkpoint.load(a).model_state, checkpoint.load(b).model_state
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def test_an_average_that_validates_as_well_takes_best_pt_and_the_single_step_is_kept(
    corpus_files, tmp_path
):
    # A learning rate of ~0 leaves every checkpoint alike, so the average ties the best step: a tie
    # goes to it.
    out = tmp_path / "run"
    log = _run(
        corpus_files, out, max_steps=30, keep_last=2, average_last=2, lr=1e-12, warmup_steps=0
    )
    assert (
        _last(log, "averaged") == ["step20.pt", "step30.pt"]
        and _last(log, "averaged", "chosen") is True
    )
    best, single = checkpoint.load(out / "best.pt"), checkpoint.load(out / "best-step.pt")
    assert best.origin == {"averaged": ["step20.pt", "step30.pt"]} and single.origin is None
    assert _same_weights(out / "best.pt", out / "averaged.pt")
    report = write_report(out, tmp_path / "report.md").read_text()
    assert "at step 10 (`best-step.pt`)" in report, report  # ties keep the first step
    assert "average of step20.pt, step30.pt: validation BLEU" in report and "(`best.pt`)" in report
    # Rerunning the finished command redoes the end, and must not put the average in best-step.pt.
    _run(corpus_files, out, max_steps=30, keep_last=2, average_last=2, lr=1e-12, warmup_steps=0)
    assert checkpoint.load(out / "best-step.pt").origin is None


def test_an_average_that_validates_worse_leaves_best_pt_the_best_single_step(
    corpus_files, tmp_path, monkeypatch
):
    monkeypatch.setattr(finish, "validate_all", lambda *a, **k: Validation(9.0, 9.0, -1.0))
    out = tmp_path / "run"
    log = _run(corpus_files, out, max_steps=20, keep_last=2, average_last=2)
    assert _last(log, "averaged", "chosen") is False
    assert checkpoint.load(out / "best.pt").origin is None and not (out / "best-step.pt").exists()
    assert not _same_weights(out / "best.pt", out / "averaged.pt")


def test_training_tunes_beam_and_length_penalty_on_validation_into_best_pt(corpus_files, tmp_path):
    out = tmp_path / "run"
    log = _run(
        corpus_files,
        out,
        max_steps=40,
        tune_beams=[1, 3],
        tune_length_penalties=[0.6, 1.4],
        tune_precision=False,
    )
    rows = _last(log, "tuned")
    # Greedy ignores the length penalty, so it is tried once: 1 + 2 settings, best first.
    assert sorted((r["beam"], r["length_penalty"]) for r in rows) == [(1, 0.6), (3, 0.6), (3, 1.4)]
    assert [r["bleu"] for r in rows] == sorted((r["bleu"] for r in rows), reverse=True)
    decode = checkpoint.load(out / "best.pt").config.decode
    assert (decode.beam, decode.length_penalty) == (rows[0]["beam"], rows[0]["length_penalty"])
    assert (
        "decoding tuned on validation (3 settings)"
        in write_report(out, tmp_path / "report.md").read_text()
    )
    # best.pt's own defaults reproduce the winning validation BLEU, with no options given.
    hyps = Translator.load(out / "best.pt").translate(read_lines(corpus_files["valid_src"]))
    assert score(hyps, [read_lines(corpus_files["valid_tgt"])], ("bleu",))["bleu"] == pytest.approx(
        rows[0]["bleu"]
    )


def test_training_checks_int8_on_validation_and_best_pt_decodes_in_the_precision_it_kept(
    corpus_files, tmp_path, monkeypatch
):
    monkeypatch.setattr(finish, "cpu_has_int8", lambda: True)  # checked on any CPU, for the test
    out = tmp_path / "run"
    log = _run(corpus_files, out, max_steps=40)
    row = _last(log, "int8_checked")
    ckpt = checkpoint.load(out / "best.pt")
    assert ckpt.config.decode.precision == ("auto" if row["int8"] >= row["fp32"] - 0.1 else "fp32")
    # With no options, best.pt decodes as the check measured it.
    tr = Translator.load(out / "best.pt", device="cpu")
    hyps = tr.translate(read_lines(corpus_files["valid_src"]))
    bleu = score(hyps, [read_lines(corpus_files["valid_tgt"])], ("bleu",))["bleu"]
    assert bleu == pytest.approx(row["int8" if tr.plan.precision == "int8" else "fp32"])
    # The tolerance decides: int8 within it keeps auto, else fp32 is recorded.
    sets = [
        (
            tr.source_ids(read_lines(corpus_files["valid_src"])),
            read_lines(corpus_files["valid_tgt"]),
            (),
        )
    ]
    assert tune_precision(ckpt, sets, tolerance=100.0)["precision"] == "auto"
    assert tune_precision(ckpt, sets, tolerance=-100.0)["precision"] == "fp32"
    assert (
        "int8 decoding checked on validation"
        in write_report(out, tmp_path / "report.md").read_text()
    )


def test_on_a_cpu_without_int8_arithmetic_the_check_is_skipped_and_fp32_recorded(
    corpus_files, tmp_path, monkeypatch
):
    monkeypatch.setattr(finish, "cpu_has_int8", lambda: False)
    lines: list[str] = []
    out = tmp_path / "run"
    log = _run(corpus_files, out, lines.append, max_steps=20)
    assert checkpoint.load(out / "best.pt").config.decode.precision == "fp32"
    assert not any("int8_checked" in e for e in log)
    assert any(
        line.startswith("int8 not checked: this CPU has no int8 arithmetic") for line in lines
    )


def test_a_long_enough_run_ends_with_best_pt_compiled_and_translate_runs_it_by_default(
    corpus_files, tmp_path
):
    out = tmp_path / "run"
    _run(corpus_files, out, max_steps=10, compile_after_minutes=1e-9)  # every run is long enough
    precision = checkpoint.load(out / "best.pt").config.decode.precision
    assert precision in ("auto", "fp32")  # what the int8 check kept
    packages = list((out / "best.pt.compiled").glob("*.pt2"))
    assert [p.name.split("-")[0] for p in packages] == ["int8" if precision == "auto" else "fp32"]
    tr = Translator.load(out / "best.pt", device="cpu")  # no option: the fastest path kept
    assert tr.engine.compiled is not None
    short = tmp_path / "short"
    _run(corpus_files, short, max_steps=10)  # under the default ten minutes: nothing compiled
    assert not (short / "best.pt.compiled").exists()


def test_tuning_lists_come_from_yaml_or_set_and_bad_values_are_refused():
    cfg = build_config(
        "tiny", sets=["train.tune_beams=[4, 5, 8]", "train.tune_length_penalties=[0.6, 1]"]
    )
    assert cfg.train.tune_beams == (4, 5, 8) and cfg.train.tune_length_penalties == (0.6, 1.0)
    with pytest.raises(MtError, match="train.tune_beams must all be at least 1"):
        build_config("tiny", sets=["train.tune_beams=[0, 5]"])
    with pytest.raises(MtError, match="train.tune_beams must be a list"):
        build_config("tiny", sets=["train.tune_beams=5"])
