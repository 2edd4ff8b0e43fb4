"""Exact resume on a real corpus and model size: SIGKILL a Multi30k run from outside, rerun the
same command, and count the tensors of last.pt that differ from an uninterrupted run's.

    python benchmarks/resume_check.py --data ../shared/data/multi30k --tokenizer TOKDIR --amp off
    python benchmarks/resume_check.py ... --amp bf16

tests/test_resume.py proves the same on a tiny model at chosen kill points; this shows it holds
for the `configs/multi30k.yaml` model (small preset, dropout on), in fp32 and in bf16.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from mt_cli.model import checkpoint

ROOT = Path(__file__).resolve().parents[1]


def train_cmd(
    data: Path, valid: tuple[Path, Path], tokenizer: Path, out: Path, amp: str, steps: int
) -> list[str]:
    args = [
        "--train-src",
        data / "train.de",
        "--train-tgt",
        data / "train.en",
        "--valid-src",
        valid[0],
        "--valid-tgt",
        valid[1],
        "--config",
        ROOT / "configs/multi30k.yaml",
        "--tokenizer",
        tokenizer,
        "--out",
        out,
        "--max-steps",
        steps,
        "--save-every",
        10,
        "--set",
        f"train.amp={amp}",
        "--set",
        f"train.valid_every={steps // 2}",
        "--set",
        "train.log_every=5",
    ]
    return [sys.executable, "-m", "mt_cli", "train", *map(str, args)]


def differing(a: dict, b: dict) -> int:
    """How many tensors differ, through nested dicts (the optimizer state is one)."""
    n = 0
    for key in a:
        if isinstance(a[key], torch.Tensor):
            n += not torch.equal(a[key], b[key])
        elif isinstance(a[key], dict):
            n += differing(a[key], b[key])
    return n


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--data", type=Path, required=True, help="folder with train.{de,en} and val.{de,en}"
    )
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--amp", choices=["off", "bf16"], default="off")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument(
        "--kill-after-step", type=int, default=25, help="kill soon after this step is logged"
    )
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="resume-check."))
    valid = (work / "val.de", work / "val.en")  # 20 lines: validation is not what is checked here
    for side, path in zip(("de", "en"), valid):
        path.write_text(
            "".join((a.data / f"val.{side}").read_text(encoding="utf-8").splitlines(True)[:20])
        )
    ref, run = work / "ref", work / "run"
    started = time.perf_counter()
    subprocess.run(
        train_cmd(a.data, valid, a.tokenizer, ref, a.amp, a.steps), check=True, capture_output=True
    )
    print(f"uninterrupted run: {time.perf_counter() - started:.0f} s")
    cmd = train_cmd(a.data, valid, a.tokenizer, run, a.amp, a.steps)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log, mark = run / "log.jsonl", f'"step": {a.kill_after_step},'
    while not log.is_file() or mark not in log.read_text():
        time.sleep(0.05)
    time.sleep(1.3)  # into the next steps, at no chosen moment
    proc.kill()
    print(
        f"killed (exit {proc.wait()}); last.pt was at step "
        f"{checkpoint.load(run / 'last.pt').train_state['step']}"
    )
    subprocess.run(cmd, check=True, capture_output=True)
    want, got = checkpoint.load(ref / "last.pt"), checkpoint.load(run / "last.pt")
    print(
        f"amp {a.amp}, step {got.train_state['step']}: differing tensors: "
        f"model {differing(want.model_state, got.model_state)} of {len(want.model_state)}, "
        f"training state {differing(want.train_state, got.train_state)} (optimizer, RNG)"
    )


if __name__ == "__main__":
    main()
