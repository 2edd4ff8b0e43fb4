"""Decoding speed of two source trees of mt, side by side: did a change move decoding throughput?

    git worktree add /tmp/before 96185eb   # e.g. the code before issue 14 moved it
    python benchmarks/decode_ab.py --tree /tmp/before --tree . --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

Each timed run is a fresh process started in one tree (that tree's `mt_cli` is the one imported),
decoding the first --n lines in batches of 64 as `mt translate` does (beam 5, then greedy). The
trees take turns for --rounds rounds and each keeps its fastest run, so the machine's drift over
minutes lands on both. Reported: sentences/s of the decoding loop, the whole process's seconds
(imports, loading, a warm-up batch and the decoding), and whether the outputs are identical.
The table is printed and appended to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from quality import append_section  # this folder's results helpers

# Runs inside the tree under test: the Translator where the tree has one, else the decoding
# functions that came before it (commit 96185eb and earlier).
CHILD = r"""
import json, sys, time
import torch
ckpt, src, result = sys.argv[1], sys.argv[2], sys.argv[6]
n, beam, threads = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
lines = open(src, encoding="utf-8").read().splitlines()[:n]
options = {"beam": beam, "batch_size": 64, "length_penalty": 1.0}
if sys.argv[7] != "fp32":  # trees from before precision existed take no such option
    options["precision"] = sys.argv[7]
try:
    from mt_cli import Translator
    run = Translator.load(ckpt, "cpu", **options).translate
except ImportError:
    from mt_cli.translate import load_for_decoding, translate_lines
    model, tok, cfg = load_for_decoding(ckpt, "cpu", options)
    run = lambda batch: translate_lines(model, tok, batch, cfg)
run(lines[:64])  # warm-up: allocators, kernels, lazy imports
start = time.perf_counter()
out = run(lines)
json.dump({"seconds": time.perf_counter() - start, "out": out}, open(result, "w", encoding="utf-8"))
"""


def timed_run(
    tree: Path, args: argparse.Namespace, beam: int, result: Path
) -> tuple[float, float, list[str]]:
    """(decoding seconds, whole-process seconds, output lines) of one run in its own process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [
        sys.executable,
        "-c",
        CHILD,
        str(args.checkpoint.resolve()),
        str(args.src_file.resolve()),
        str(args.n),
        str(beam),
        str(args.threads),
        str(result),
        args.precision,
    ]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, check=True)  # cwd first on sys.path: this tree's mt_cli
    whole = time.perf_counter() - start
    got = json.loads(result.read_text(encoding="utf-8"))
    return got["seconds"], whole, got["out"]


def label(tree: Path) -> str:
    """The tree and the commit it holds (+ if it has uncommitted changes)."""
    git = ["git", "-C", str(tree)]
    rev = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return f"{tree} ({rev or 'no git'}{'+' if dirty.stdout.strip() else ''})"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--tree", type=Path, action="append", required=True, help="a source tree (give two)"
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--beams", type=int, nargs="+", default=[5, 1])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--precision", default="fp32", help="fp32, int8 or bf16 (trees that have it)")
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    trees = [t.resolve() for t in args.tree]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for beam in args.beams:
            best: dict[Path, tuple[float, float, list[str]]] = {}
            for _ in range(args.rounds):
                for tree in trees:
                    seconds, whole, out = timed_run(tree, args, beam, Path(tmp) / "result.json")
                    old = best.get(tree)
                    best[tree] = (
                        min(seconds, old[0]) if old else seconds,
                        min(whole, old[1]) if old else whole,
                        out,
                    )
            same = len({tuple(out) for _, _, out in best.values()}) == 1
            for tree, (seconds, whole, _) in best.items():
                rows.append((beam, tree, args.n / seconds, whole, same))
                print(
                    f"beam {beam} {tree}: {args.n / seconds:.1f} sent/s, whole process {whole:.1f} "
                    "s",
                    flush=True,
                )
    lines = [
        "| tree | beam | sent/s (decoding) | whole process s | outputs identical |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{label(t)}` | {b} | {s:.1f} | {w:.1f} | {'yes' if same else 'NO'} |"
        for b, t, s, w, same in rows
    ]
    body = "\n".join(lines) + (
        f"\n\n{args.n} lines of `{args.src_file}`, `{args.checkpoint}`, {args.precision}, "
        f"{args.threads} threads, "
        f"best of {args.rounds} alternating rounds. `python benchmarks/decode_ab.py "
        f"{' '.join(sys.argv[1:])}`\n"
    )
    print(body)
    if not args.no_append:
        append_section("Decoding A/B", body)


if __name__ == "__main__":
    main()
