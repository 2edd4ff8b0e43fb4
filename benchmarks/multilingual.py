"""Multilingual models against one model per pair at the same total training time, on Multi30k.

    python benchmarks/multilingual.py --data ../shared/data --minutes 10 --work /tmp/multilingual

Variants (each a single `mt train --config` run over data.pairs, against `mt train` per pair):
- one-to-many: en -> {de, fr, cs} in one model (target tags <2de> <2fr> <2cs>), trained for
  3 x --minutes, against three en -> X models of --minutes each;
- many-to-one: {de, fr, cs} -> en in one model, 3 x --minutes, against three X -> en models;
- many-to-many: all six directions in one model, 6 x --minutes, for the zero-shot de -> fr it was
  never trained on (test2016 has de and fr: captions of the same images).

Every run uses configs/multi30k.yaml's recipe (its shape, schedule and decoding tuning) with its
time replaced, data.temperature 5 for the multilingual runs, and its own tokenizer. Test:
test2016 BLEU per direction (cs has test2016 and test2018 only; 2017 and 2018 are left to the
single-pair tables), translated by `mt translate` as a user would, scored by sacreBLEU. Runs go
one at a time, never beside another; --work keeps finished runs, so an interrupted benchmark
resumes (a run whose best.pt exists is not trained again).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import sacrebleu
import yaml
from results import append_section, commit, newest_run, write_table
from speed import machine

MT = [sys.executable, "-m", "mt_cli"]
RECIPE = Path(__file__).resolve().parents[1] / "configs" / "multi30k.yaml"
OTHERS = ("de", "fr", "cs")
VARIANTS = {
    "one-to-many": [("en", x) for x in OTHERS],
    "many-to-one": [(x, "en") for x in OTHERS],
    "many-to-many": [("en", x) for x in OTHERS] + [(x, "en") for x in OTHERS],
}


def mt(*args: object) -> None:
    subprocess.run([*MT, *map(str, args)], check=True)


def config(work: Path, name: str, pairs: list[tuple[str, str]], d: Path, minutes: float) -> Path:
    """The recipe with this run's time, and for several pairs their data section."""
    cfg = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    cfg["train"]["max_minutes"] = minutes
    if len(pairs) > 1:
        files = [
            {
                "src": d / f"train.{s}",
                "tgt": d / f"train.{t}",
                "valid_src": d / f"val.{s}",
                "valid_tgt": d / f"val.{t}",
            }
            for s, t in pairs
        ]
        cfg["data"] = {
            "temperature": 5,
            "pairs": [{k: str(v) for k, v in f.items()} for f in files],
        }
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def train(work: Path, name: str, pairs: list[tuple[str, str]], d: Path, minutes: float) -> Path:
    run = work / name
    if _finished(run):
        return run / "best.pt"
    args = ["train", "--config", config(work, name, pairs, d, minutes), "--out", run]
    if len(pairs) == 1:
        s, t = pairs[0]
        args += [
            "--train-src",
            d / f"train.{s}",
            "--train-tgt",
            d / f"train.{t}",
            "--valid-src",
            d / f"val.{s}",
            "--valid-tgt",
            d / f"val.{t}",
        ]
    mt(*args)
    return run / "best.pt"


def _finished(run: Path) -> bool:
    """A run whose log has its end (the tuning at the end of training)."""
    log = run / "log.jsonl"
    return log.is_file() and '"tuned"' in log.read_text(encoding="utf-8")


def test_bleu(work: Path, ckpt: Path, src: str, tgt: str, d: Path, multi: bool) -> float:
    out = work / f"{ckpt.parent.name}.{src}-{tgt}.test2016"
    target = ["--target-lang", tgt] if multi else []
    mt("translate", "--checkpoint", ckpt, d / f"test2016.{src}", "--output", out, *target)
    hyp = out.read_text(encoding="utf-8").splitlines()
    return sacrebleu.corpus_bleu(
        hyp, [(d / f"test2016.{tgt}").read_text(encoding="utf-8").splitlines()]
    ).score


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--minutes", type=float, default=10.0, help="training minutes per direction")
    p.add_argument("--work", type=Path, required=True, help="where runs are kept (a rerun resumes)")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    d = args.data / "multi30k"
    args.work.mkdir(parents=True, exist_ok=True)
    measured_commit = commit()
    rows = [
        "| variant | direction | one model per pair | multilingual model | difference |",
        "|---|---|---|---|---|",
    ]
    for variant in args.variants:
        pairs = VARIANTS[variant]
        budget = f"{args.minutes:g}min"  # runs of another budget are other runs, never reused
        multi = train(args.work, f"{variant}-{budget}", pairs, d, args.minutes * len(pairs))
        for s, t in pairs:
            single = train(args.work, f"single-{s}-{t}-{budget}", [(s, t)], d, args.minutes)
            a, b = (
                test_bleu(args.work, single, s, t, d, False),
                test_bleu(args.work, multi, s, t, d, True),
            )
            rows.append(f"| {variant} | {s}->{t} | {a:.2f} | {b:.2f} | {b - a:+.2f} |")
            print(rows[-1], flush=True)
        # never trained on de -> fr: only the <2fr> tag on German input
        if variant == "many-to-many":
            zero = test_bleu(args.work, multi, "de", "fr", d, True)
            rows.append(f"| many-to-many | de->fr (zero-shot) | - | {zero:.2f} | - |")
            print(rows[-1], flush=True)
    body = "\n".join(
        [
            f"`benchmarks/multilingual.py --minutes {args.minutes:g}`: Multi30k, "
            "configs/multi30k.yaml's recipe, "
            f"{args.minutes:g} training minutes per direction (a multilingual model gets the sum "
            "of its pairs'), "
            "data.temperature 5; test2016 BLEU (sacreBLEU) of `mt translate` with each model's "
            "tuned decoding; "
            f"{machine()}.\n",
            *rows,
        ]
    )
    print(body)
    if not args.no_append:
        when = append_section("Multilingual models", body, measured_commit)
        write_table("multilingual-table", newest_run(when, body))


if __name__ == "__main__":
    main()
