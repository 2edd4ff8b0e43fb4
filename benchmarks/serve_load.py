"""Load on `mt serve`: throughput and latency against offline decoding, overload, and a soak.

    python benchmarks/serve_load.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

The server is `mt serve` as a user starts it (its own process, 127.0.0.1, a free port). This
process only sends requests: it imports the standard library alone, so that no torch thread pool
here competes with the server's. Every load loop is bounded in requests and in time.

- Offline: `Translator.translate` on the same lines, in a process of its own, timed after loading.
- Throughput: 1, 4, 16 and 64 clients, each on its own keep-alive connection, send single lines
  (the first --n lines of --src-file, each once) until all are translated; lines/s, p50/p99 latency,
  and the mean lines per decoding batch, read from the server's /metrics.
- Overload: a server whose queue holds --overload-queue lines, and --overload-clients clients:
  how many requests are refused with 503 and Retry-After, how fast, and that none times out.
- Soak: --soak-clients clients for --soak-minutes against one server; its resident memory every
  --soak-every seconds.

Figures are printed and appended to benchmarks/RESULTS.md, and copied into docs/serving.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results import append_section, commit, newest_run, write_table  # noqa: E402 (stdlib only: no torch here)

# Offline decoding in a process of its own: all lines in one call (length-sorted batches of the
# checkpoint's batch size), or in arrival-order chunks of argv[3] lines, one call each, as a server
# whose batches hold that many lines would decode them.
OFFLINE = """
import json, sys, time
from mt_cli import Translator
lines = json.load(open(sys.argv[2]))
chunk = int(sys.argv[3]) or len(lines)
tr = Translator.load(sys.argv[1], device="cpu")
tr.translate(lines[:8])
start = time.perf_counter()
for i in range(0, len(lines), chunk):
    tr.translate(lines[i : i + chunk])
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


class Server:
    """`mt serve` in a process of its own, stopped with SIGTERM."""

    options: tuple[str, ...] = ()  # --serve-option: given to every server this run starts
    env: dict[str, str] = {}  # --serve-env: set in every server's environment

    def __init__(self, checkpoint: Path, *options: str) -> None:
        mt = str(Path(sys.executable).parent / "mt")
        # a folder: many models
        given = [
            "--models" if checkpoint.is_dir() else "--checkpoint",
            str(checkpoint),
        ]
        cmd = [mt, "serve", *given, "--port", "0", "--device", "cpu", *self.options, *options]
        env = {**os.environ, **self.env}
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        first = self.proc.stdout.readline()  # type: ignore[union-attr]
        found = re.search(r"http://127\.0\.0\.1:(\d+)", first)
        if not found:
            sys.exit(f"mt serve did not start: {first}")
        self.port = int(found.group(1))
        deadline = time.monotonic() + 120
        while request(self.port, "GET", "/health")[0] != 200:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                sys.exit("mt serve did not load its model")
            time.sleep(0.2)

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return (
            next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            / 1024
        )

    def batch_lines(self) -> tuple[float, float]:
        """(sum, count) of the server's lines-per-batch histogram."""
        text = request(self.port, "GET", "/metrics")[2]
        value = {
            m.group(1): float(m.group(2))
            for m in re.finditer(r"^mt_batch_lines_(sum|count) (\S+)$", text, re.M)
        }
        return value.get("sum", 0.0), value.get("count", 0.0)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def connect(port: int, timeout: float = 60) -> http.client.HTTPConnection:
    """A keep-alive connection with Nagle's algorithm off, as HTTP clients set it (urllib3 does):
    http.client sends a request's headers and body in two writes, and with Nagle on the body
    waits for the server's delayed ACK of the headers, 40 ms a request here."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def request(
    port: int,
    method: str,
    path: str,
    body: object = None,
    conn: http.client.HTTPConnection | None = None,
    timeout: float = 60,
) -> tuple[int, dict[str, str], str]:
    own = conn is None
    conn = conn or connect(port, timeout)
    try:
        data = json.dumps(body) if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        if own:
            conn.close()


def load(port: int, lines: list[str], clients: int, max_s: float) -> dict:
    """`clients` threads on keep-alive connections send single lines until all are sent or max_s
    passes; each request's status, latency and Retry-After header."""
    todo, lock, results = iter(lines), threading.Lock(), []
    stop_at = time.monotonic() + max_s

    def client() -> None:
        conn = connect(port)
        while time.monotonic() < stop_at:
            with lock:
                line = next(todo, None)
            if line is None:
                break
            start = time.monotonic()
            try:
                status, headers, _ = request(port, "POST", "/translate", {"text": line}, conn)
            except (OSError, http.client.HTTPException):
                status, headers = -1, {}
                conn.close()
                conn = connect(port)
            with lock:
                results.append((status, time.monotonic() - start, headers.get("retry-after")))
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"seconds": time.monotonic() - start, "results": results}


