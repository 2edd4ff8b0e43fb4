"""The clients of the serving benchmarks: `mt serve` started as a user starts it (its own process,
127.0.0.1, a free port), keep-alive connections, single-line loads through each API, and the CPU
named. Standard library only: no torch thread pool in the process that sends the requests."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


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

    def steps(self) -> tuple[float, float]:
        """(rows summed over steps, steps) of the server's running batches, from /metrics."""
        text = request(self.port, "GET", "/metrics")[2]
        value = {
            m.group(1): float(m.group(2))
            for m in re.finditer(r"^mt_decoder_(step_rows|steps)_total (\S+)$", text, re.M)
        }
        return value.get("step_rows", 0.0), value.get("steps", 0.0)

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


# Each API's request for one line: its path and body (source and target from --source, --target).
APIS = {
    "native": lambda line, src, tgt: ("/translate", {"text": line}),
    "libretranslate": lambda line, src, tgt: (
        "/translate",
        {"q": line, "source": src, "target": tgt, "format": "text"},
    ),
    "deepl": lambda line, src, tgt: (
        "/v2/translate",
        {"text": [line], "source_lang": src.upper(), "target_lang": tgt.upper()},
    ),
}


def load(
    port: int,
    lines: list[str],
    clients: int,
    max_s: float,
    api: str = "native",
    pair: tuple[str, str] = ("", ""),
) -> dict:
    """`clients` threads on keep-alive connections send single lines through `api` until all are
    sent or max_s passes; each request's status, latency and Retry-After header."""
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
                path, body = APIS[api](line, *pair)
                status, headers, _ = request(port, "POST", path, body, conn)
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
