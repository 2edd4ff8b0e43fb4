"""Limits per client and per request, as LibreTranslate has them: requests per minute per client
(its API key, else its address: serve.req_limit, or the key's own limit in serve.api_keys),
characters per request (serve.char_limit) and characters x beam per request
(serve.max_request_cost). Each refusal is one line naming the limit and its option, 429 with
Retry-After or 413, and is counted in mt_limited_total by limit, never by client: a label per
address would grow without bound.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from pathlib import Path

from prometheus_client import Counter

from mt_cli.config import ServeConfig
from mt_cli.errors import MtError
from mt_cli.serve.guard import ApiError

WINDOW_S = 60.0  # req_limit counts requests in the last minute
MAX_CLIENTS = 10_000  # clients remembered at once; the least recently seen is forgotten first


def read_keys(path: str) -> dict[str, int] | None:
    """serve.api_keys: one key per line, optionally followed by its own requests-per-minute limit
    (`KEY 120`); blank lines and # comments skipped. None without the option; 0: the server's."""
    if not path:
        return None
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise MtError(f"serve.api_keys {path}: cannot be read ({e})") from None
    keys: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) > 2 or (len(fields) == 2 and not fields[1].isdigit()):
            raise MtError(f"serve.api_keys {path}: line {n}: write a key, or a key and its requests per minute")
        keys[fields[0]] = int(fields[1]) if len(fields) == 2 else 0
    if not keys:
        raise MtError(f"serve.api_keys {path}: holds no key; give one key per line")
    return keys


class Limits:
    def __init__(self, cfg: ServeConfig, keys: dict[str, int] | None, counter: Counter | None = None) -> None:
        self.cfg, self.keys, self.counter = cfg, keys or {}, counter
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, address: str, key: str | None) -> None:
        """Count one request of this client; 429 with Retry-After past its limit per minute."""
        limit = self.keys.get(key, 0) if key else 0
        limit = limit or self.cfg.req_limit
        if not limit:
            return
        client = f"key:{key}" if key in self.keys else f"address:{address}"
        now = time.monotonic()
        with self._lock:
            times = self._seen.pop(client, deque())
            while times and times[0] <= now - WINDOW_S:
                times.popleft()
            self._seen[client] = times  # the most recently seen last
            while len(self._seen) > MAX_CLIENTS:
                self._seen.popitem(last=False)
            if len(times) >= limit:
                wait = math.ceil(times[0] + WINDOW_S - now)
                self._refuse("requests")
                raise ApiError(
                    429,
                    f"too many requests: {limit} per minute from one client (serve.req_limit); retry in {wait} s",
                    {"Retry-After": str(max(wait, 1))},
                    kind="limited",
                )
            times.append(now)

    def check_size(self, chars: int, beam: int) -> None:
        """413 for a request over serve.char_limit characters, or over serve.max_request_cost characters x beam."""
        if self.cfg.char_limit and chars > self.cfg.char_limit:
            self._refuse("characters")
            raise ApiError(
                413,
                f"{chars} characters, more than the server's limit of {self.cfg.char_limit} per "
                "request (serve.char_limit); send them in several requests",
                kind="too_large",
            )
        if chars * beam > self.cfg.max_request_cost:
            self._refuse("cost")
            raise ApiError(
                413,
                f"{chars} characters x beam {beam} = {chars * beam}, more than the server's limit of "
                f"{self.cfg.max_request_cost} per request (serve.max_request_cost); send fewer texts or "
                "ask a smaller beam",
                kind="too_large",
            )

    def _refuse(self, limit: str) -> None:
        if self.counter is not None:
            self.counter.labels(limit=limit).inc()
