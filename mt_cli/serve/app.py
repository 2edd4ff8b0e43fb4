"""The HTTP API (FastAPI): /translate, /score, /attention, /health, /metrics, the web page at /, and
LibreTranslate's API (libretranslate.py), whose POST /translate shares the path: a form body, or
a JSON object with q, source or target (fields the JSON API refuses), is LibreTranslate's.

Handlers never decode: they check a request, queue it with the batcher, and await its future, so
the event loop stays free while the decoding thread works. Every error is one JSON object,
{"error": "..."}, naming the field or the limit: 400 for a body that is not JSON, 413 for a body
or a line count over the limits, 422 for a field of the wrong shape or a request the model cannot
take, 503 (with Retry-After) while loading or when the queue is full, 500 when decoding fails.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import ValidationError

from mt_cli.config import OutputConfig, ServeConfig
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.serve.batcher import Batcher, Overloaded
from mt_cli.serve.documents import Tasks
from mt_cli.serve.guard import ApiError, Guard
from mt_cli.serve.languages import Languages, resolve
from mt_cli.serve.libretranslate import LibreTranslate, fields, is_form, is_libretranslate
from mt_cli.serve.schemas import AttentionRequest, LibreTranslateRequest, ScoreRequest, TranslateRequest
from mt_cli.serve.service import Service, Work
from mt_cli.serve.telemetry import Telemetry


class Model:
    """The model as the server holds it: loaded in a thread of its own after the server starts, so
    that /health can say 503 until it is ready, and the reason if loading failed."""

    def __init__(self, load: Callable[[], Translator], name: str, cfg: ServeConfig, telemetry: Telemetry) -> None:
        self.name, self.cfg, self.telemetry = name, cfg, telemetry
        self.service: Service | None = None
        self.batcher: Batcher | None = None
        self.languages: Languages | None = None
        self.error: str | None = None
        self.on_error: Callable[[], None] | None = None  # `mt serve` stops when loading fails
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._load, args=(load,), name="mt-load", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _load(self, load: Callable[[], Translator]) -> None:
        try:
            translator, self.languages = resolve(load(), self.cfg)
            service = Service(translator, self.telemetry, self.cfg.max_batch_tokens, self.cfg.slice_cost)
        except Exception as e:  # noqa: BLE001 - reported by /health and by `mt serve`, which exits
            self.error = str(e) if isinstance(e, MtError) else f"{type(e).__name__}: {e}"
            if self.on_error is not None:
                self.on_error()
            return
        cfg = self.cfg
        batcher = Batcher(Tasks(service).run, cfg.max_batch_tokens, cfg.max_wait_ms / 1000, cfg.batch_gap_ms / 1000,
                          cfg.max_queue_lines, self.telemetry.batch)  # fmt: skip
        self.telemetry.queued.set_function(lambda: batcher.queued_lines)  # read at each scrape
        self.batcher, self.service = batcher, service

    def ready(self) -> tuple[Service, Batcher]:
        if self.service is None or self.batcher is None:
            raise ApiError(503, self.error or "the model is still loading", {"Retry-After": "1"}, kind="loading")
        return self.service, self.batcher

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close(timeout=self.cfg.shutdown_s)


async def decode(model: Model, check: Callable[[Service], Work]) -> Any:
    """Check a request (off the event loop: it tokenizes), queue it, and await its result."""
    service, batcher = model.ready()
    try:
        work = await asyncio.to_thread(check, service)
    except MtError as e:
        raise ApiError(422, str(e), kind="invalid") from None
    try:
        future = batcher.submit_group(work.key, list(work.parts))
    except Overloaded as e:
        raise ApiError(503, str(e), {"Retry-After": str(e.retry_after)}, kind="overloaded") from None
    try:
        return await asyncio.wrap_future(future)
    except MtError as e:
        raise ApiError(422, str(e), kind="invalid") from None
    except Exception as e:  # noqa: BLE001 - this batch failed; the server goes on
        raise ApiError(500, f"decoding failed: {type(e).__name__}: {e}", kind="decoding") from None


def _lines(value: str | list[str], field: str, cfg: ServeConfig) -> list[str]:
    lines = [value] if isinstance(value, str) else value
    if len(lines) > cfg.max_request_lines:
        raise ApiError(413, f"{field}: {len(lines)} lines, more than the server's limit of {cfg.max_request_lines} "
                            "(--max-request-lines); send them in several requests", kind="too_large")  # fmt: skip
    return lines


def _check_beam(req: TranslateRequest, cfg: ServeConfig) -> None:
    for field, asked in (("beam", req.beam or 0), ("nbest", req.nbest)):
        if asked > cfg.max_beam:
            raise ApiError(422, f"{field}: {asked} is more than the server's limit of {cfg.max_beam} (--max-beam)",
                           kind="invalid")  # fmt: skip


async def _translate(request: Request, model: Model, libre: LibreTranslate) -> dict[str, Any]:
    body = await fields(request)
    if is_libretranslate(request, body):
        return await libre.translate(body, is_form(request))
    try:  # as FastAPI checks a declared body, so errors read as for /score
        req = TranslateRequest.model_validate(body)
    except ValidationError as e:
        raise RequestValidationError(e.errors(include_url=False)) from None
    lines = _lines(req.text, "text", model.cfg)
    _check_beam(req, model.cfg)
    if req.format == "text" and (req.nbest > 1 or req.token_scores or req.alignment):
        raise ApiError(422, 'nbest, token_scores and alignment need "format": "full"', kind="invalid")
    prefixes: list[str | None] | None = [req.prefix] if isinstance(req.prefix, str) else req.prefix
    output = OutputConfig("jsonl" if req.format == "full" else "text", req.nbest, req.token_scores, req.alignment)
    found = await decode(model, lambda s: s.translation(lines, req.beam, output, req.glossary, prefixes))
    return {"translations": found}


# POST /translate reads its body itself (two APIs share the path); the OpenAPI docs show both.
TRANSLATE_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"oneOf": [TranslateRequest.model_json_schema(),
                                              LibreTranslateRequest.model_json_schema()]}},
    "application/x-www-form-urlencoded": {"schema": LibreTranslateRequest.model_json_schema()},
}}}  # fmt: skip


def create_app(load: Callable[[], Translator], name: str, cfg: ServeConfig = ServeConfig()) -> FastAPI:
    """The app; `load` builds the Translator (in a thread, once the server runs)."""
    telemetry = Telemetry()
    model = Model(load, name, cfg, telemetry)

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        model.start()
        yield
        model.close()

    app = FastAPI(title="mt", summary="Translate, score and inspect with an mt checkpoint", lifespan=lifespan)
    app.state.model = model
    if cfg.cors_origins:  # browser pages on other origins (LibreTranslate's web clients) may call it
        app.add_middleware(CORSMiddleware, allow_origins=list(cfg.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["*"])  # fmt: skip
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]

    @app.get("/health")
    async def health() -> JSONResponse:
        if model.service is None:
            status = "failed" if model.error else "loading"
            return JSONResponse({"status": status, "model": name, "error": model.error}, status_code=503)
        uptime = round(time.monotonic() - model.started, 3)
        return JSONResponse({"status": "ok", "model": name, "uptime_s": uptime, "threads": torch.get_num_threads()})

    libre = LibreTranslate(model, cfg)

    @app.post("/translate", openapi_extra=TRANSLATE_BODY)
    async def translate(request: Request) -> dict[str, Any]:
        """Translate lines ({"text": ...}); with format full, each line's object as `mt translate
        --format jsonl` writes it. Or LibreTranslate's request (q, source, target: JSON or a form)."""
        return await _translate(request, model, libre)

    @app.post("/score")
    async def score(req: ScoreRequest) -> dict[str, Any]:
        """Each pair's log-probability (sum over target tokens, EOS included), as `mt score`."""
        sources, targets = _lines(req.source, "source", cfg), _lines(req.target, "target", cfg)
        found = await decode(model, lambda s: s.scoring(sources, targets, req.normalize, req.format == "full"))
        return {"scores": found}

    @app.post("/attention")
    async def attention(req: AttentionRequest) -> dict[str, Any]:
        """The encoder-decoder attention of one line, averaged over each layer's heads."""
        return await decode(model, lambda s: s.attention(req.text, req.target))

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(telemetry.text(), media_type="text/plain; version=0.0.4; charset=utf-8")

    libre.routes(app)
    page = resources.files("mt_cli.serve").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    app.add_middleware(Guard, max_body_bytes=cfg.max_body_bytes, telemetry=telemetry)
    return app


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    request.app.state.model.telemetry.errors.labels(exc.kind).inc()
    return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """Pydantic's findings as one line naming the field; a body that is not JSON is 400."""
    errors: list[dict[str, Any]] = list(exc.errors())
    request.app.state.model.telemetry.errors.labels("invalid").inc()
    first: dict[str, Any] = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx") or {}
        reason = ctx.get("error", "")
        return JSONResponse({"error": f"the body is not valid JSON: {reason}".strip()}, status_code=400)
    message = "; ".join(f"{_field(e['loc'])}: {e['msg']}" for e in errors)
    return JSONResponse({"error": message, "field": _field(first["loc"])}, status_code=422)


def _field(loc: tuple[Any, ...]) -> str:
    """pydantic's location of an error, ("body", "text", 0), as the field it names: text.0."""
    return ".".join(str(p) for p in loc if p != "body") or "body"
