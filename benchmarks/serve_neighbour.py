"""A heavy neighbour on `mt serve`: how long single-line requests wait while another client sends
1,000-line requests at beam 8, with whole requests decoded one after another (`--slice-cost 0`,
as the server did before slicing), with slicing (a large request decoded in slices, in turn with
the others), and with an express lane (requests up to --express-cost decoded between two steps of
the large request's search).

    python benchmarks/serve_neighbour.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

For each server (its own process, 127.0.0.1): --clients clients send single lines for --seconds
alone (unloaded), then again while one more client sends --heavy-lines-line requests at beam
--heavy-beam back to back. p50/p99 latency of the single lines; the target is the loaded p99
within 2x of the unloaded. Servers take turns over --rounds rounds, each keeping its best p99.
Requests only: this process imports no torch. Printed and appended to RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from results import append_section, copy_newest
from serve_client import Server, connect, load, machine, pct, request

TITLE = "Serving beside a heavy neighbour"
DEFAULT = 1024  # serve.slice_cost's default


def _name(cost: int, express: int = 0) -> str:
    if cost == 0:
        return "whole requests (--slice-cost 0)"
    name = f"slices of {cost:,} (--slice-cost {cost})"
    if express:
        return f"{name} and an express lane up to {express:,} (--express-cost {express})"
    return name


def heavy(port: int, lines: list[str], beam: int, stop: threading.Event, done: list[float]) -> None:
    """Send the large request back to back until told to stop; each one's seconds."""
    conn = connect(port, timeout=600)
    while not stop.is_set():
        start = time.monotonic()
        status = request(
            port, "POST", "/translate", {"text": lines, "beam": beam}, conn, timeout=600
        )[0]
        if status == 200:
            done.append(time.monotonic() - start)
    conn.close()


def measure(
    server: Server, light: list[str], clients: int, seconds: float, big: list[str] | None, beam: int
) -> dict:
    stop, done = threading.Event(), []
    neighbour = (
        threading.Thread(target=heavy, args=(server.port, big, beam, stop, done)) if big else None
    )
    if neighbour:
        neighbour.start()
        time.sleep(1.0)  # its first request is being decoded
    found = load(server.port, light * 100, clients, seconds)
    stop.set()
    if neighbour:
        neighbour.join(600)
    ok = [t for status, t, _ in found["results"] if status == 200]
    return {
        "n": len(ok),
        "p50": pct(ok, 50),
        "p99": pct(ok, 99),
        "heavy": min(done) if done else float("nan"),
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--src-file", type=Path)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=float, default=40, help="bound on each measurement")
    p.add_argument("--heavy-lines", type=int, default=1000)
    p.add_argument("--heavy-beam", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--slice-costs", type=int, nargs="+", default=[0, DEFAULT, 4096], help="servers to compare"
    )
    p.add_argument(
        "--express-costs",
        type=int,
        nargs="*",
        default=[],
        help=(
            "more servers: slices of --slice-costs' first and an express lane for requests "
            "up to this cost"
        ),
    )
    p.add_argument("--no-append", action="store_true")
    p.add_argument(
        "--docs", action="store_true", help="only put the newest recorded run into docs/serving.md"
    )
    args = p.parse_args()
    if args.docs:
        return copy_newest(TITLE, "neighbour-table")
    if args.checkpoint is None or args.src_file is None:
        p.error("--checkpoint and --src-file are required unless --docs is given")
    servers = {_name(c): ("--slice-cost", str(c), "--express-cost", "0") for c in args.slice_costs}
    first = args.slice_costs[0]
    servers |= {
        _name(first, e): ("--slice-cost", str(first), "--express-cost", str(e))
        for e in args.express_costs
    }
    lines = args.src_file.read_text(encoding="utf-8").splitlines()
    big, light = (
        lines[: args.heavy_lines],
        lines[args.heavy_lines : args.heavy_lines + 50] or lines[:50],
    )
    best: dict[tuple[str, bool], dict] = {}
    for _ in range(args.rounds):
        for name, options in servers.items():
            server = Server(args.checkpoint.resolve(), *options)
            try:
                for loaded in (False, True):
                    r = measure(
                        server,
                        light,
                        args.clients,
                        args.seconds,
                        big if loaded else None,
                        args.heavy_beam,
                    )
                    if (name, loaded) not in best or r["p99"] < best[name, loaded]["p99"]:
                        best[name, loaded] = r
                    print(name, "loaded" if loaded else "alone", r, flush=True)
            finally:
                server.stop()
    rows = [
        "| server | neighbour | single lines answered | p50 ms | p99 ms | loaded p99 / alone p99 | "
        "the large request, s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in servers:
        alone, loaded = best[name, False], best[name, True]
        for r, label in (
            (alone, "none"),
            (loaded, f"{args.heavy_lines} lines at beam {args.heavy_beam}"),
        ):
            ratio = f"{r['p99'] / alone['p99']:.1f}" if r is loaded else ""
            heavy_s = f"{r['heavy']:.1f}" if r is loaded else ""
            rows.append(
                f"| {name} | {label} | {r['n']} | {1000 * r['p50']:.0f} | {1000 * r['p99']:.0f} "
                f"| {ratio} | {heavy_s} |"
            )
    body = "\n".join(rows) + (
        f"\n\n{args.clients} clients sending single lines of {args.src_file.name} for "
        f"{args.seconds:g} s per "
        f"measurement; best p99 of {args.rounds} rounds; `mt serve --checkpoint "
        f"{args.checkpoint.name}` (its own "
        "decoding settings), each server in its own process; the large request's time is the "
        "fastest of those "
        f"sent; {machine()}. `python benchmarks/serve_neighbour.py {' '.join(sys.argv[1:])}`\n"
    )
    print(body)
    if not args.no_append:
        append_section(TITLE, body)
        copy_newest(TITLE, "neighbour-table")


if __name__ == "__main__":
    main()
