"""Helpers for the server tests: a real uvicorn server on a free loopback port, in a thread, and
a small HTTP client on the standard library."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import uvicorn

from mt_cli.serve.server import bind


class Running:
    """uvicorn serving `app` on 127.0.0.1 and a port the OS picks, until stop()."""

    def __init__(self, app: Any, wait_ready: bool = True) -> None:
        sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.app = app
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:  # listening
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        while wait_ready and call(self.url, "GET", "/health")[0] != 200:
            assert time.monotonic() < deadline, "the model did not load"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


def call(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    raw: bytes | None = None,
    timeout: float = 60,
) -> tuple[int, dict[str, str], Any]:
    """(status, lower-cased headers, JSON body or text) of one request; a JSON body from `body`, or
    `raw` bytes."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(
        url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, headers, payload = (
                r.status,
                {k.lower(): v for k, v in r.headers.items()},
                r.read(),
            )
    except urllib.error.HTTPError as e:
        status, headers, payload = e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
    text = payload.decode("utf-8")
    try:
        return status, headers, json.loads(text)
    except json.JSONDecodeError:
        return status, headers, text


def assert_close(got: Any, want: Any, tol: float = 1e-5) -> None:
    """`got` equals `want` (nested lists and dicts), its floats within `tol`: a line decoded in a
    running batch beside others gets the translation it gets alone, and scores equal up to the
    rounding of products over another number of rows."""
    if isinstance(want, float) and isinstance(got, float):
        assert abs(got - want) <= tol, (got, want)
    elif isinstance(want, dict) and isinstance(got, dict):
        assert got.keys() == want.keys(), (got, want)
        for k in want:
            assert_close(got[k], want[k], tol)
    elif isinstance(want, list) and isinstance(got, list):
        assert len(got) == len(want), (got, want)
        for a, b in zip(got, want):
            assert_close(a, b, tol)
    else:
        assert got == want
