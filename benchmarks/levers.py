"""Decoding levers one at a time: the same model, sentences and batches, one change per row.

    python benchmarks/levers.py --checkpoint RUN/best.pt --src-file ../shared/data/multi30k/test2016.de

Every variant runs in this process (PyTorch only; speed.py keeps other toolkits in their own
processes), the variants take turns for --rounds rounds and each keeps its fastest run. The
table is printed (sentences/s, beam 5 and greedy); with --append, added to benchmarks/RESULTS.md and
copied into docs/speed.md.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import time
from collections.abc import Callable
from pathlib import Path

import torch
from results import RESULTS, commit, copy_newest  # this folder's results helpers
from speed import machine  # the CPU and its flags, as every speed table names them
from torch import nn

from mt_cli.decode import compiled
from mt_cli.decode.engine import Engine
from mt_cli.decode.precision import quantize_int8
from mt_cli.decode.search import search_ids
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.translator import Translator
from mt_cli.device import autocast
from mt_cli.files import atomic_write_text
from mt_cli.model import checkpoint

BATCH = 64


def int8_engine(fp32: nn.Module) -> Engine:
    """What `--precision int8` loads: the engine's step in per-row int8 over the model's weights,
    the model's encoder quantized the same way."""
    model = copy.deepcopy(fp32)
    engine = Engine(model, "int8")
    quantize_int8(model)
    return engine


def variants(
    fp32: nn.Module, checkpoint_path: Path, shortlist: Shortlist | None
) -> dict[str, tuple[nn.Module, Callable]]:
    def sorted_batches(model, ids, cfg):
        return search_ids(model, ids, cfg, shortlist)

    def bf16_autocast(model, ids, cfg):
        with autocast(True, torch.device("cpu")):
            return search_ids(model, ids, cfg, shortlist)

    def with_compiled(engine: Engine) -> Engine:
        """The same step compiled ahead of time (`mt compile`; built here first if it is not)."""
        engine.compiled = compiled.load(compiled.compile_checkpoint(checkpoint_path, engine.precision)[0])
        return engine

    return {
        "fp32, the model's own decode (decode.engine eager)": (fp32, sorted_batches),
        "fp32, the engine's step (decode.engine step)": (Engine(fp32), sorted_batches),
        "fp32, the step compiled (decode.engine compiled)": (with_compiled(Engine(fp32)), sorted_batches),
        "bf16 autocast, the model's own decode": (fp32, bf16_autocast),
        "bf16 weights cast once, engine (decode.engine step)": (Engine(fp32, "bf16"), sorted_batches),
        "bf16, the step compiled (decode.engine compiled)": (with_compiled(Engine(fp32, "bf16")), sorted_batches),
        "int8 per row, model's decode (decode.engine eager)": (quantize_int8(copy.deepcopy(fp32)), sorted_batches),
        "int8 per row, engine (decode.engine step)": (int8_engine(fp32), sorted_batches),
        "int8, the step compiled (decode.engine compiled)": (with_compiled(int8_engine(fp32)), sorted_batches),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    loaded = Translator.load(args.checkpoint, "cpu", batch_size=BATCH, length_penalty=1.0, engine="eager")
    fp32, base_cfg = loaded.model, loaded.cfg
    table = variants(fp32, args.checkpoint, loaded.shortlist)
    results: dict[str, dict[int, float]] = {name: {} for name in table}
    for beam in (5, 1):
        cfg = dataclasses.replace(base_cfg, beam=beam)
        for model, run in table.values():
            run(model, ids[:BATCH], cfg)  # warm-up
        for _ in range(args.rounds):
            for name, (model, run) in table.items():
                start = time.perf_counter()
                run(model, ids, cfg)
                speed = len(ids) / (time.perf_counter() - start)
                results[name][beam] = max(results[name].get(beam, 0.0), speed)
    rows = ["| variant | beam 5 sent/s | greedy sent/s |", "|---|---|---|"]
    rows += [f"| {name} | {r[5]:.1f} | {r[1]:.1f} |" for name, r in results.items()]
    body = (f"`benchmarks/levers.py`: {args.checkpoint}, the first {len(ids)} lines of {args.src_file.name}, batches "
            f"of {BATCH}, the checkpoint's shortlist, {args.rounds} rounds taking turns, fastest kept; {machine()}, "
            f"{args.threads} threads, torch {torch.__version__}.\n\n" + "\n".join(rows))  # fmt: skip
    print(body)
    if args.append:
        when = f"{datetime.date.today()}, commit {commit()}"
        atomic_write_text(RESULTS, RESULTS.read_text(encoding="utf-8") + f"\n## Decoding levers, {when}\n\n{body}\n")
        copy_newest("Decoding levers", "levers-table")  # docs/speed.md's table


if __name__ == "__main__":
    main()
