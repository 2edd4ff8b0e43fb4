r"""The data pipeline's figures: `mt clean`'s removals per rule, and distilled students against
their teacher and against students trained on the original data, on Multi30k.

    python benchmarks/distill.py clean --data ../shared/data \
        [--train-steps 2716 2162 --work /work/bench/clean]
    python benchmarks/distill.py distill --data ../shared/data --work /work/bench/distill \
        --direction de-en --teacher-steps 8149 --teachers 1 --student-minutes 30

distill:
- teachers: configs/multi30k.yaml's recipe trained for --teacher-steps updates (the steps its
  60-minute budget reaches on an idle 2-core CPU: 8,149 de->en, 9,535 en->de), seeds 1..--teachers;
  or given with --teacher (repeatable);
- students, each `mt distill` from the single teacher and, with two, from their ensemble (shapes
  in --ensemble-shapes), for --student-minutes of training (or --student-steps updates):
  configs/multi30k-student.yaml (6 encoder layers, 1 decoder layer, Kasai et al. 2021's
  deep-encoder/shallow-decoder), the recipe's shape with a 2-layer decoder (4+2), and a 4+1
  student started from the teacher's embeddings and layers (--init-layers), alone on the teachers'
  translations or mixed with the original pairs;
- baselines: the same shapes trained by `mt train` on the original pairs for the same budget.
Every model translates test2016, test2017 and test2018 (joined into one file) in a clean process,
as `mt translate` does with the checkpoint's defaults (a student: int8 and its shortlist, as
mt distill writes it), and as CTranslate2 runs its int8 export (benchmarks/peers/ct2_translate.py,
the same beam and length penalty); systems take turns over --rounds and keep their fastest.
Sentences/s: decoding with the model loaded (reading, tokenizing, translating), in processes that
import their own library only; whole-process seconds beside them. BLEU and chrF: sacreBLEU on mt's
output. Each mt model's compiled step is built first (`mt compile`, not timed).
Runs train one at a time; --work keeps finished ones, so a rerun resumes.

clean: mt clean's removals per rule on the Multi30k de-en and Tatoeba zh-en training sets; with
--train-steps, each corpus's recipe trained on the raw and on the cleaned pairs for the same
updates (2716 and 2162: a third of the 8,149 and 6,487 updates each recipe's 60 minutes reached
in its quality run on a 2-core CPU), compared by the validation BLEU of the checkpoint kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu
from results import DOCS, ROOT, append_section, commit, copy_newest
from speed import machine

MT = [sys.executable, "-m", "mt_cli"]
RECIPE, STUDENT = ROOT / "configs" / "multi30k.yaml", ROOT / "configs" / "multi30k-student.yaml"
# Student shapes: options given to mt distill and mt train beside configs/multi30k-student.yaml;
# "4+1 shrunk" starts from the first teacher's embeddings and layers (encoder all 4, decoder the
# first); "4+1 shrunk mixed" also trains on the original pairs beside the teachers' (equal weight),
# so its baseline on the original pairs alone is 4+1 shrunk's (BASE), not a second, identical one.
SHAPES = {
    "6+1": [],
    "4+2": ["--set", "model.enc_layers=4", "--set", "model.dec_layers=2"],
    "4+1 shrunk": ["--init-layers", "4+1"],
}
SHAPES["4+1 shrunk mixed"] = [*SHAPES["4+1 shrunk"], "--set", "distill.original_weight=1"]
BASE = {"4+1 shrunk mixed": "4+1 shrunk"}
TESTS = ("test2016", "test2017", "test2018")
ENV = {**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}


def run(*args: object, log: Path | None = None) -> None:
    cmd = [str(a) for a in args]
    print("$", " ".join(cmd), flush=True)
    with open(log, "a") if log else open(os.devnull, "w") as out:
        subprocess.run(cmd, check=True, stderr=out if log else None, env=ENV)


def finished(run_dir: Path) -> bool:
    """A run whose log has its end (the decoding tuning at the end of training)."""
    log = run_dir / "log.jsonl"
    return log.is_file() and '"tuned"' in log.read_text(encoding="utf-8")


def data_args(d: Path, s: str, t: str) -> list[object]:
    return [
        "--train-src",
        d / f"train.{s}",
        "--train-tgt",
        d / f"train.{t}",
        "--valid-src",
        d / f"val.{s}",
        "--valid-tgt",
        d / f"val.{t}",
    ]


def steps(n: int) -> list[object]:
    """mt train's options for a budget of n updates, whatever the time (other load changes the
    minutes, not the result)."""
    return ["--set", "train.max_minutes=0", "--set", f"train.max_steps={n}"]


def student_budget(args) -> tuple[str, list[object], str, str]:
    """A student's budget: its run-name suffix, its mt options, its words and this script's flag.
    A step budget trains the same updates whatever else the machine runs; minutes need it idle."""
    n, minutes = args.student_steps, args.student_minutes
    if n:
        return f"{n}steps", steps(n), f"{n} updates each", f"--student-steps {n}"
    flag = f"--student-minutes {minutes:g}"
    return f"{minutes:g}min", ["--max-minutes", minutes], f"{minutes:g} training minutes", flag


def models(args, d: Path, s: str, t: str) -> dict[str, Path]:
    """Train (or find) every model of the table: name -> checkpoint."""
    w, (m, budget, _, _) = args.work, student_budget(args)
    teachers = list(args.teacher)
    for seed in range(len(teachers) + 1, args.teachers + 1):
        out = w / f"teacher-{s}-{t}-{seed}"
        if not finished(out):
            run(
                *MT,
                "train",
                "--config",
                RECIPE,
                *data_args(d, s, t),
                "--out",
                out,
                *steps(args.teacher_steps),
                "--set",
                f"train.seed={seed}",
                log=w / "log.txt",
            )
        teachers.append(out / "best.pt")
    found = {f"teacher {i + 1}": p for i, p in enumerate(teachers)}
    ensemble = (
        (args.shapes if args.ensemble_shapes is None else args.ensemble_shapes)
        if len(teachers) > 1
        else []
    )
    for shape in args.shapes:
        init = ["--init", teachers[0]] if "--init-layers" in SHAPES[shape] else []
        sets, tag = SHAPES[shape] + init, f"{s}-{t}-{shape.replace(' ', '-')}"
        groups = {
            "1 teacher": teachers[:1],
            **({"2 teachers": teachers[:2]} if shape in ensemble else {}),
        }
        for group, members in groups.items():
            out = w / f"student-{tag}-{len(members)}t-{m}"
            if not (out / "student.pt").is_file():
                run(
                    *MT,
                    "distill",
                    *[x for p in members for x in ("--teacher", p)],
                    *data_args(d, s, t),
                    "--out",
                    out,
                    "--config",
                    STUDENT,
                    *sets,
                    *budget,
                    log=w / "log.txt",
                )
            found[f"student {shape}, {group}"] = out / "student.pt"
        base_shape = BASE.get(shape, shape)
        base = w / f"original-{s}-{t}-{base_shape.replace(' ', '-')}-{m}"
        if not finished(base):
            run(
                *MT,
                "train",
                "--config",
                STUDENT,
                *SHAPES[base_shape],
                *init,
                *data_args(d, s, t),
                "--out",
                base,
                *budget,
                log=w / "log.txt",
            )
        found[f"{base_shape} on the original pairs"] = base / "best.pt"
    return found


def ct2_export(ckpt: Path) -> Path:
    """The int8 CTranslate2 export: mt distill's own for a student, else `mt export`'s."""
    out = ckpt.parent / "ct2" if ckpt.name == "student.pt" else ckpt.parent / "ct2-int8"
    if not (out / "model.bin").is_file():
        run(
            *MT,
            "export",
            "--checkpoint",
            ckpt,
            "--out",
            out,
            "--format",
            "ct2",
            "--quantization",
            "int8",
        )
    return out


def timed(cmd: list[object]) -> tuple[float, float]:
    """A peer script's decoding seconds (its own figure) and the whole process's."""
    start = time.perf_counter()
    print("$", " ".join(map(str, cmd)), flush=True)
    done = subprocess.run(
        [str(c) for c in cmd], check=True, capture_output=True, text=True, env=ENV
    )
    return json.loads(done.stdout.strip().splitlines()[-1])["decode_s"], time.perf_counter() - start


def measure(args, found: dict[str, Path], src: Path) -> dict[str, dict]:
    """Each model's output and best seconds (decoding, and the whole process), mt's and
    CTranslate2's, over --rounds; mt's compiled step built first, as `mt compile` does."""
    from mt_cli.model import checkpoint

    rows: dict[str, dict] = {}
    for name, ckpt in found.items():
        c = checkpoint.load(ckpt).config
        run(*MT, "compile", "--checkpoint", ckpt, "--precision", c.decode.precision)
        rows[name] = {
            "ckpt": ckpt,
            "ct2": ct2_export(ckpt),
            "beam": c.decode.beam,
            "lp": c.decode.length_penalty,
            "precision": c.decode.precision,
            "layers": f"{c.model.enc_layers}+{c.model.dec_layers}",
            "out": args.work / f"out.{ckpt.parent.name}",
        }
        rows[name].update({k: float("inf") for k in ("mt_s", "mt_whole", "ct2_s", "ct2_whole")})
    peers = ROOT / "benchmarks" / "peers"
    for _ in range(args.rounds):
        for row in rows.values():
            mt = timed([sys.executable, peers / "mt_translate.py", row["ckpt"], src, row["out"]])
            ct2 = timed(
                [
                    sys.executable,
                    peers / "ct2_translate.py",
                    row["ct2"],
                    src,
                    f"{row['out']}.ct2",
                    "--beam",
                    row["beam"],
                    "--length-penalty",
                    row["lp"],
                ]
            )
            for key, (decode_s, whole_s) in (("mt", mt), ("ct2", ct2)):
                row[f"{key}_s"] = min(row[f"{key}_s"], decode_s)
                row[f"{key}_whole"] = min(row[f"{key}_whole"], whole_s)
    return rows


def by_test(out: Path, refs: dict[str, list[str]]) -> dict[str, list[str]]:
    """The joined output's lines of each test set (the tests were joined in TESTS order)."""
    hyp, got = out.read_text(encoding="utf-8").splitlines(), {}
    for test, lines in refs.items():
        got[test], hyp = hyp[: len(lines)], hyp[len(lines) :]
    return got


