"""Every limit a request is held to, checked here once for all three APIs: the API key (under
serve.api_keys), requests per minute per client (its key, else its address: serve.req_limit, or
the key's own limit), texts per request (serve.max_request_lines), characters per text
(serve.max_chars) and per request (serve.char_limit), characters x beam (serve.max_request_cost),
the beam and n-best (serve.max_beam). LIMITS states them for the OpenAPI document and the docs.

A refusal is an ApiError naming the request's own field and the server's limit (its config
field), with `limit` set: each API answers it with its own status (LIMITS[...].statuses). Each is
counted in mt_limited_total by limit, never by client: a label per address would grow without
bound.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import Counter

from mt_cli.config import ServeConfig
from mt_cli.errors import MtError
from mt_cli.serve.api_request import Caller, Names, TextRequest
from mt_cli.serve.guard import ApiError

WINDOW_S = 60.0  # req_limit counts requests in the last minute
MAX_CLIENTS = 10_000  # clients remembered at once; the least recently seen is forgotten first


@dataclass(frozen=True)
class Limit:
    option: str  # the ServeConfig field that sets it ("" for the keys file's own)
    bounds: str  # what it bounds, for the OpenAPI document and the docs
    statuses: tuple[int, int, int]  # the answer on the JSON API, LibreTranslate's and DeepL's


LIMITS = {
    "key": Limit(
        "api_keys", "an API key is required and must be one of the file's", (403, 403, 403)
    ),
    "requests": Limit("req_limit", "requests per minute from one client", (429, 429, 429)),
    "lines": Limit("max_request_lines", "texts in one request", (413, 400, 413)),
    "chars": Limit("max_chars", "characters in one text", (413, 400, 413)),
    "characters": Limit("char_limit", "characters in one request, all its texts", (413, 413, 413)),
    "cost": Limit("max_request_cost", "characters x beam in one request", (413, 413, 413)),
    "beam": Limit(
        "max_beam", "the beam, n-best or alternatives + 1 a request asks", (422, 400, 400)
    ),
    "body": Limit("max_body_bytes", "bytes in one request body", (413, 413, 413)),
    "quota": Limit(
        "char_quota",
        "characters one API key may have translated since the server started",
        (429, 429, 456),
    ),
}
DIALECTS = ("native", "libretranslate", "deepl")


def status_for(limit: str, dialect: str) -> int:
    return LIMITS[limit].statuses[DIALECTS.index(dialect)]


def described(dialect: str) -> dict[int, str]:
    """Each status this API answers a limit with, and the limits it means (for /openapi.json)."""
    found: dict[int, list[str]] = {}
    for limit in LIMITS.values():
        status = limit.statuses[DIALECTS.index(dialect)]
        found.setdefault(status, []).append(f"{limit.bounds} (serve.{limit.option})")
    return {status: "over a limit: " + "; ".join(texts) for status, texts in found.items()}


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
            raise MtError(
                f"serve.api_keys {path}: line {n}: "
                "write a key, or a key and its requests per minute"
            )
        keys[fields[0]] = int(fields[1]) if len(fields) == 2 else 0
    if not keys:
        raise MtError(f"serve.api_keys {path}: holds no key; give one key per line")
    return keys


def refuse(
    limit: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> ApiError:
    """A refusal by a limit, answered with the JSON API's status (each API maps `limit` to its
    own)."""
    kind = {"key": "forbidden", "requests": "limited", "quota": "limited", "beam": "invalid"}.get(
        limit, "too_large"
    )
    return ApiError(
        LIMITS[limit].statuses[0], message, headers, kind=kind, field=field, limit=limit
    )


class Limits:
    def __init__(
        self, cfg: ServeConfig, keys: dict[str, int] | None, counter: Counter | None = None
    ) -> None:
        self.cfg, self.keys, self.counter = cfg, keys, counter
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()
        self._used: dict[
            str | None, int
        ] = {}  # characters translated per API key (None: without one)
        self._lock = threading.Lock()

    def admit(self, caller: Caller, names: Names = Names()) -> None:
        """Count one request of this client (429 with Retry-After past its limit per minute); then,
        under serve.api_keys, 403 without one of the keys."""
        keys = self.keys or {}
        known = caller.key if caller.key in keys else None
        limit = (keys.get(known, 0) if known else 0) or self.cfg.req_limit
        if limit:
            self._count(f"key:{known}" if known else f"address:{caller.address}", limit)
        if self.keys is None:
            return
        if not caller.key:
            raise refuse(
                "key",
                f"Invalid API key: this server needs one ({names.key}); ask its operator",
                names.key,
            )
        if known is None:
            raise refuse("key", "Invalid API key", names.key)

    def _count(self, client: str, limit: int) -> None:
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
                self._counted("requests")
                raise refuse(
                    "requests",
                    f"too many requests: {limit} per minute from one client (serve.req_limit); "
                    f"retry in {wait} s",
                    headers={"Retry-After": str(max(wait, 1))},
                )
            times.append(now)

    def check(self, req: TextRequest, beam: int) -> None:
        """A translation request against every size limit; `beam`: the one it will be decoded
        with."""
        names, cfg = req.names, self.cfg
        if len(req.texts) > cfg.max_request_lines:
            self._over(
                "lines",
                f"{names.texts}: {len(req.texts)} texts, more than the server's limit of "
                f"{cfg.max_request_lines} "
                "(serve.max_request_lines); send them in several requests",
                names.texts,
            )
        longest = max((len(t) for t in req.texts), default=0)
        if longest > cfg.max_chars and not req.file:
            self._over(
                "chars",
                f"{names.texts}: a text of {longest} characters, more than the server's limit of "
                f"{cfg.max_chars} "
                "(serve.max_chars); split it",
                names.texts,
            )
        asked = max(req.beam or 0, req.nbest)
        if asked > cfg.max_beam:
            field = names.beam if (req.beam or 0) >= req.nbest else names.nbest
            shown = asked if field != "alternatives" else asked - 1
            most = cfg.max_beam if field != "alternatives" else cfg.max_beam - 1
            self._over(
                "beam",
                f"{field}: {shown} is more than the server's limit of {most} (serve.max_beam)",
                field,
            )
        self.check_size(req.chars, max(beam, req.nbest), names.texts)

    def check_size(self, chars: int, beam: int, field: str | None = None) -> None:
        """Characters (serve.char_limit) and characters x beam (serve.max_request_cost) of a
        request."""
        if self.cfg.char_limit and chars > self.cfg.char_limit:
            self._over(
                "characters",
                f"{chars} characters, more than the server's limit of {self.cfg.char_limit} per "
                "request (serve.char_limit); send them in several requests",
                field,
            )
        if chars * beam > self.cfg.max_request_cost:
            self._over(
                "cost",
                f"{chars} characters x beam {beam} = {chars * beam}, "
                f"more than the server's limit of {self.cfg.max_request_cost} per request "
                "(serve.max_request_cost); send fewer texts or ask a smaller beam",
                field,
            )

    def charge(self, caller: Caller, chars: int) -> None:
        """Count characters against the caller's key's quota (serve.char_quota); refused past it."""
        quota = self.cfg.char_quota
        with self._lock:
            used = self._used.get(caller.key, 0)
            if quota and used + chars > quota:
                self._counted("quota")
                raise refuse(
                    "quota",
                    f"Quota exceeded: {used} of {quota} characters used (serve.char_quota); this "
                    f"request has {chars}",
                )
            self._used[caller.key] = used + chars

    def usage(self, caller: Caller) -> tuple[int, int]:
        """(characters translated, the quota) for the caller's key; the quota 0 when there is
        none."""
        with self._lock:
            return self._used.get(caller.key, 0), self.cfg.char_quota

    def _over(self, limit: str, message: str, field: str | None) -> None:
        self._counted(limit)
        raise refuse(limit, message, field)

    def _counted(self, limit: str) -> None:
        if self.counter is not None:
            self.counter.labels(limit=limit).inc()
