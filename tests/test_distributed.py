"""Several processes under torchrun (gloo on the CPU): the same run as one process, and no hangs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from mt_cli.data.collate import collate
from mt_cli.data.pairs import Pairs
from mt_cli.model import checkpoint

KILL_AT = Path(__file__).with_name("kill_at.py")


def _args(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    args = [
        "train",
        "--train-src",
        files["train_src"],
        "--train-tgt",
        files["train_tgt"],
        "--valid-src",
        files["valid_src"],
        "--valid-tgt",
        files["valid_tgt"],
        "--out",
        out,
        "--preset",
        "tiny",
        "--max-steps",
        "30",
        "--batch-tokens",
        "600",
        "--device",
        "cpu",
        "--set",
        "tokenizer.vocab_size=100",
        "--set",
        "model.dropout=0",
        "--set",
        "train.log_every=1",
        "--set",
        "train.valid_every=30",
        "--set",
        "train.threads=1",
        "--set",
        "train.lr=2e-3",
        "--set",
        "train.warmup_steps=5",
        "--set",
        "decode.beam=1",
        *extra,
    ]
    return list(map(str, args))


def _torchrun(n: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={n}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _losses(run: Path) -> dict[int, float]:
    entries = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return {e["step"]: e["loss"] for e in entries if "loss" in e}


def _relative_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / a.double().norm().clamp_min(1e-12))


def _assert_same_weights(a: dict, b: dict, tolerance: float) -> None:
    """Every weight tensor within `tolerance` (relative norm of the difference), but one kind.

    Attention's key bias adds the same amount to every score of a query, which softmax ignores:
    its true gradient is 0, so it only ever gets rounding noise, which Adam turns into full-size
    steps of random sign. It differs between any two summation orders and changes no output.
    """
    gaps = {
        k: _relative_gap(a[k], b[k])
        for k in a
        if a[k].is_floating_point() and "k_proj.bias" not in k
    }
    assert max(gaps.values()) <= tolerance, max(gaps.items(), key=lambda kv: kv[1])


def test_two_gloo_processes_train_the_same_run_as_one_to_1e_4_then_resume(corpus_files, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run(
        [sys.executable, "-m", "mt_cli", *_args(corpus_files, one)], check=True, capture_output=True
    )
    proc = _torchrun(2, "-m", "mt_cli", *_args(corpus_files, two))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "x 2 processes" in proc.stderr

    a, b = _losses(one), _losses(two)
    # one log, written once (rank 0), every step
    assert sorted(a) == sorted(b) == list(range(1, 31))
    worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
    assert worst <= 1e-4, f"per-step loss differs by {worst:.2e} (relative)"
    assert a[30] < a[1] * 0.8  # it learnt something: the comparison is not between two idle runs
    ca, cb = checkpoint.load(one / "last.pt"), checkpoint.load(two / "last.pt")
    _assert_same_weights(ca.model_state, cb.model_state, 1e-4)
    src, tgt_in, _ = collate(
        *Pairs(
            ca.tokenizer.encode_src(["Ein Hund läuft."] * 2),
            ca.tokenizer.encode_tgt(["A dog runs."] * 2),
        ).take([0, 1]),
        0,
    )
    with torch.no_grad():
        logits_a, logits_b = ca.build_model()(src, tgt_in), cb.build_model()(src, tgt_in)
    assert _relative_gap(logits_a, logits_b) <= 1e-4  # with the key biases in: the same model

    again = _torchrun(2, "-m", "mt_cli", *_args(corpus_files, two), "--max-steps", "33")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming {two / 'last.pt'} at step 30" in again.stderr
    assert again.stderr.count("resuming") == 1  # only rank 0 speaks
    assert checkpoint.load(two / "last.pt").train_state["step"] == 33


def test_accumulating_4_shares_of_a_batch_makes_the_update_of_the_whole_batch(
    corpus_files, tmp_path
):
    from mt_cli.config import build_config
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    f = corpus_files
    weights, losses = [], []
    for k in (1, 4):
        out = tmp_path / f"k{k}"
        cfg = build_config(
            "tiny",
            options={
                "tokenizer": {"vocab_size": 100},
                "model": {"dropout": 0.0},
                "train": {
                    "max_steps": 5,
                    "batch_tokens": 600,
                    "accumulate": k,
                    "log_every": 1,
                    "valid_every": 5,
                    "device": "cpu",
                    "lr": 2e-3,
                    "warmup_steps": 2,
                },
            },
        )
        train(
            DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"]),
            out,
            cfg,
            log=lambda m: None,
        )
        weights.append(checkpoint.load(out / "last.pt").model_state)
        losses.append(_losses(out))
    for step in losses[0]:
        assert abs(losses[0][step] - losses[1][step]) <= 1e-5 * abs(losses[0][step]), step
    _assert_same_weights(weights[0], weights[1], 1e-5)
    # really computed apart
    assert any(not torch.equal(w, weights[1][k]) for k, w in weights[0].items())


def test_a_rank_that_hangs_or_dies_ends_the_job_with_a_clear_error_not_a_hang(
    corpus_files, tmp_path
):
    for point in ("hang", "die"):
        started = time.monotonic()
        args = _args(corpus_files, tmp_path / point, "--dist-timeout", "8", "--max-steps", "1000")
        # torchrun checks its workers every 0.1 s and stops the survivor once one died; 2 s lets the
        # survivor's own report (what is tested) come first however busy the machine is.
        proc = _torchrun(
            2, "--monitor-interval=2", str(KILL_AT), point, "3", "--", *args, timeout=240
        )
        took = time.monotonic() - started
        assert proc.returncode != 0, point
        assert "lost contact with the other processes" in proc.stderr, (point, proc.stderr[-3000:])
        # The bound: --dist-timeout for the others to notice, then the start and the end of
        # two processes (kill_at.py lets SIGTERM end the hung rank without torchrun's 30 s grace).
        assert took < 90, (point, took)