def scores(hyps: dict[str, list[str]], refs: dict[str, list[str]]) -> list[tuple[float, float]]:
    """(BLEU, chrF) of each test set."""
    return [
        (
            sacrebleu.corpus_bleu(hyps[x], [refs[x]]).score,
            sacrebleu.corpus_chrf(hyps[x], [refs[x]]).score,
        )
        for x in TESTS
    ]


def gaps(outs: dict[str, dict[str, list[str]]], refs: dict[str, list[str]]) -> list[str]:
    """Each model's BLEU below the first teacher's on each test set, with the paired bootstrap's p
    (sacreBLEU, 1,000 resamples: the chance that a gap this size is luck of the test sentences)."""
    from mt_cli.metrics import paired_bootstrap

    cells: dict[str, list[str]] = {name: [] for name in list(outs)[1:]}
    for test in TESTS:
        got = paired_bootstrap([(name, hyps[test]) for name, hyps in outs.items()], [refs[test]])
        for system in got["systems"]:
            gap = got["baseline"]["bleu"] - system["bleu"]
            cells[system["system"]].append(f"{gap:.2f} (p {system['p_value']:.3f})")
    head = f"| BLEU below {list(outs)[0]} (paired bootstrap p) | " + " | ".join(TESTS) + " |"
    return [
        head,
        "|---" * (len(TESTS) + 1) + "|",
        *(f"| {n} | " + " | ".join(c) + " |" for n, c in cells.items()),
    ]


