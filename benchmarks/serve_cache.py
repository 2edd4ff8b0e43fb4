"""The translation cache of `mt serve` (--cache-size): what a workload of repeats gains, what one
without repeats pays, and the memory it holds.

    python benchmarks/serve_cache.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

Two servers, each in its own process: without a cache and with --cache-size N. --clients clients
send the first --lines lines as single-line requests (every line new), then the same lines again
(every line a repeat: what a localisation tool or a web page re-sending its strings does). Lines
per second and p50/p99 of each pass; the server's RSS after both. Servers take turns over --rounds
rounds, each keeping its best. This process imports no torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from results import append_section, commit, newest_run, write_table
from serve_client import Server, load, machine, pct


def passes(server: Server, lines: list[str], clients: int) -> list[dict]:
    found = []
    for _ in range(2):
        r = load(server.port, lines, clients, 600)
        ok = [t for status, t, _ in r["results"] if status == 200]
        found.append(
            {"rate": len(ok) / r["seconds"], "p50": pct(ok, 50), "p99": pct(ok, 99), "n": len(ok)}
        )
    return found


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--lines", type=int, default=500)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--cache-size", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    measured_commit = commit()
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.lines]
    servers = {
        "no cache": ("--cache-size", "0"),
        f"--cache-size {args.cache_size:,}": ("--cache-size", str(args.cache_size)),
    }
    best: dict[str, dict] = {}
    for _ in range(args.rounds):
        for name, options in servers.items():
            server = Server(args.checkpoint.resolve(), *options)
            try:
                first, again = passes(server, lines, args.clients)
                rss = server.rss_mb()
            finally:
                server.stop()
            print(name, first, again, f"{rss:.0f} MB", flush=True)
            if (
                name not in best
                or first["rate"] + again["rate"]
                > best[name]["first"]["rate"] + best[name]["again"]["rate"]
            ):
                best[name] = {"first": first, "again": again, "rss": rss}
    rows = [
        "| server | pass | lines/s | p50 ms | p99 ms | RSS after, MB |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in best.items():
        for label, key in (("every line new", "first"), ("every line a repeat", "again")):
            x = r[key]
            rows.append(
                f"| {name} | {label} | {x['rate']:.1f} | {1000 * x['p50']:.1f} | "
                f"{1000 * x['p99']:.1f} | {r['rss']:.0f} |"
            )
    body = "\n".join(
        [
            "`benchmarks/serve_cache.py`: `mt serve --checkpoint "
            f"{args.checkpoint.parent.name}/{args.checkpoint.name}`, "
            f"{args.clients} clients sending the first {len(lines)} lines of {args.src_file.name} "
            "one per request, then "
            f"the same lines again; each server in its own process, {args.rounds} rounds taking "
            "turns, best kept; "
            f"{machine()}.\n",
            *rows,
        ]
    )
    print(body)
    if not args.no_append:
        when = append_section("The translation cache", body, measured_commit)
        write_table("cache-table", newest_run(when, body))


if __name__ == "__main__":
    main()
