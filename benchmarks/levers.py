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
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from mt_cli.decode.precision import quantize_int8
from mt_cli.decode.search import search_batch, search_ids
from mt_cli.decode.translator import Translator
from mt_cli.device import autocast
from mt_cli.model import checkpoint

BATCH = 64


def plain_int8(model: nn.Module) -> nn.Module:
    """int8 everywhere, the output layer included (what quantize_int8 did before the bf16 output layer)."""
    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8)


def variants(fp32: nn.Module, threads: int) -> dict[str, tuple[nn.Module, Callable]]:
    def sorted_batches(model, ids, cfg):
        return search_ids(model, ids, cfg)

    def input_order(model, ids, cfg):
        return [h for i in range(0, len(ids), BATCH) for h in search_batch(model, ids[i : i + BATCH], cfg)]

    def one_thread(model, ids, cfg):
        torch.set_num_threads(1)
        try:
            return search_ids(model, ids, cfg)
        finally:
            torch.set_num_threads(threads)

    def bf16_autocast(model, ids, cfg):
        with autocast(True, torch.device("cpu")):
            return search_ids(model, ids, cfg)

    return {
        "fp32, length-sorted batches (mt's default)": (fp32, sorted_batches),
        "fp32, batches in input order": (fp32, input_order),
        "fp32, 1 thread": (fp32, one_thread),
        "bf16 autocast (--precision bf16)": (fp32, bf16_autocast),
        "bf16 weights": (copy.deepcopy(fp32).to(torch.bfloat16), sorted_batches),
        "int8, output layer int8 too": (plain_int8(fp32), sorted_batches),
        "int8, output layer bf16 (--precision int8)": (quantize_int8(copy.deepcopy(fp32)), sorted_batches),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ckpt = checkpoint.load(args.checkpoint)
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    ids = ckpt.tokenizer.encode_src(lines)
    loaded = Translator.load(args.checkpoint, "cpu", batch_size=BATCH, length_penalty=1.0)
    fp32, base_cfg = loaded.model, loaded.cfg
    table = variants(fp32, args.threads)
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
    print("| variant | beam 5 sent/s | greedy sent/s |\n|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r[5]:.1f} | {r[1]:.1f} |")


if __name__ == "__main__":
    main()
