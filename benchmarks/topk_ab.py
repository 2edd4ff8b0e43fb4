"""Block-wise top k (mt_cli/decode/topk.py) against torch.topk: the operation, and whole searches.

    python benchmarks/topk_ab.py --checkpoint IMPORTED.pt \\
        --src-file ../shared/data/multi30k/test2016.en [--languages eng_Latn deu_Latn] \\
        [--beams 1 4] [--append]

First the operation alone on step-shaped rows (random values; 32/128 rows of 256,206 and 128,112
pieces, 64/320 of OPUS-MT's 58,101, 320 of 8,000): milliseconds of `torch.topk` (and of
`torch.argmax` for k = 1) against the block-wise one, best of 10. Then the checkpoint's search,
int8, eager, batches of 32, a fixed 14 steps (length penalty 0, as benchmarks/m2m_speed.py runs):
search swapped between the two in one process, taking turns for --rounds rounds, fastest kept,
and whether the outputs are the same. A model of NLLB's shape is what benchmarks/m2m_speed.py
builds (its `model_folder`, then `mt import`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch
from results import append_section, commit  # this folder's results helpers
from speed import machine

from mt_cli.decode import constraints, search
from mt_cli.decode.topk import topk
from mt_cli.decode.translator import Translator
from mt_cli.device import keep_freed_memory

SHAPES = [(32, 256_206), (128, 256_206), (128, 128_112), (64, 58_101), (320, 58_101), (320, 8_000)]


def plain(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = x.topk(k, dim=-1)
    return values, indices


def best_ms(f: Callable[..., object], *args: object, reps: int = 10) -> float:
    f(*args)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def operation_rows() -> list[str]:
    rows = [
        "| rows x pieces | k | torch.topk ms | torch.argmax ms | block-wise ms | x torch.topk |",
        "|---|---|---|---|---|---|",
    ]
    for n, v in SHAPES:
        x = torch.randn(n, v)
        for k in (1, 8):
            a, b = best_ms(plain, x, k), best_ms(topk, x, k)
            arg = f"{best_ms(torch.argmax, x, -1):.2f}" if k == 1 else "-"
            rows.append(f"| {n} x {v:,} | {k} | {a:.2f} | {arg} | {b:.2f} | {a / b:.2f} |")
    return rows


def search_rows(args: argparse.Namespace) -> list[str]:
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    rows = [
        "| beam | torch.topk sent/s | block-wise sent/s | x | same output |",
        "|---|---|---|---|---|",
    ]
    for beam in args.beams:
        tr = Translator.load(
            args.checkpoint,
            "cpu",
            beam=beam,
            batch_size=32,
            length_penalty=0.0,
            precision="int8",
            engine="eager",
            max_len_ratio=1e-9,
            max_len_offset=14,
        )
        if args.languages:
            tr = tr.for_languages(*args.languages)
        tr.search(lines[:8])
        best, outs = {}, {}
        for _ in range(args.rounds):
            for name, f in (("torch", plain), ("blocks", topk)):
                search.topk = constraints.topk = f  # type: ignore[assignment]
                start = time.perf_counter()
                outs[name] = [h[0].tokens for h in tr.search(lines)]
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
        search.topk = constraints.topk = topk
        a, b = len(lines) / best["torch"], len(lines) / best["blocks"]
        rows.append(
            f"| {beam} | {a:.1f} | {b:.1f} | {b / a:.2f} | {outs['torch'] == outs['blocks']} |"
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--languages", nargs=2, help="source and target codes of a multilingual model")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--append", action="store_true", help="add the tables to benchmarks/RESULTS.md")
    args = p.parse_args()
    # as decoding processes run (Translator.load): large logits reuse their memory
    keep_freed_memory()
    measured = commit()  # before the run: the tree may change while it runs
    body = "\n".join(
        [
            f"`benchmarks/topk_ab.py`, {machine()}, {torch.get_num_threads()} threads, torch "
            f"{torch.__version__}.\n",
            "The operation on random rows, best of 10:\n",
            *operation_rows(),
            f"\nSearch of {args.checkpoint.name} (int8, eager, batches of 32, 14 steps, the first "
            f"{args.n} lines of "
            f"{args.src_file.name}), {args.rounds} rounds taking turns in one process, fastest "
            "kept:\n",
            *search_rows(args),
        ]
    )
    print(body)
    if args.append:
        append_section("Block-wise top k against torch.topk", body, measured)


if __name__ == "__main__":
    main()
