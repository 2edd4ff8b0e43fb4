"""The HTTP API (FastAPI): the JSON API's /translate, /score and /attention, /health, /metrics and
the web page at /; LibreTranslate's API (libretranslate.py), whose POST /translate shares the path
(a form body, or a JSON object with q, source or target, fields the JSON API refuses, is
LibreTranslate's); and DeepL's API v2 under /v2/ (deepl.py).

Each API only parses its bodies into one request (request.py) and renders the answer and its
errors in its own shape; limits, routing to a model, the cache and decoding are pipeline.py's, the
same for all three. Handlers never decode: the request is queued with its model's decoding thread
and awaited, so the event loop stays free. Every error is one JSON object: {"error", "field"}
naming the field (null for none) on the JSON API, {"error"} on LibreTranslate's, {"message"} on
DeepL's, parse errors, 404 and 405 included, each with its API's status for it (JSON API: 400 for
a body that is not JSON, 413 over a size limit, 422 for a field of the wrong shape or a request the
model cannot take, 429 past a rate, 503 with Retry-After while loading or when the queue is full,
500 when decoding fails). /openapi.json documents each route (schemas.py).
"""

from __future__ import annotations

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
from mt_cli.serve.api_request import Caller, Names, TextRequest
from mt_cli.serve.deepl import DeepL
from mt_cli.serve.guard import ApiError, Guard, dialect_of, error_body
from mt_cli.serve.libretranslate import (
    LibreTranslate,
    client_of,
    fields,
    is_form,
    is_libretranslate,
    json_body,
)
from mt_cli.serve.limits import Limits, read_keys, status_for
from mt_cli.serve.models import Entry, Models
from mt_cli.serve.openapi import request_bodies, responses
from mt_cli.serve.request_pipeline import Pipeline
from mt_cli.serve.schemas import (
    AttentionMap,
    AttentionRequest,
    Health,
    ScoreRequest,
    Scores,
    Translated,
    TranslateRequest,
    Translations,
)
from mt_cli.serve.served_languages import resolve
from mt_cli.serve.service import Service, Work
from mt_cli.serve.telemetry import Telemetry
from mt_cli.serve.translation_cache import Cache

# How LibreTranslate and DeepL answer what the JSON API answers 422 (a request they cannot take)
# and 503 for a full queue; a limit's status is its own (limits.LIMITS).
STATUSES = {
    "libretranslate": {("invalid", 422): 400, ("overloaded", 503): 429},
    "deepl": {("invalid", 422): 400, ("overloaded", 503): 429},
}


def one_model(
    load: Callable[[], Translator], name: str, cfg: ServeConfig
) -> Callable[[], list[Entry]]:
    """The catalog of a server of one model (several files: an ensemble), known once it loads:
    its languages are the checkpoint's, or serve.source_lang and target_lang (languages.resolve)."""
    return lambda: [Entry(name, lambda: resolve(load(), cfg), None, 0, 0)]


def create_app(
    load: Callable[[], Translator], name: str, cfg: ServeConfig = ServeConfig()
) -> FastAPI:
    """The app of one model; `load` builds the Translator (in a thread, once the server runs).
    `name`: the checkpoint as given (several: comma-separated); the API shows only its file name."""
    shown = ", ".join(Path(p).name for p in name.split(", "))
    return create_server(one_model(load, shown, cfg), cfg)


def create_server(catalog: Callable[[], list[Entry]], cfg: ServeConfig = ServeConfig()) -> FastAPI:
    """The app of the models `catalog` lists (read in a thread once the server runs)."""
    telemetry = Telemetry()
    models = Models(catalog, cfg, telemetry)
    cache = (
        Cache(cfg.cache_size, telemetry.cache_hits, telemetry.cache_misses)
        if cfg.cache_size
        else None
    )
    pipeline = Pipeline(models, Limits(cfg, read_keys(cfg.api_keys), telemetry.limited), cache)

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        models.start()
        yield
        models.close()

    app = FastAPI(
        title="mt", summary="Translate, score and inspect with mt checkpoints", lifespan=lifespan
    )
    app.state.models, app.state.telemetry = models, telemetry
    # browser pages on other origins (LibreTranslate's web clients) may call it
    if cfg.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cfg.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
        )
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    # a bug's 500 in the same shape (and still logged)
    app.add_exception_handler(Exception, _failed)
    libre = LibreTranslate(pipeline)
    _routes(app, pipeline, libre)
    libre.routes(app)
    DeepL(pipeline).routes(app)
    app.add_middleware(Guard, max_body_bytes=cfg.max_body_bytes, telemetry=telemetry)
    return app


