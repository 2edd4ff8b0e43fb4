"""Run a training recipe end to end and append its test scores to benchmarks/RESULTS.md.

    python benchmarks/quality.py --recipe configs/multi30k.yaml --corpus multi30k --src en --tgt de
    python benchmarks/quality.py --recipe configs/tatoeba-zh-en.yaml --corpus zh-en \\
        --src zh --tgt en
    python benchmarks/quality.py --recipe configs/multi30k-de-en.yaml --corpus multi30k \\
        --src de --tgt en --also fr-en --also cs-en   # more directions of the corpus, one model
    python benchmarks/quality.py --docs        # only regenerate docs/quality.md's table

It does what a user does: `mt train` with the recipe (which trains its own tokenizer and, at the
end, leaves RUN/best.pt as the validated choice, the averaged checkpoint or the best step, with
the beam size and length penalty tuned on the validation set as its decoding defaults), then
`mt translate --checkpoint RUN/best.pt` on each test set, scored by sacreBLEU. The test sets take
part in no choice. `--also` trains more directions of the same corpus into the one model (the
multilingual run of `data.pairs`, with target tags where the target language varies); the
checkpoint is still chosen and tuned on the main direction's validation set alone, and only that
direction is scored. Figures are never typed in by hand: this script writes every row of
RESULTS.md and docs/quality.md's table is generated from it.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time
from pathlib import Path

import torch
from results import PAGES, RESULTS, ROOT, append_section, commit, replace_section  # noqa: F401 (re-exported)
from speed import machine  # the CPU and its flags, as every table names them

from mt_cli.config import Config, build_config
from mt_cli.data.sources import TextPair
from mt_cli.files import atomic_write_text
from mt_cli.model import checkpoint
from mt_cli.tools.evaluate import score_files
from mt_cli.tools.line_inputs import LineInputs
from mt_cli.tools.translate_files import translate_file
from mt_cli.train.inputs import DataSpec, PairSpec
from mt_cli.train.loop import train

# corpus -> (folder under the data root, train stem, validation stem, test stems)
CORPORA = {
    "multi30k": ("multi30k", "train", "val", ["test2016", "test2017", "test2018"]),
    "zh-en": ("zh-en", "train", "dev", ["test"]),
}
# Pairs also scored lowercased, to compare with published figures scored that way.
LOWERCASED = {("en", "de")}
COLUMNS = [
    "date",
    "commit",
    "recipe",
    "pair",
    "test",
    "BLEU",
    "chrF",
    "checkpoint",
    "steps",
    "train min",
    "wall min",
    "machine",
    "signature",
]


def run_recipe(args: argparse.Namespace) -> list[dict[str, str]]:
    folder, train_stem, valid_stem, tests = CORPORA[args.corpus]
    data = args.data / folder
    cfg = build_config(None, args.recipe, None, args.set)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = (
        args.out
        or ROOT / "checkpoints" / "quality" / f"{args.recipe.stem}-{args.src}-{args.tgt}-{stamp}"
    )
    if (out / "last.pt").exists():
        sys.exit(f"{out} already holds a run; choose a new --out")
    started, code = time.time(), commit()  # the code that trains, even if the tree changes later
    spec, inputs = data_spec(args, data / train_stem, data / valid_stem)
    state = train(spec, out, cfg, log=lambda m: print(m, file=sys.stderr))
    ckpt = out / "best.pt"
    described = describe(ckpt, state.best_step, cfg)
    cpu = machine()
    rows = []
    for test in tests:
        hyp = out / f"{test}.hyp.{args.tgt}"
        ref = data / f"{test}.{args.tgt}"
        translate_file(ckpt, data / f"{test}.{args.src}", hyp, cfg.train.device, inputs=inputs)
        result = score_files(hyp, [ref])
        scores = [(test, result["bleu"], f"{result['chrf']:.2f}", result["signature"]["bleu"])]
        if (args.src, args.tgt) in LOWERCASED:
            scores.append((f"{test} lowercased", *lowercased_bleu(hyp, ref)))
        rows += [
            {
                "date": datetime.date.today().isoformat(),
                "commit": code,
                "recipe": recipe_name(args),
                "pair": f"{args.src}-{args.tgt}",
                "test": name,
                "BLEU": f"{bleu:.2f}",
                "chrF": chrf,
                "checkpoint": described,
                "steps": str(state.step),
                "train min": f"{state.elapsed_s / 60:.1f}",
                "wall min": f"{(time.time() - started) / 60:.1f}",
                "machine": f"{cpu}, {torch.get_num_threads()} threads, torch {torch.__version__}",
                # Markdown tables split cells on "|", so the signature's bars are escaped.
                "signature": "`" + signature.replace("|", "\\|") + "`",
            }
            for name, bleu, chrf, signature in scores
        ]
    return rows


def data_spec(args: argparse.Namespace, train: Path, valid: Path) -> tuple[DataSpec, LineInputs]:
    """The run's data: the main direction (train.de, train.en, validated on val.de, val.en), and
    each --also direction's training files beside it, not validated: the checkpoint is chosen for
    the main direction. Where the target language varies the model writes the one its tag asks
    for, so the test sets are translated with the main direction's target named."""
    main = PairSpec(
        TextPair(train.with_suffix(f".{args.src}"), train.with_suffix(f".{args.tgt}")),
        TextPair(valid.with_suffix(f".{args.src}"), valid.with_suffix(f".{args.tgt}")),
        args.src,
        args.tgt,
    )
    if not args.also:
        return DataSpec((main,)), LineInputs()
    extra = []
    for pair in args.also:
        src, _, tgt = pair.partition("-")
        # TextPair says which file is missing
        files = TextPair(train.with_suffix(f".{src}"), train.with_suffix(f".{tgt}"))
        extra.append(PairSpec(files, None, src, tgt))
    several = len({args.tgt, *(p.target_lang for p in extra)}) > 1
    return DataSpec.with_extra(main, extra), LineInputs(target_lang=args.tgt if several else None)


