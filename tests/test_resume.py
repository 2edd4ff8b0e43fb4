"""Exact resume: a run killed with SIGKILL at any moment and rerun ends where an uninterrupted run
ends."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from mt_cli.model import checkpoint
from mt_cli.train.state import clear_leftovers, trim_log

KILL_AT = Path(__file__).with_name("kill_at.py")


def _train_args(files: dict[str, Path], out: Path) -> list[str]:
    # Dropout on, EMA on, numbered checkpoints kept: every piece of state must survive a kill.
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
        "24",
        "--set",
        "tokenizer.vocab_size=100",
        "--set",
        "train.batch_tokens=300",
        "--set",
        "train.save_every=3",
        "--set",
        "train.valid_every=8",
        "--set",
        "train.log_every=2",
        "--set",
        "train.keep_last=2",
        "--set",
        "train.ema_decay=0.9",
        "--set",
        "model.dropout=0.2",
        "--set",
        "decode.beam=2",
        "--set",
        "decode.max_len_offset=5",
    ]
    return list(map(str, args))


def _killed_at(point: str, n: int, args: list[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(KILL_AT), point, str(n), "--", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _log_steps(run: Path) -> list[dict]:
    """The log without its wall-clock fields, which no two runs share."""
    entries = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in e.items() if k not in ("tokens_per_s", "mfu", "elapsed_s")}
        for e in entries
    ]


def _assert_same_state(a: dict, b: dict, where: str) -> None:
    assert a.keys() == b.keys(), where
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), f"{where}.{key}"
        elif isinstance(a[key], dict):
            _assert_same_state(a[key], b[key], f"{where}.{key}")
        elif key != "elapsed_s":
            assert a[key] == b[key], f"{where}.{key}"


def test_sigkill_at_any_moment_then_the_same_command_ends_bitwise_equal_to_an_uninterrupted_run(
    corpus_files, tmp_path
):
    ref, run = tmp_path / "ref", tmp_path / "run"
    subprocess.run(
        [sys.executable, "-m", "mt_cli", *_train_args(corpus_files, ref)],
        check=True,
        capture_output=True,
    )
    args = _train_args(corpus_files, run)
    # Saves: last.pt every 3 steps; at 8, 16, 24 best.pt (if better), step<N>.pt, then last.pt.
    kills = [
        # a log line torn in half (step 2), killed at step 4; resumes from step 3
        ("log", 1),
        # updated the weights at step 5, before any save; resumes from step 3 again
        ("step", 2),
        # half of last.pt written at step 6; resumes from step 3 again
        ("midwrite", 1),
        # last.pt saved at step 6, then half of best.pt written at step 8; resumes from step 6
        ("midwrite", 2),
        # last.pt of step 8 written but not renamed over the old one; resumes from step 6
        ("replace", 3),
    ]
    for point, n in kills:
        proc = _killed_at(point, n, args)
        assert proc.returncode == -signal.SIGKILL, (point, proc.stderr[-2000:])
    # And a kill from outside at a moment nobody chose, as a power cut would be: soon after the
    # resumed run (from step 6) logs step 10, the first step that no run before has reached.
    proc = subprocess.Popen(
        [sys.executable, "-m", "mt_cli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 300
    while not (run / "log.jsonl").is_file() or '"step": 10,' not in (run / "log.jsonl").read_text():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    proc.kill()
    # killed, not finished: the whole run left takes ~0.2 s more
    assert proc.wait() == -signal.SIGKILL
    done = subprocess.run(
        [sys.executable, "-m", "mt_cli", *args], capture_output=True, text=True, check=True
    )
    assert "resuming" in done.stderr + done.stdout

    want, got = checkpoint.load(ref / "last.pt"), checkpoint.load(run / "last.pt")
    assert got.train_state["step"] == 24
    _assert_same_state(want.model_state, got.model_state, "model")
    # optimizer, EMA, RNG, counters
    _assert_same_state(want.train_state, got.train_state, "train_state")
    for name in ("best.pt", "step16.pt", "step24.pt"):
        _assert_same_state(
            checkpoint.load(ref / name).model_state, checkpoint.load(run / name).model_state, name
        )
    assert _log_steps(run) == _log_steps(ref)  # no step logged twice, none lost, no torn line
    assert not list(run.glob(".*"))  # no temporary file left behind


def test_trim_log_drops_entries_past_the_resumed_step_and_a_torn_last_line(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"step": 2, "loss": 5.0}\n{"step": 4, "loss": 4.0}\n{"step": 6, "loss": 3.0}\n{"step": 8, '
        '"lo'
    )
    assert trim_log(log, 4) == 2
    assert log.read_text() == '{"step": 2, "loss": 5.0}\n{"step": 4, "loss": 4.0}\n'
    assert trim_log(log, 4) == 0
    assert trim_log(tmp_path / "absent.jsonl", 4) == 0


def test_clear_leftovers_removes_interrupted_saves_and_nothing_else(tmp_path):
    (tmp_path / ".last.pt.abc123.tmp").write_bytes(b"half")
    (tmp_path / ".tokenizer.xyz").mkdir()
    (tmp_path / ".tokenizer.xyz" / "joint.model").write_bytes(b"half")
    for keep in ("last.pt", "best.pt", "notes.tmp", "log.jsonl"):
        (tmp_path / keep).write_bytes(b"keep")
    assert clear_leftovers(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best.pt",
        "last.pt",
        "log.jsonl",
        "notes.tmp",
    ]
