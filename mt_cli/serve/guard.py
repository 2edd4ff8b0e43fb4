"""The server's outer layer: a body over --max-body-bytes is refused with 413 before the app
parses it, and every request is counted by endpoint and status, with its latency. And the one
shape of an error, which the app's handlers use too: {"error", "field"}, LibreTranslate's
{"error"} on its routes, DeepL's {"message"} on its."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mt_cli.serve.telemetry import Telemetry

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

ENDPOINTS = (
    "/",
    "/translate",
    "/score",
    "/attention",
    "/health",
    "/metrics",
    "/docs",
    "/openapi.json",
    "/languages",
    "/detect",
    "/translate_file",
    "/frontend/settings",
    "/v2/translate",
    "/v2/languages",
    "/v2/usage",
    "/v2/glossaries",
)
# and /download_file/NAME
LIBRETRANSLATE = (
    "/languages",
    "/detect",
    "/translate_file",
    "/frontend/settings",
)
FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_form_type(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() in FORMS


def dialect_of(path: str, content_type: str) -> str:
    """Which API a refusal speaks, by what is known before the body is read: DeepL's under /v2/,
    LibreTranslate's on its routes and for a form sent to /translate (a JSON one is told apart by
    its fields, in web_app.py), else the JSON API's."""
    if path.startswith("/v2/"):
        return "deepl"
    if (
        path in LIBRETRANSLATE
        or path.startswith("/download_file/")
        or (path == "/translate" and is_form_type(content_type))
    ):
        return "libretranslate"
    return "native"


def error_body(message: str, field: str | None, dialect: str) -> dict[str, Any]:
    """The JSON API's {"error", "field"} (null for none), LibreTranslate's {"error"}, or DeepL's
    {"message"}, as each API's clients read it."""
    if dialect == "deepl":
        return {"message": message}
    return {"error": message} if dialect == "libretranslate" else {"error": message, "field": field}


class ApiError(Exception):
    """A request the server refuses: its status (the JSON API's), its one-line message, headers, its
    kind for the errors counter, and the request field at fault (the JSON API's errors name it)."""

    def __init__(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        kind: str = "invalid",
        field: str | None = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.headers, self.kind, self.field = (
            status,
            message,
            headers,
            kind,
            field,
        )
        # the limit refused by (limits.LIMITS), whose status each API states itself
        self.limit = limit


class Guard:
    def __init__(self, app: ASGIApp, max_body_bytes: int, telemetry: Telemetry) -> None:
        self.app, self.max_body_bytes, self.telemetry = app, max_body_bytes, telemetry

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"
        start, status = time.monotonic(), 500

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            replay = await self._read_body(scope, receive, counted)
            if replay is not None:
                await self.app(scope, replay, counted)
        finally:
            self.telemetry.requests.labels(endpoint, str(status)).inc()
            self.telemetry.latency.labels(endpoint).observe(time.monotonic() - start)

    async def _read_body(
        self, scope: MutableMapping[str, Any], receive: Receive, send: Send
    ) -> Receive | None:
        """The whole body, up to the limit, then handed to the app as one message; None once a 413
        has been sent (a Content-Length over the limit is refused before any byte is read)."""
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"0")
        dialect = dialect_of(scope["path"], headers.get(b"content-type", b"").decode("latin-1"))
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(send, dialect)
            return None
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left before sending it all
                return _replay(b"", receive, message)
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body_bytes:
                await self._too_large(send, dialect)
                return None
            if not message.get("more_body"):
                return _replay(b"".join(chunks), receive)

    async def _too_large(self, send: Send, dialect: str) -> None:
        self.telemetry.errors.labels("too_large").inc()
        message = (
            f"the body is over the server's limit of {self.max_body_bytes} bytes "
            "(serve.max_body_bytes); send "
            "fewer lines per request"
        )
        body = json.dumps(error_body(message, None, dialect)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive, first: Message | None = None) -> Receive:
    """A receive that gives the app the body read already (or the disconnect seen), then the
    connection's own messages (a disconnect, later)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return first or {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