def ensemble_flag(args) -> str:
    """The --ensemble-shapes part of the command line, where it was given and mattered."""
    shapes = args.ensemble_shapes
    return "" if shapes is None or args.teachers < 2 else f" --ensemble-shapes {shlex.join(shapes)}"


def distill_main(args) -> None:
    s, t = args.direction.split("-")
    d = args.data / "multi30k"
    args.work.mkdir(parents=True, exist_ok=True)
    measured = commit()
    found = models(args, d, s, t)
    src = args.work / f"tests.{s}"
    src.write_text(
        "".join((d / f"{test}.{s}").read_text(encoding="utf-8") for test in TESTS), encoding="utf-8"
    )
    lines = sum(1 for _ in open(src, encoding="utf-8"))
    rows = measure(args, found, src)
    table = [
        "| model | layers | decoding | "
        + " | ".join(f"{x} BLEU / chrF" for x in TESTS)
        + " | sent/s, mt | sent/s, CTranslate2 int8 | whole process s, mt / CTranslate2 |",
        "|---" * 9 + "|",
    ]
    points = []
    refs = {test: (d / f"{test}.{t}").read_text(encoding="utf-8").splitlines() for test in TESTS}
    outs = {name: by_test(row["out"], refs) for name, row in rows.items()}
    for name, row in rows.items():
        got = scores(outs[name], refs)
        mt_rate, ct2_rate = lines / row["mt_s"], lines / row["ct2_s"]
        whole = f"{row['mt_whole']:.1f} / {row['ct2_whole']:.1f}"
        table.append(
            f"| {name} | {row['layers']} | beam {row['beam']}, lp {row['lp']:g}, "
            f"{row['precision']} | "
            + " | ".join(f"{b:.2f} / {c:.1f}" for b, c in got)
            + f" | {mt_rate:.1f} | {ct2_rate:.1f} | {whole} |"
        )
        points.append((name, mt_rate, got[0][0]))
    budget = student_budget(args)
    body = "\n".join(
        [
            f"`benchmarks/distill.py distill --direction {args.direction} --teacher-steps "
            f"{args.teacher_steps} "
            f"--teachers {args.teachers} {budget[3]} --shapes "
            f"{shlex.join(args.shapes)}{ensemble_flag(args)}`: "
            f"Multi30k {s}->{t}; teachers: "
            f"configs/multi30k.yaml for {args.teacher_steps} steps; students {budget[2]}; "
            f"decoding sentences/s (model loaded; 2 threads) over the {lines} lines of "
            f"{', '.join(TESTS)}, best of "
            f"{args.rounds} rounds; {machine()}.\n",
            *table,
            "",
            *gaps(outs, refs),
        ]
    )
    print(body)
    if not args.no_append:
        plot(points, DOCS / f"pipeline-{args.direction}.png", args.direction)
        append_section("Distillation", body + "\n", measured)
        copy_newest("Distillation", f"distill-{args.direction}-table")


