"""Decoding levers one at a time: the same model, sentences and batches, one change per row.

    python benchmarks/levers.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

Every variant runs in this process (PyTorch only; speed.py keeps other toolkits in their own
processes), the variants take turns for --rounds rounds and each keeps its fastest run. The
table is printed (sentences/s, beam 5 and greedy); with --append, added to benchmarks/RESULTS.md and
copied into docs/speed.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch
from results import append_section, copy_newest  # this folder's results helpers
from speed import machine  # the CPU and its flags, as every speed table names them

from mt_cli.decode import compiled
from mt_cli.decode.engine import Output
from mt_cli.decode.search import search_ids
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.translator import Translator
from mt_cli.model import checkpoint

BATCH = 64


def variants(path: Path) -> dict[str, Translator]:
    """Each way of decoding, loaded as `mt translate` loads it (the compiled steps built first,
    as `mt compile` builds them), and the levers measured against them."""

    def load(**options) -> Translator:
        return Translator.load(path, "cpu", batch_size=BATCH, length_penalty=1.0, **options)

    table = {}
    for precision in ("fp32", "bf16", "int8"):
        compiled.compile_checkpoint(path, precision)
        table[f"{precision}, eager"] = load(precision=precision, engine="eager")
        table[f"{precision}, compiled"] = load(precision=precision, engine="compiled")
    # The int8 step with its output layer in fp32, as it ran before the output layer was int8.
    before = load(precision="int8", engine="eager")
    before.engine.output = Output(checkpoint.load(path).build_model("cpu"), "fp32")  # type: ignore[union-attr]
    table["int8, eager, output layer in fp32"] = before
    # The shortlist as it ran before each sentence chose among its own candidates: every row over
    # the batch's union (fast, but a translation then depended on its neighbours in the batch).
    union = load(precision="int8", engine="compiled")
    union.plan = dataclasses.replace(union.plan, shortlist=UnionOnly.of(union.lexicon))
    table["int8, compiled, shortlist as the batch's union (no mask per sentence)"] = union
    return table


class UnionOnly(Shortlist):
    def for_batch(self, src):  # type: ignore[override]
        return super().for_batch(src)[0], None


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--append", action="store_true", help="add the table to benchmarks/RESULTS.md")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ckpt = checkpoint.load(args.checkpoint)
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    ids = ckpt.tokenizer.encode_src(lines)
    table = variants(args.checkpoint)
    results: dict[str, dict[int, float]] = {name: {} for name in table}
    for beam in (5, 1):
        for tr in table.values():
            # warm-up
            search_ids(
                tr.engine, ids[:BATCH], dataclasses.replace(tr.cfg, beam=beam), tr.plan.shortlist
            )
        for _ in range(args.rounds):
            for name, tr in table.items():
                cfg = dataclasses.replace(tr.cfg, beam=beam)
                start = time.perf_counter()
                search_ids(tr.engine, ids, cfg, tr.plan.shortlist)
                speed = len(ids) / (time.perf_counter() - start)
                results[name][beam] = max(results[name].get(beam, 0.0), speed)
    rows = ["| variant | beam 5 sent/s | greedy sent/s |", "|---|---|---|"]
    rows += [f"| {name} | {r[5]:.1f} | {r[1]:.1f} |" for name, r in results.items()]
    body = (
        f"`benchmarks/levers.py`: {args.checkpoint}, the first {len(ids)} lines of "
        f"{args.src_file.name}, batches "
        f"of {BATCH}, the checkpoint's shortlist, {args.rounds} rounds taking turns, fastest kept; "
        f"{machine()}, "
        f"{args.threads} threads, torch {torch.__version__}.\n\n" + "\n".join(rows)
    )
    print(body)
    if args.append:
        append_section("Decoding levers", body)
        copy_newest("Decoding levers", "levers-table")  # docs/speed.md's table


if __name__ == "__main__":
    main()