def _caller(request: Request, body: Any) -> Caller:
    """The JSON API's caller: its api_key field, else a bearer token."""
    key = body.get("api_key") if isinstance(body, dict) else None
    auth = request.headers.get("authorization", "")
    if key is None and auth.lower().startswith("bearer "):
        key = auth[7:].strip()
    return Caller(client_of(request), key if isinstance(key, str) else None)


async def _translate(request: Request, pipeline: Pipeline, libre: LibreTranslate) -> dict[str, Any]:
    body = await fields(request)
    if is_libretranslate(request, body):
        request.state.dialect = "libretranslate"  # its errors take LibreTranslate's shape
        return await libre.translate(body, is_form(request), client_of(request))
    caller = _caller(request, body)
    pipeline.limits.admit(caller)
    req = _validated(TranslateRequest, body)
    if req.format == "text" and OutputConfig.needs_objects(
        req.nbest, req.token_scores, req.alignment
    ):
        raise ApiError(
            422,
            'nbest, token_scores and alignment need "format": "full"',
            kind="invalid",
            field="format",
        )
    prefixes: list[str | None] | None = [req.prefix] if isinstance(req.prefix, str) else req.prefix
    output = OutputConfig(
        "jsonl" if req.format == "full" else "text", req.nbest, req.token_scores, req.alignment
    )
    lines = [req.text] if isinstance(req.text, str) else req.text
    asked = TextRequest(
        lines,
        caller,
        source=req.source_lang,
        target=req.target_lang,
        beam=req.beam,
        nbest=req.nbest,
        glossary=req.glossary,
        prefixes=prefixes,
        output=output,
    )
    found, _ = await pipeline.translate(asked)
    return {"translations": [text for text, _ in found]}


Body = TypeVar("Body", bound=BaseModel)


def _validated(kind: type[Body], body: Any) -> Body:
    """A body checked against its model; errors read as FastAPI's checks of a declared body
    would."""
    try:
        return kind.model_validate(body)
    except ValidationError as e:
        raise RequestValidationError(e.errors(include_url=False)) from None


async def _admitted(pipeline: Pipeline, request: Request) -> Any:
    """The JSON body of /score or /attention, its caller admitted first (limits.admit)."""
    body = await json_body(request)
    pipeline.limits.admit(_caller(request, body))
    return body


async def _one_model(
    pipeline: Pipeline, source: str | None, target: str | None, check: Callable[[Service], Work]
) -> Any:
    """/score and /attention: routed to the model of their languages (a route of one) and
    decoded."""
    [hop] = pipeline.models.route(source, target, Names(), plain=False)
    return await pipeline.run(hop, check)


