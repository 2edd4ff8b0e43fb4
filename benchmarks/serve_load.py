"""Load on `mt serve`: throughput and latency against offline decoding, overload, and a soak.

    python benchmarks/serve_load.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

The server is `mt serve` as a user starts it (its own process, 127.0.0.1, a free port). This
process only sends requests: it imports the standard library alone, so that no torch thread pool
here competes with the server's. Every load loop is bounded in requests and in time.

- Offline: `Translator.translate` on the same lines, in a process of its own, timed after loading:
  all at once (length-sorted batches of the checkpoint's batch size), and in arrival-order chunks
  of 64 lines and of as many lines as there are clients, one call each (what a server whose
  batches hold that many lines could reach).
- Throughput: for each API (--api: LibreTranslate's `/translate` with q, source and target, the
  JSON API's `/translate`, DeepL's `/v2/translate`) and each beam (--beam; 1 is greedy), 1, 4, 16
  and 64 clients, each on its own keep-alive connection, send single lines (the first --n lines of
  --src-file, each once) until all are translated; lines/s, p50/p99 latency, and the mean decoder
  rows per step of the server's running batches, read from its /metrics.
- Overload: a server whose queue holds --overload-queue lines, and --overload-clients clients:
  how many requests are refused with 503 and Retry-After, how fast, and that none times out.
- Soak: --soak-clients clients for --soak-minutes against one server; its resident memory every
  --soak-every seconds.

Figures are printed and appended to benchmarks/RESULTS.md, and copied into docs/serving.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results import append_section, commit, newest_run, write_table  # noqa: E402 (stdlib only: no torch here)
from serve_client import APIS, Server, load, machine, pct  # noqa: E402

# Offline decoding in a process of its own: all lines in one call (length-sorted batches of the
# checkpoint's batch size), or in arrival-order chunks of argv[3] lines, one call each, as a server
# whose batches hold that many lines would decode them.
OFFLINE = """
import json, sys, time
from mt_cli import Translator
lines = json.load(open(sys.argv[2]))
chunk = int(sys.argv[3]) or len(lines)
beam = {"beam": int(sys.argv[4])} if int(sys.argv[4]) else {}
tr = Translator.load(sys.argv[1], device="cpu", **beam)
tr.translate(lines[:8])
start = time.perf_counter()
for i in range(0, len(lines), chunk):
    tr.translate(lines[i : i + chunk])
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def offline_rate(args, lines: list[str], chunk: int = 0, beam: int = 0) -> float:
    """Lines/s of offline decoding in arrival-order chunks of `chunk` lines (0: all at once) with
    `beam` (0: the checkpoint's), the best of --rounds processes."""
    path = args.work / "lines.json"
    path.write_text(json.dumps(lines), encoding="utf-8")
    best = 0.0
    for _ in range(args.rounds):
        cmd = [
            sys.executable,
            "-c",
            OFFLINE,
            str(args.checkpoint),
            str(path),
            str(chunk),
            str(beam),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        best = max(best, len(lines) / json.loads(out.stdout.splitlines()[-1])["seconds"])
    return best


def throughput_rows(args, lines: list[str], api: str, beam: int) -> list[dict]:
    """One row per client count: the best of --rounds loads through `api` on one server started
    with `beam` (0: the checkpoint's)."""
    server = Server(args.checkpoint, *(["--beam", str(beam)] if beam else []))
    pair, rows = (args.source, args.target), []
    try:
        load(server.port, lines[:20], 4, 60, api, pair)  # warm-up
        for clients in args.clients:
            best = None
            for _ in range(args.rounds):
                before = server.steps()
                got = load(server.port, lines, clients, args.max_seconds, api, pair)
                after = server.steps()
                ok = [lat for status, lat, _ in got["results"] if status == 200]
                rate = len(ok) / got["seconds"]
                if best is None or rate > best["lines/s"]:
                    steps = after[1] - before[1]
                    best = {
                        "api": api,
                        "beam": beam or "stored",
                        "clients": clients,
                        "lines": len(ok),
                        "lines/s": rate,
                        "p50": pct(ok, 50),
                        "p99": pct(ok, 99),
                        "rows": (after[0] - before[0]) / steps if steps else 0.0,
                        "errors": len(got["results"]) - len(ok),
                    }
            rows.append(best)
            print(
                f"  {api}, beam {beam or 'stored'}, {clients} clients: "
                f"{best['lines/s']:.1f} lines/s"
            )
    finally:
        server.stop()
    return rows


def overload_row(args, lines: list[str]) -> dict:
    n = str(args.overload_queue)
    server = Server(args.checkpoint, "--max-request-lines", n, "--max-queue-lines", n)
    try:
        got = load(server.port, lines, args.overload_clients, args.max_seconds)
    finally:
        server.stop()
    refused = [(lat, ra) for status, lat, ra in got["results"] if status == 503]
    return {
        "clients": args.overload_clients,
        "queue": args.overload_queue,
        "requests": len(got["results"]),
        "ok": sum(r[0] == 200 for r in got["results"]),
        "refused": len(refused),
        "with Retry-After": sum(ra is not None for _, ra in refused),
        "refusal p99": pct([lat for lat, _ in refused], 99),
        "failed": sum(r[0] == -1 for r in got["results"]),
    }


def soak_row(args, lines: list[str]) -> dict:
    server = Server(args.checkpoint)
    samples: list[tuple[float, float]] = []
    start, requests = time.monotonic(), 0
    try:
        while time.monotonic() - start < args.soak_minutes * 60:
            got = load(server.port, lines, args.soak_clients, args.soak_every)
            requests += len(got["results"])
            samples.append((time.monotonic() - start, server.rss_mb()))
    finally:
        server.stop()
    # after the first minute's warm-up
    settled = [mb for t, mb in samples if t >= 60] or [mb for _, mb in samples]
    return {
        "minutes": args.soak_minutes,
        "clients": args.soak_clients,
        "requests": requests,
        "first": settled[0],
        "last": settled[-1],
        "max": max(settled),
    }


def report(args, offline: dict, rows: list[dict], over: dict | None, soak: dict | None) -> str:
    """`offline`: lines/s by (beam, chunk), chunk 0 all at once."""
    served = f"{args.checkpoint.parent.name}/{args.checkpoint.name}" + "".join(
        f" {o}" for o in args.serve_option
    )
    env = "".join(f"{kv} " for kv in args.serve_env)
    alone = ", ".join(
        f"beam {b or 'stored'} {offline[b, 0]:.1f} lines/s" for b in sorted({b for b, _ in offline})
    )
    out = [
        f"`benchmarks/serve_load.py`: `{env}mt serve --checkpoint {served}` "
        f"(its stored decoding settings, or the beam given), single lines of the first "
        f"{len(args.lines)} of {args.src_file.name} ({args.source}->{args.target}), "
        f"clients on keep-alive connections in another process, {args.rounds} rounds per level, "
        "best kept; "
        f"offline `Translator.translate` on the same lines in a process of its own: {alone}; "
        f"{machine()}.\n",
        "| API | beam | clients | lines | lines/s | x offline | x offline in 64-line batches "
        "| x offline in batches of as many lines as clients | p50 ms | p99 ms "
        "| decoder rows per step | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b = 0 if r["beam"] == "stored" else r["beam"]
        x = [r["lines/s"] / offline[b, c] for c in (0, 64, r["clients"])]
        out.append(
            f"| {r['api']} | {r['beam']} | {r['clients']} | {r['lines']} | {r['lines/s']:.1f} "
            f"| {x[0]:.2f} | {x[1]:.2f} | {x[2]:.2f} "
            f"| {1000 * r['p50']:.0f} | {1000 * r['p99']:.0f} | {r['rows']:.1f} | {r['errors']} |"
        )
    out.append(
        '\n"Offline in N-line batches": `Translator.translate` on the same lines in arrival-order '
        "chunks of N lines, one call each: what a server whose batches hold N lines could reach. "
        "Decoder rows per step: sentences x beam in the server's running batches, on average."
    )
    if over:
        out += [
            f"\nOverload: {over['clients']} clients against a queue of {over['queue']} lines: "
            f"{over['requests']} "
            f"requests, {over['ok']} answered, {over['refused']} refused with 503 "
            f"({over['with Retry-After']} "
            f"with Retry-After; p99 of a refusal {1000 * over['refusal p99']:.0f} ms), "
            f"{over['failed']} "
            "timed out or failed."
        ]
    if soak:
        out += [
            f"\nSoak: {soak['clients']} clients for {soak['minutes']:g} minutes, "
            f"{soak['requests']} requests; "
            f"server RSS after the first minute {soak['first']:.0f} MB, at the end "
            f"{soak['last']:.0f} MB, "
            f"highest {soak['max']:.0f} MB."
        ]
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--n", type=int, default=500, help="lines sent at each level")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-seconds", type=float, default=180, help="bound on each load level")
    p.add_argument("--overload-clients", type=int, default=64)
    p.add_argument("--overload-queue", type=int, default=16)
    p.add_argument("--soak-minutes", type=float, default=10)
    p.add_argument("--soak-clients", type=int, default=16)
    p.add_argument("--soak-every", type=float, default=30, help="seconds between memory samples")
    p.add_argument(
        "--serve-option",
        action="append",
        default=[],
        help="an option for mt serve, e.g. --serve-option=--threads=1",
    )
    p.add_argument(
        "--serve-env",
        action="append",
        default=[],
        help="NAME=VALUE in mt serve's environment (repeat)",
    )
    p.add_argument(
        "--api", nargs="+", choices=sorted(APIS), default=["libretranslate", "native", "deepl"]
    )
    p.add_argument(
        "--beam", type=int, nargs="+", default=[0], help="beams to serve with (0: the stored one)"
    )
    p.add_argument("--source", help="source language code (default: --src-file's suffix)")
    p.add_argument("--target", default="en", help="target language code")
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    args.checkpoint = args.checkpoint.resolve()
    args.source = args.source or args.src_file.suffix.lstrip(".")
    Server.options = tuple(args.serve_option)
    Server.env = dict(kv.split("=", 1) for kv in args.serve_env)
    measured = commit()
    args.lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    with tempfile.TemporaryDirectory() as tmp:
        args.work = Path(tmp)
        offline: dict[tuple[int, int], float] = {}
        rows: list[dict] = []
        for beam in args.beam:
            for chunk in sorted({0, 64, *args.clients}):
                offline[beam, chunk] = offline_rate(args, args.lines, chunk, beam)
                print(
                    f"  offline, beam {beam or 'stored'}, chunks of {chunk or 'all'}: "
                    f"{offline[beam, chunk]:.1f} lines/s"
                )
            for api in args.api:
                rows += throughput_rows(args, args.lines, api, beam)
        over = overload_row(args, args.lines) if args.overload_clients else None
        soak = soak_row(args, args.lines * 1000) if args.soak_minutes > 0 else None
    body = report(args, offline, rows, over, soak)
    print(body)
    if not args.no_append:
        when = append_section("Serving", body, measured)
        write_table("serve-table", newest_run(when, body))


if __name__ == "__main__":
    main()
