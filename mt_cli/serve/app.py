"""The HTTP API (FastAPI): /translate, /score, /attention, /health, /metrics, the web page at /, and
LibreTranslate's API (libretranslate.py), whose POST /translate shares the path: a form body, or
a JSON object with q, source or target (fields the JSON API refuses), is LibreTranslate's.

Handlers never decode: they check a request, queue it with the batcher, and await its future, so
the event loop stays free while the decoding thread works. Every error is one JSON object,
{"error": "...", "field": ...} naming the field (null for none) or the limit, and {"error": "..."}
on LibreTranslate's routes, parse errors, 404 and 405 included: 400 for a body that is not JSON,
413 for a body or a line count over the limits, 422 for a field of the wrong shape or a request
the model cannot take, 503 (with Retry-After) while loading or when the queue is full, 500 when
decoding fails. /openapi.json documents each route's statuses, bodies and content types
(schemas.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from mt_cli.config import OutputConfig, ServeConfig
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.serve.batcher import Batcher, Overloaded
from mt_cli.serve.documents import Tasks
from mt_cli.serve.guard import ApiError, Guard, error_body, libretranslate_shape
from mt_cli.serve.languages import Languages, resolve
from mt_cli.serve.libretranslate import LibreTranslate, client_of, fields, is_form, is_libretranslate, json_body
from mt_cli.serve.schemas import (
    AttentionMap,
    AttentionRequest,
    Health,
    ScoreRequest,
    Scores,
    Translated,
    TranslateRequest,
    Translations,
    request_bodies,
    responses,
)
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
        batcher = Batcher(
            Tasks(service).run,
            cfg.max_batch_tokens,
            cfg.max_wait_ms / 1000,
            cfg.batch_gap_ms / 1000,
            cfg.max_queue_lines,
            self.telemetry.batch,
        )
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
        raise ApiError(
            413,
            f"{field}: {len(lines)} lines, more than the server's limit of {cfg.max_request_lines} "
            "(serve.max_request_lines); send them in several requests",
            kind="too_large",
            field=field,
        )
    return lines


def _check_beam(req: TranslateRequest, cfg: ServeConfig) -> None:
    for field, asked in (("beam", req.beam or 0), ("nbest", req.nbest)):
        if asked > cfg.max_beam:
            raise ApiError(
                422,
                f"{field}: {asked} is more than the server's limit of {cfg.max_beam} (serve.max_beam)",
                kind="invalid",
                field=field,
            )


async def _translate(request: Request, model: Model, libre: LibreTranslate) -> dict[str, Any]:
    body = await fields(request)
    request.state.libretranslate = is_libretranslate(request, body)  # its errors take LibreTranslate's shape
    if request.state.libretranslate:
        return await libre.translate(body, is_form(request), client_of(request))
    libre.limits.admit(client_of(request), None)
    req = _validated(TranslateRequest, body)
    lines = _lines(req.text, "text", model.cfg)
    _check_beam(req, model.cfg)
    libre.limits.check_size(sum(len(line) for line in lines), req.beam or model.ready()[0].translator.cfg.beam)
    if req.format == "text" and (req.nbest > 1 or req.token_scores or req.alignment):
        raise ApiError(422, 'nbest, token_scores and alignment need "format": "full"', kind="invalid", field="format")
    prefixes: list[str | None] | None = [req.prefix] if isinstance(req.prefix, str) else req.prefix
    output = OutputConfig("jsonl" if req.format == "full" else "text", req.nbest, req.token_scores, req.alignment)
    direction = (req.source_lang, req.target_lang)
    found = await decode(model, lambda s: s.translation(lines, req.beam, output, req.glossary, prefixes, direction))
    return {"translations": found}


Body = TypeVar("Body", bound=BaseModel)


def _validated(kind: type[Body], body: Any) -> Body:
    """A body checked against its model; errors read as FastAPI's checks of a declared body would."""
    try:
        return kind.model_validate(body)
    except ValidationError as e:
        raise RequestValidationError(e.errors(include_url=False)) from None


def create_app(load: Callable[[], Translator], name: str, cfg: ServeConfig = ServeConfig()) -> FastAPI:
    """The app; `load` builds the Translator (in a thread, once the server runs). `name`: the
    checkpoint as given (several: comma-separated); the API shows only its file name."""
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
        app.add_middleware(
            CORSMiddleware, allow_origins=list(cfg.cors_origins), allow_methods=["GET", "POST"], allow_headers=["*"]
        )
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _failed)  # a bug's 500 in the same shape (and still logged)
    libre = LibreTranslate(model, cfg)
    _routes(app, model, libre)
    libre.routes(app)
    app.add_middleware(Guard, max_body_bytes=cfg.max_body_bytes, telemetry=telemetry)
    return app