def pct(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100)[q - 1]
        if len(values) > 1
        else (values[0] if values else 0.0)
    )


def offline_rate(args, lines: list[str], chunk: int = 0) -> float:
    path = args.work / "lines.json"
    path.write_text(json.dumps(lines), encoding="utf-8")
    best = 0.0
    for _ in range(args.rounds):
        cmd = [sys.executable, "-c", OFFLINE, str(args.checkpoint), str(path), str(chunk)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        best = max(best, len(lines) / json.loads(out.stdout.splitlines()[-1])["seconds"])
    return best


def throughput_rows(args, lines: list[str], offline: float) -> list[dict]:
    server = Server(args.checkpoint)
    rows = []
    try:
        load(server.port, lines[:20], 4, 60)  # warm-up
        for clients in args.clients:
            best = None
            for _ in range(args.rounds):
                before = server.batch_lines()
                got = load(server.port, lines, clients, args.max_seconds)
                after = server.batch_lines()
                ok = [lat for status, lat, _ in got["results"] if status == 200]
                rate = len(ok) / got["seconds"]
                if best is None or rate > best["lines/s"]:
                    batches = (after[0] - before[0]) / max(after[1] - before[1], 1)
                    best = {
                        "clients": clients,
                        "lines": len(ok),
                        "lines/s": rate,
                        "p50": pct(ok, 50),
                        "p99": pct(ok, 99),
                        "batch": batches,
                        "errors": len(got["results"]) - len(ok),
                    }
            rows.append(best)
            print(
                f"  {clients} clients: {best['lines/s']:.1f} lines/s "
                f"({best['lines/s'] / offline:.2f}x offline)"
            )
    finally:
        server.stop()
    for (
        row
    ) in rows:  # offline decoding with the batches this server formed: what batching itself costs
        row["same batches"] = offline_rate(args, lines, max(1, round(row["batch"])))
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


def machine() -> str:
    """The CPU and its flags as speed.py names them, asked of a child process: this one imports no
    torch."""
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); from speed import machine; "
        "print(machine())"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def report(args, offline: float, rows: list[dict], over: dict | None, soak: dict | None) -> str:
    served = f"{args.checkpoint.parent.name}/{args.checkpoint.name}" + "".join(
        f" {o}" for o in args.serve_option
    )
    env = "".join(f"{kv} " for kv in args.serve_env)
    out = [
        f"`benchmarks/serve_load.py`: `{env}mt serve --checkpoint {served}` "
        f"(its stored decoding settings), single lines of the first {len(args.lines)} of "
        f"{args.src_file.name}, "
        f"clients on keep-alive connections in another process, {args.rounds} rounds per level, "
        "best kept; "
        f"offline `Translator.translate` on the same lines in a process of its own: {offline:.1f} "
        "lines/s; "
        f"{machine()}.\n",
        "| clients | lines | lines/s | x offline | p50 ms | p99 ms | mean lines per batch "
        "| offline in such batches, lines/s | x that | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['clients']} | {r['lines']} | {r['lines/s']:.1f} | {r['lines/s'] / offline:.2f} "
            f"| {1000 * r['p50']:.0f} | {1000 * r['p99']:.0f} | {r['batch']:.1f} | "
            f"{r['same batches']:.1f} "
            f"| {r['lines/s'] / r['same batches']:.2f} | {r['errors']} |"
        )
    out.append(
        '\n"Offline in such batches": `Translator.translate` on the same lines in arrival-order '
        "chunks of the "
        "server's mean batch size, one call each: the most a server could reach with batches that "
        "size."
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
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    args.checkpoint = args.checkpoint.resolve()
    Server.options = tuple(args.serve_option)
    Server.env = dict(kv.split("=", 1) for kv in args.serve_env)
    measured = commit()
    args.lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    with tempfile.TemporaryDirectory() as tmp:
        args.work = Path(tmp)
        offline = offline_rate(args, args.lines)
        print(f"  offline: {offline:.1f} lines/s")
        rows = throughput_rows(args, args.lines, offline)
        over = overload_row(args, args.lines) if args.overload_clients else None
        soak = soak_row(args, args.lines * 1000) if args.soak_minutes > 0 else None
    body = report(args, offline, rows, over, soak)
    print(body)
    if not args.no_append:
        when = append_section("Serving", body, measured)
        write_table("serve-table", newest_run(when, body))


if __name__ == "__main__":
    main()