def _routes(app: FastAPI, pipeline: Pipeline, libre: LibreTranslate) -> None:
    """The JSON API's routes, the metrics and the page; each documents its statuses and bodies."""
    models, cfg = pipeline.models, pipeline.models.cfg
    bodies = request_bodies(cfg)
    page = resources.files("mt_cli.serve").joinpath("page.html").read_text(encoding="utf-8")
    _model_routes(app, pipeline, bodies)

    @app.get(
        "/health",
        response_model=None,
        responses=responses(Health, "native", 503, retry_after=False),
    )
    async def health() -> JSONResponse:
        """The models by file name, their languages and whether each is loaded; 503 while the
        server starts or when starting failed."""
        body, status = _health(models)
        return JSONResponse(body, status_code=status)

    @app.post(
        "/translate",
        response_model=None,
        openapi_extra=bodies["/translate"],
        responses=responses(Translations | Translated, "both", 400, 403, 413, 422, 429, 500, 503),
    )
    async def translate(request: Request) -> dict[str, Any]:
        """Translate lines ({"text": ...}); with format full, each line's object as `mt translate
        --format jsonl` writes it. Or LibreTranslate's request (q, source, target: JSON or a form).
        """
        return await _translate(request, pipeline, libre)

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        response_description="Prometheus text format 0.0.4",
    )
    async def metrics() -> Response:
        return Response(
            app.state.telemetry.text(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    @app.get("/", response_class=HTMLResponse, response_description="the web page")
    async def index() -> HTMLResponse:
        return HTMLResponse(page)


def _model_routes(app: FastAPI, pipeline: Pipeline, bodies: dict[str, dict[str, Any]]) -> None:
    """/score and /attention: the JSON API's questions to one model."""

    @app.post(
        "/score",
        response_model=None,
        openapi_extra=bodies["/score"],
        responses=responses(Scores, "native", 400, 403, 413, 422, 429, 500, 503),
    )
    async def score(request: Request) -> dict[str, Any]:
        """Each pair's log-probability (sum over target tokens, EOS included), as `mt score`."""
        req = _validated(ScoreRequest, await _admitted(pipeline, request))
        sources = [req.source] if isinstance(req.source, str) else req.source
        targets = [req.target] if isinstance(req.target, str) else req.target
        for field, lines in (("source", sources), ("target", targets)):
            pipeline.limits.check(TextRequest(lines, Caller(""), Names(texts=field)), 1)

        def check(s: Service) -> Work:
            return s.scoring(sources, targets, req.normalize, req.format == "full")

        return {"scores": await _one_model(pipeline, req.source_lang, req.target_lang, check)}

    @app.post(
        "/attention",
        response_model=None,
        openapi_extra=bodies["/attention"],
        responses=responses(AttentionMap, "native", 400, 403, 413, 422, 429, 500, 503),
    )
    async def attention(request: Request) -> dict[str, Any]:
        """The encoder-decoder attention of one line, averaged over each layer's heads."""
        req = _validated(AttentionRequest, await _admitted(pipeline, request))

        def check(s: Service) -> Work:
            return s.attention(req.text, req.target)

        return await _one_model(pipeline, req.source_lang, req.target_lang, check)


def _health(models: Models) -> tuple[dict[str, Any], int]:
    """GET /health: the checkpoints by file name, never their paths (which say where the server's
    files lie)."""
    listed = models.health()
    shown = ", ".join(str(m["name"]) for m in listed) if listed else ""
    if not models.ready:
        return {
            "status": "failed" if models.error else "loading",
            "model": shown,
            "error": models.error,
        }, 503
    return {
        "status": "ok",
        "model": shown,
        "languages": {"source": list(models.sources()), "target": list(models.targets())},
        "models": listed,
        "uptime_s": round(time.monotonic() - models.started, 3),
        "threads": torch.get_num_threads(),
    }, 200


def _respond(
    request: Request,
    status: int,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """An error in the shape of the API asked."""
    dialect = _dialect(request)
    return JSONResponse(error_body(message, field, dialect), status_code=status, headers=headers)


def _dialect(request: Request) -> str:
    return getattr(request.state, "dialect", None) or dialect_of(
        request.url.path, request.headers.get("content-type", "")
    )


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    request.app.state.telemetry.errors.labels(exc.kind).inc()
    dialect = _dialect(request)
    if exc.limit is not None:
        status = status_for(exc.limit, dialect)
    else:
        status = STATUSES.get(dialect, {}).get((exc.kind, exc.status), exc.status)
    return _respond(request, status, exc.message, exc.field, exc.headers)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """Pydantic's findings as one line naming the field."""
    errors: list[dict[str, Any]] = list(exc.errors())
    request.app.state.telemetry.errors.labels("invalid").inc()
    first: dict[str, Any] = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    message = "; ".join(f"{_field(e['loc'])}: {e['msg']}" for e in errors)
    status = STATUSES.get(_dialect(request), {}).get(("invalid", 422), 422)
    return _respond(request, status, message, _field(first["loc"]))


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's refusals: no such route (404), a method the route does not take (405, with
    Allow), a malformed multipart body (400)."""
    request.app.state.telemetry.errors.labels(
        "route" if exc.status_code in (404, 405) else "invalid"
    ).inc()
    message = f"{request.method} {request.url.path}: {exc.detail}"
    if exc.status_code == 404:
        message += "; the API is described at /docs and /openapi.json"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # every method of the path: Starlette names only its first route's
        headers["Allow"] = ", ".join(_methods(request))
    return _respond(request, exc.status_code, message, headers=headers)


def _methods(request: Request) -> list[str]:
    found: set[str] = set()
    for route in request.app.routes:
        if getattr(route, "path", None) == request.url.path:
            found |= set(getattr(route, "methods", None) or ())
    return sorted(found - {"HEAD"})


async def _failed(request: Request, exc: Exception) -> JSONResponse:
    request.app.state.telemetry.errors.labels("internal").inc()
    return _respond(
        request, 500, f"internal error ({type(exc).__name__}); the server's log has the details"
    )


def _field(loc: tuple[Any, ...]) -> str:
    """pydantic's location of an error, ("text", "list[str]", 0), as the field it names: text.0
    (without the branch of a union pydantic tried: text.str would name no field)."""
    parts = [p for p in loc if p != "body"]
    return ".".join(str(p) for i, p in enumerate(parts) if i == 0 or isinstance(p, int)) or "body"
