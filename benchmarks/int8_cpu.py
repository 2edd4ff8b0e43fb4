"""Whether int8 pays on this CPU: PyTorch's int8 product against fp32's at decoding shapes, and
`mt translate` as a user runs it in fp32 and in int8 (whole processes), side by side.

    python benchmarks/int8_cpu.py --checkpoint RUN/best.pt \\
        --src ../shared/data/multi30k/val.de --lines 200 --append

`decode.precision auto` picks int8 only on a CPU with VNNI or AMX (mt_cli/device.py:
cpu_has_int8); this is the measurement behind that rule. The products take turns over --rounds
and keep their fastest; so do the two `mt translate` commands (each a fresh process, as a newcomer
types it, beam and everything else the checkpoint's own).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from results import append_section
from speed import machine

# (rows, in, out): a beam-5 batch of 64 sentences through a small model's layers and its output
# layer (8,000 pieces), and one sentence's beam through a base model's feed-forward layer
SHAPES = [(320, 256, 256), (320, 256, 1024), (320, 256, 8000), (5, 512, 2048)]


def best_ms(fn, x: torch.Tensor, y: torch.Tensor, rounds: int, calls: int = 10) -> float:
    fn(x, y)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x, y)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e3


def products(rounds: int) -> list[str]:
    rows = ["| rows x in x out | fp32 ms | int8 ms | int8 / fp32 |", "|---|---|---|---|"]
    for m, k, n in SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        qa = torch.randint(-127, 128, (m, k), dtype=torch.int8)
        qb = torch.randint(-127, 128, (k, n), dtype=torch.int8)
        fp32 = best_ms(torch.matmul, a, b, rounds)
        int8 = best_ms(torch._int_mm, qa, qb, rounds)
        rows.append(f"| {m} x {k} x {n} | {fp32:.3f} | {int8:.3f} | {int8 / fp32:.1f}x |")
    return rows


def translations(args: argparse.Namespace) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src.txt"
        lines = args.src.read_text(encoding="utf-8").splitlines()[: args.lines]
        src.write_text("\n".join(lines) + "\n", encoding="utf-8")
        best = {"fp32": float("inf"), "int8": float("inf")}
        for _ in range(args.rounds):
            for precision in best:
                cmd = [sys.executable, "-m", "mt_cli", "translate", "--checkpoint"]
                cmd += [str(args.checkpoint), str(src), "--precision", precision]
                start = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True)
                best[precision] = min(best[precision], time.perf_counter() - start)
    rows = ["| mt translate | seconds, whole process | lines/s |", "|---|---|---|"]
    rows += [f"| --precision {p} | {s:.1f} | {len(lines) / s:.1f} |" for p, s in best.items()]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--append", action="store_true", help="add the tables to RESULTS.md")
    args = ap.parse_args()
    head = (
        f"{machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}. Products: "
        f"torch.matmul (fp32) and torch._int_mm (int8), best of {args.rounds} rounds. "
        f"`mt translate --checkpoint {args.checkpoint.name}` on the first {args.lines} lines of "
        f"{args.src}, its own beam, a fresh process each, best of {args.rounds}."
    )
    body = "\n".join([head, "", *products(args.rounds), "", *translations(args)])
    print(body)
    if args.append:
        append_section("int8 against fp32 on this CPU", body)


if __name__ == "__main__":
    main()
