"""Why `mt serve` decodes on one thread: one-line searches in a process that also holds an idle
thread which once ran a parallel PyTorch operator.

    python benchmarks/openmp_teams.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

Each thread that runs a parallel operator keeps a team of OpenMP threads for its life. The script
loads the model in a thread that ends (as the server does), times --lines one-line translations
in a thread of their own, then starts a thread that runs one parallel matrix product and sleeps,
and times them again. Each --rounds round is a fresh process (the team, once made, stays), the
fastest median kept; with --wait-policy ACTIVE the processes run with OMP_WAIT_POLICY=ACTIVE.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from results import append_section
from serve_client import machine  # asked of a child process: this one imports no torch


def child(checkpoint: str, src_file: str, lines: int) -> None:
    """In a fresh process: the medians without and with an idle second team, in ms, on one line."""
    import torch

    from mt_cli import Translator

    box: list[Translator] = []
    loading = threading.Thread(target=lambda: box.append(Translator.load(checkpoint)))
    loading.start()
    loading.join()
    tr, text = box[0], Path(src_file).read_text(encoding="utf-8").splitlines()[:lines]

    def median() -> float:
        times: list[float] = []

        def run() -> None:
            for line in text:
                start = time.perf_counter()
                tr.translate([line])
                times.append(time.perf_counter() - start)

        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        return 1000 * statistics.median(times)

    alone = median()

    def idle() -> None:
        a = torch.randn(512, 512)
        (a @ a).sum()  # large enough to run in parallel: this thread now has its team
        time.sleep(3600)

    threading.Thread(target=idle, daemon=True).start()
    time.sleep(0.5)
    print(f"{alone:.1f} {median():.1f}")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--lines", type=int, default=60)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--wait-policy",
        nargs="*",
        default=["", "ACTIVE"],
        help="OMP_WAIT_POLICY values ('': unset)",
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    if args.child:
        return child(str(args.checkpoint), str(args.src_file), args.lines)
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.rounds):
        for policy in args.wait_policy:
            env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
            if policy:
                env["OMP_WAIT_POLICY"] = policy
            cmd = [
                sys.executable,
                __file__,
                "--child",
                "--checkpoint",
                str(args.checkpoint),
                "--src-file",
                str(args.src_file),
                "--lines",
                str(args.lines),
            ]
            out = subprocess.run(
                cmd, env=env, capture_output=True, text=True, check=True
            ).stdout.split()
            alone, beside = float(out[-2]), float(out[-1])
            print(policy or "unset", alone, beside, flush=True)
            if policy not in best or alone + beside < sum(best[policy]):
                best[policy] = (alone, beside)
    rows = [
        "| OMP_WAIT_POLICY | one line alone: median ms | beside an idle team: median ms | x |",
        "|---|---|---|---|",
    ]
    for policy, (alone, beside) in best.items():
        rows.append(f"| {policy or 'unset'} | {alone:.1f} | {beside:.1f} | {beside / alone:.1f} |")
    body = "\n".join(rows) + (
        "\n\n`benchmarks/openmp_teams.py --checkpoint "
        f"{args.checkpoint.parent.name}/{args.checkpoint.name}`: "
        f"{args.lines} lines of {args.src_file.name} translated one at a time (the checkpoint's "
        "own decoding "
        f"settings), in a fresh process per round, {args.rounds} rounds, fastest kept; "
        f"{machine()}.\n"
    )
    print(body)
    if not args.no_append:
        append_section("One-line searches beside an idle OpenMP team", body)


if __name__ == "__main__":
    main()