def recipe_name(args: argparse.Namespace) -> str:
    """The recipe column: the file and what the run changed (a trial's overrides and directions)."""
    changes = [*(args.set or []), *(f"+{pair}" for pair in args.also or [])]
    return args.recipe.name + "".join(" " + c for c in changes)


def lowercased_bleu(hyp: Path, ref: Path) -> tuple[float, str, str]:
    """BLEU as published Multi30k en->de work reports it (Wu et al.: tokenized, lowercased):
    sacreBLEU's 13a tokenization with lowercase=True; the signature says `case:lc`."""
    import sacrebleu

    metric = sacrebleu.BLEU(lowercase=True)
    lines = [p.read_text(encoding="utf-8").splitlines() for p in (hyp, ref)]
    bleu = metric.corpus_score(lines[0], [lines[1]])
    return bleu.score, "-", str(metric.get_signature())


def describe(path: Path, best_step: int, cfg: Config) -> str:
    """What best.pt holds and how it decodes, for the checkpoint column."""
    ckpt = checkpoint.load(path)
    averaged = (ckpt.origin or {}).get("averaged")
    what = f"average of {len(averaged)}" if averaged else f"step {best_step}"
    d, t = ckpt.config.decode, cfg.train
    tuned = " (tuned)" if t.tune_beams or t.tune_length_penalties else ""
    return f"best.pt = {what}, beam {d.beam}, lp {d.length_penalty:g}{tuned}"


def append_results(rows: list[dict[str, str]], path: Path = RESULTS) -> None:
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if "| date |" not in text:
        text += (
            "# Quality results\n\nWritten by `benchmarks/quality.py`; one row per test set of each "
            "run.\n\n" + "| " + " | ".join(COLUMNS) + " |\n" + "|" + "---|" * len(COLUMNS) + "\n"
        )
    # New rows go right after the table's last row: other scripts (speed.py) append sections below
    # it.
    lines = text.splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.startswith("| date |"))
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    new = ["| " + " | ".join(row[c] for c in COLUMNS) + " |\n" for row in rows]
    atomic_write_text(path, "".join(lines[:end] + new + lines[end:]))


def read_results(path: Path = RESULTS) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if (
            len(cells) == len(COLUMNS)
            and cells[0] not in ("date",)
            and not cells[0].startswith("-")
        ):
            rows.append(dict(zip(COLUMNS, cells)))
    return rows


QUALITY_PAGE = PAGES["quality-table"]


def docs_table(rows: list[dict[str, str]]) -> str:
    """The newest row for each (recipe, pair, test), as docs/quality.md shows it (with its date;
    RESULTS.md keeps the commit). Rows of runs with --set overrides are trials of a changed recipe,
    not the shipped one: RESULTS.md keeps them, the docs table leaves them out."""
    latest: dict[tuple[str, str, str], dict[str, str]] = {}
    for row in rows:
        if " " in row["recipe"]:  # "recipe.yaml field=value ...": a trial
            continue
        latest[(row["recipe"], row["pair"], row["test"])] = row
    names = ["recipe", "pair", "test", "BLEU", "chrF", "checkpoint", "steps", "train min", "date"]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    # a lowercased score right under the cased one of its test set
    order = {key: n for n, key in enumerate(latest)}

    def place(key: tuple[str, str, str]) -> tuple[int, bool]:
        cased = (*key[:2], key[2].removesuffix(" lowercased"))
        return order.get(cased, order[key]), cased != key

    for key in sorted(latest, key=place):
        r = latest[key]
        lines.append("| " + " | ".join(r[n] for n in names) + " |")
    if not latest:
        lines.append("| (no runs recorded yet) |" + " |" * (len(names) - 1))
    return "\n".join(lines)


def update_docs(page: Path = QUALITY_PAGE, results: Path = RESULTS) -> None:
    """docs/quality.md's table (or `page`'s), regenerated from the rows of `results`."""
    replace_section(page, "quality-table", docs_table(read_results(results)))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--recipe", type=Path, help="YAML recipe in configs/")
    p.add_argument("--corpus", choices=sorted(CORPORA), default="multi30k")
    p.add_argument("--src", default="de")
    p.add_argument("--tgt", default="en")
    p.add_argument(
        "--data",
        type=Path,
        default=ROOT.parent / "shared" / "data",
        help="folder holding the corpora",
    )
    p.add_argument(
        "--out", type=Path, help="run folder (default: checkpoints/quality/<recipe>-<pair>-<time>)"
    )
    p.add_argument(
        "--set",
        action="append",
        help="override a config field, as in `mt train --set` (recorded in the row)",
    )
    p.add_argument(
        "--also",
        action="append",
        metavar="SRC-TGT",
        help="another direction of the corpus trained into the same model (fr-en beside de-en)",
    )
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument(
        "--docs",
        "--readme",
        dest="docs",
        action="store_true",
        help="only regenerate docs/quality.md's table",
    )
    args = p.parse_args()
    if not args.docs:
        if args.recipe is None:
            p.error("--recipe is required unless --docs is given")
        rows = run_recipe(args)
        append_results(rows, args.results)
        for row in rows:
            print(
                f"{row['pair']} {row['test']}: BLEU {row['BLEU']}, chrF {row['chrF']} "
                f"({row['checkpoint']})"
            )
    if args.results == RESULTS:
        update_docs()


if __name__ == "__main__":
    main()
