"""Decoding levers one at a time: the same model, sentences and batches, one change per row.

    python benchmarks/levers.py --checkpoint RUN/best.pt --src-file ../shared/data/multi30k/test2016.de

Every variant runs in this process (PyTorch only; speed.py keeps other toolkits in their own
processes), the variants take turns for --rounds rounds and each keeps its fastest run. The
table is printed (sentences/s, beam 5 and greedy); benchmarks/RESULTS.md "What each lever did" quotes it.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from results import RESULTS, commit  # this folder's results helpers
from speed import machine  # the CPU and its flags, as every speed table names them
from torch import nn

from mt_cli.decode.engine import Engine
from mt_cli.decode.precision import quantize_int8
from mt_cli.decode.search import search_batch, search_ids
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.translator import Translator
from mt_cli.device import autocast
from mt_cli.files import atomic_write_text
from mt_cli.model import checkpoint

BATCH = 64


def dynamic_int8(fp32: nn.Module) -> nn.Module:
    """PyTorch's dynamic int8 linear layers (one activation scale per call, for the whole batch) in
    the encoder and decoder, the output layer as --precision int8 runs it: the earlier int8 path."""
    from torch.ao.quantization import quantize_dynamic

    model = quantize_int8(copy.deepcopy(fp32))  # for its output layer; the int8 layers are redone below
    reference = copy.deepcopy(fp32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.encoder = quantize_dynamic(reference.encoder, {nn.Linear}, dtype=torch.qint8)
        model.decoder = quantize_dynamic(reference.decoder, {nn.Linear}, dtype=torch.qint8)
    return model


def int8_engine(fp32: nn.Module) -> Engine:
    """What `--precision int8` loads: the engine's step in per-row int8 over the model's weights,
    the model's encoder quantized the same way."""
    model = copy.deepcopy(fp32)
    engine = Engine(model, "int8")
    quantize_int8(model)
    return engine


def variants(fp32: nn.Module, threads: int, shortlist: Shortlist | None) -> dict[str, tuple[nn.Module, Callable]]:
    def sorted_batches(model, ids, cfg):
        return search_ids(model, ids, cfg, shortlist)

    def input_order(model, ids, cfg):
        return [h for i in range(0, len(ids), BATCH) for h in search_batch(model, ids[i : i + BATCH], cfg, shortlist)]

    def one_thread(model, ids, cfg):
        torch.set_num_threads(1)
        try:
            return search_ids(model, ids, cfg, shortlist)
        finally:
            torch.set_num_threads(threads)

    def bf16_autocast(model, ids, cfg):
        with autocast(True, torch.device("cpu")):
            return search_ids(model, ids, cfg, shortlist)

    engine = Engine(fp32)
    return {
        "fp32, the model's own decode (mt's default for fp32)": (fp32, sorted_batches),
        "fp32, the engine's step (decode.engine step)": (engine, sorted_batches),
        "fp32, engine, batches in input order": (engine, input_order),
        "fp32, engine, 1 thread": (engine, one_thread),
        "bf16 autocast, the model's own decode": (fp32, bf16_autocast),
        "bf16 weights cast once, engine (--precision bf16)": (Engine(fp32, "bf16"), sorted_batches),
        "int8 dynamic (one scale per batch), model's decode": (dynamic_int8(fp32), sorted_batches),
        "int8 per row, model's decode (--precision int8)": (quantize_int8(copy.deepcopy(fp32)), sorted_batches),
        "int8 per row, engine (decode.engine step)": (int8_engine(fp32), sorted_batches),
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
    table = variants(fp32, args.threads, loaded.shortlist)
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


if __name__ == "__main__":
    main()