def _routes(app: FastAPI, model: Model, libre: LibreTranslate) -> None:
    """The JSON API's routes, the metrics and the page; each documents its statuses and bodies."""
    cfg, bodies = model.cfg, request_bodies(model.cfg)
    page = resources.files("mt_cli.serve").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/health", response_model=None, responses=responses(Health, "native", 503, retry_after=False))
    async def health() -> JSONResponse:
        """The model's file name and languages; 503 while it loads or when loading failed."""
        body, status = _health(model)
        return JSONResponse(body, status_code=status)

    @app.post(
        "/translate",
        response_model=None,
        openapi_extra=bodies["/translate"],
        responses=responses(Translations | Translated, "both", 400, 403, 413, 422, 429, 500, 503),
    )
    async def translate(request: Request) -> dict[str, Any]:
        """Translate lines ({"text": ...}); with format full, each line's object as `mt translate
        --format jsonl` writes it. Or LibreTranslate's request (q, source, target: JSON or a form)."""
        return await _translate(request, model, libre)

    @app.post(
        "/score",
        response_model=None,
        openapi_extra=bodies["/score"],
        responses=responses(Scores, "native", 400, 413, 422, 429, 500, 503),
    )
    async def score(request: Request) -> dict[str, Any]:
        """Each pair's log-probability (sum over target tokens, EOS included), as `mt score`."""
        libre.limits.admit(client_of(request), None)
        req = _validated(ScoreRequest, await json_body(request))
        sources, targets = _lines(req.source, "source", cfg), _lines(req.target, "target", cfg)
        libre.limits.check_size(sum(len(t) for t in [*sources, *targets]), 1)
        found = await decode(model, lambda s: s.scoring(sources, targets, req.normalize, req.format == "full"))
        return {"scores": found}

    @app.post(
        "/attention",
        response_model=None,
        openapi_extra=bodies["/attention"],
        responses=responses(AttentionMap, "native", 400, 413, 422, 429, 500, 503),
    )
    async def attention(request: Request) -> dict[str, Any]:
        """The encoder-decoder attention of one line, averaged over each layer's heads."""
        libre.limits.admit(client_of(request), None)
        req = _validated(AttentionRequest, await json_body(request))
        return await decode(model, lambda s: s.attention(req.text, req.target))

    @app.get("/metrics", response_class=PlainTextResponse, response_description="Prometheus text format 0.0.4")
    async def metrics() -> Response:
        return Response(model.telemetry.text(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", response_class=HTMLResponse, response_description="the web page")
    async def index() -> HTMLResponse:
        return HTMLResponse(page)


def _health(model: Model) -> tuple[dict[str, Any], int]:
    """GET /health: the checkpoints by file name, never their paths (which say where the server's files lie)."""
    shown = ", ".join(Path(p).name for p in model.name.split(", "))
    if model.service is None or model.languages is None:
        return {"status": "failed" if model.error else "loading", "model": shown, "error": model.error}, 503
    languages = {"source": list(model.languages.sources), "target": list(model.languages.targets)}
    uptime = round(time.monotonic() - model.started, 3)
    return {
        "status": "ok",
        "model": shown,
        "languages": languages,
        "uptime_s": uptime,
        "threads": torch.get_num_threads(),
    }, 200


def _respond(
    request: Request, status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error in the shape of the API asked: LibreTranslate's {"error"}, else {"error", "field"}."""
    libre = getattr(request.state, "libretranslate", False) or libretranslate_shape(
        request.url.path, request.headers.get("content-type", "")
    )
    return JSONResponse(error_body(message, field, libre), status_code=status, headers=headers)


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    request.app.state.model.telemetry.errors.labels(exc.kind).inc()
    return _respond(request, exc.status, exc.message, exc.field, exc.headers)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """Pydantic's findings as one line naming the field."""
    errors: list[dict[str, Any]] = list(exc.errors())
    request.app.state.model.telemetry.errors.labels("invalid").inc()
    first: dict[str, Any] = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    message = "; ".join(f"{_field(e['loc'])}: {e['msg']}" for e in errors)
    return _respond(request, 422, message, _field(first["loc"]))


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's refusals: no such route (404), a method the route does not take (405, with
    Allow), a malformed multipart body (400)."""
    request.app.state.model.telemetry.errors.labels("route" if exc.status_code in (404, 405) else "invalid").inc()
    message = f"{request.method} {request.url.path}: {exc.detail}"
    if exc.status_code == 404:
        message += "; the API is described at /docs and /openapi.json"
    return _respond(request, exc.status_code, message, headers=dict(exc.headers or {}))


async def _failed(request: Request, exc: Exception) -> JSONResponse:
    request.app.state.model.telemetry.errors.labels("internal").inc()
    return _respond(request, 500, f"internal error ({type(exc).__name__}); the server's log has the details")


def _field(loc: tuple[Any, ...]) -> str:
    """pydantic's location of an error, ("text", "list[str]", 0), as the field it names: text.0
    (without the branch of a union pydantic tried: text.str would name no field)."""
    parts = [p for p in loc if p != "body"]
    return ".".join(str(p) for i, p in enumerate(parts) if i == 0 or isinstance(p, int)) or "body"