def plot(points: list[tuple[str, float, float]], path: Path, direction: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # A legend rather than labels beside the points: close points made labels overlap.
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    for name, rate, bleu in points:
        # Marker by kind: teachers squares, students circles, baselines on the original pairs
        # triangles.
        marker = "s" if name.startswith("teacher") else "o" if name.startswith("student") else "^"
        ax.scatter(rate, bleu, s=45, marker=marker, label=name)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set(
        xlabel="decoding sentences/s (mt, 2 threads)",
        ylabel="test2016 BLEU",
        title=f"Multi30k {direction}: quality against decoding speed",
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


CORPORA = {
    "Multi30k de-en": ("multi30k", "de", "en", "val", RECIPE),
    "Tatoeba zh-en": ("zh-en", "zh", "en", "dev", ROOT / "configs" / "tatoeba-zh-en.yaml"),
}


def best_valid_bleu(run_dir: Path) -> float:
    """The validation BLEU best.pt holds: the best of the run's validations and its average."""
    rows = [
        json.loads(line)
        for line in (run_dir / "log.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return max(r["valid_bleu"] for r in rows if "valid_bleu" in r)


def raw_against_cleaned(
    args, folder: str, s: str, t: str, valid: str, recipe: Path, cleaned: Path, n: int
) -> list[float]:
    """Validation BLEU of the corpus's recipe trained on the raw and on the cleaned pairs, n updates
    each."""
    d, got = args.data / folder, []
    for name, prefix in (("raw", d / "train"), ("cleaned", cleaned)):
        out = args.work / f"recipe-{folder}-{name}-{n}steps"
        if not finished(out):
            run(
                *MT,
                "train",
                "--config",
                recipe,
                "--train-src",
                f"{prefix}.{s}",
                "--train-tgt",
                f"{prefix}.{t}",
                "--valid-src",
                d / f"{valid}.{s}",
                "--valid-tgt",
                d / f"{valid}.{t}",
                "--out",
                out,
                *steps(n),
                log=args.work / "log.txt",
            )
        got.append(best_valid_bleu(out))
    return got


def clean_main(args) -> None:
    """Pairs removed per rule from the Multi30k and Tatoeba training sets, with mt clean's defaults;
    with --train-steps, the validation BLEU of each corpus's recipe trained on raw and cleaned
    pairs."""
    counts: dict[str, dict[str, int]] = {}
    bleu: dict[str, list[float]] = {}
    budgets = args.train_steps * len(CORPORA) if len(args.train_steps) == 1 else args.train_steps
    if len(budgets) != len(CORPORA):
        sys.exit(f"--train-steps takes one number, or one per corpus ({', '.join(CORPORA)})")
    args.work.mkdir(parents=True, exist_ok=True)
    for (name, (folder, s, t, valid, recipe)), n in zip(CORPORA.items(), budgets):
        out = args.work / f"clean-{folder}"
        done = subprocess.run(
            [
                *MT,
                "clean",
                "--src",
                args.data / folder / f"train.{s}",
                "--tgt",
                args.data / folder / f"train.{t}",
                "--out-prefix",
                out,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        counts[name] = {
            line.split()[0]: int(line.split()[1].replace(",", ""))
            for line in done.stdout.splitlines()
            if not line.startswith("wrote")
        }
        if n:
            bleu[name] = raw_against_cleaned(args, folder, s, t, valid, recipe, out, n)
    rules = [r for r in dict.fromkeys(k for c in counts.values() for k in c) if r != "kept"]
    rows = ["| rule | " + " | ".join(counts) + " |", "|---" * (len(counts) + 1) + "|"]
    for rule in [*rules, "kept"]:
        rows.append(
            f"| {rule} | " + " | ".join(f"{c.get(rule, 0):,}" for c in counts.values()) + " |"
        )
    for i, name in enumerate(("raw", "cleaned") if bleu else ()):
        cells = (f"{bleu[c][i]:.2f}" if c in bleu else "not trained" for c in counts)
        rows.append(f"| validation BLEU, recipe on {name} pairs | " + " | ".join(cells) + " |")
    trained = (
        " The recipes (configs/multi30k.yaml, configs/tatoeba-zh-en.yaml) trained "
        f"{' and '.join(f'{n:,}' for n in budgets)} updates on each side's pairs; validation BLEU "
        "of the "
        "checkpoint kept."
        if bleu
        else ""
    )
    flag = f" --train-steps {' '.join(map(str, budgets))}" if bleu else ""
    body = "\n".join(
        [
            f"`benchmarks/distill.py clean{flag}`: `mt clean` with its defaults (every rule but "
            "score)."
            f"{trained} {machine()}.\n",
            *rows,
        ]
    )
    print(body)
    if not args.no_append:
        append_section("mt clean", body + "\n")
        copy_newest("mt clean", "clean-table")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("stage", choices=["clean", "distill"])
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument(
        "--work",
        type=Path,
        default=Path("/tmp/distill"),
        help="where runs are kept (a rerun resumes)",
    )
    p.add_argument("--direction", default="de-en", choices=["de-en", "en-de"])
    p.add_argument("--teacher-steps", type=int, default=8149)
    p.add_argument("--teachers", type=int, default=1, choices=[1, 2])
    p.add_argument(
        "--teacher", type=Path, action="append", default=[], help="a trained teacher's best.pt"
    )
    p.add_argument(
        "--train-steps",
        type=int,
        nargs="+",
        default=[0],
        help=(
            "clean: also train each recipe raw and cleaned, these updates (one, or one per corpus)"
        ),
    )
    p.add_argument("--student-minutes", type=float, default=30.0)
    p.add_argument(
        "--student-steps",
        type=int,
        default=0,
        help="a step budget for students, instead of minutes",
    )
    p.add_argument(
        "--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES), help="student shapes"
    )
    p.add_argument(
        "--ensemble-shapes",
        nargs="*",
        choices=list(SHAPES),
        help="shapes that also get a "
        "student of the two-teacher ensemble (default: every shape in --shapes)",
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    args.data, args.work = args.data.resolve(), args.work.resolve()
    clean_main(args) if args.stage == "clean" else distill_main(args)


if __name__ == "__main__":
    main()
