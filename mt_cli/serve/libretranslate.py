"""LibreTranslate's API, so that what speaks it (Weblate, Discourse, Mastodon, libretranslatepy,
browser extensions) works against `mt serve` unchanged: POST /translate (with a `q` field or a
form body: app.py tells it from the JSON API's by its body), /detect and /translate_file, and
GET /languages, /frontend/settings and /download_file/NAME.

Fields come as JSON or as a form, as LibreTranslate takes them. Errors are LibreTranslate's:
{"error": "..."} with 400 for a request it cannot take (naming the field, the limit or the
language pair), 403 for a missing or wrong api_key under --api-keys, 429 when the queue is full,
500 when decoding fails. Each q is one paragraph or document, translated by
Translator.translate_document in the decoding thread (documents.py).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from mt_cli.config import ServeConfig
from mt_cli.data.languages import language_name
from mt_cli.documents import EXTENSIONS, KINDS
from mt_cli.errors import MtError
from mt_cli.serve.batcher import Overloaded
from mt_cli.serve.detect import Detection, Detector
from mt_cli.serve.documents import Documents, Files, Translated
from mt_cli.serve.guard import ApiError, is_form_type
from mt_cli.serve.languages import Languages
from mt_cli.serve.limits import Limits, read_keys
from mt_cli.serve.schemas import (
    DetectedLanguage,
    FrontendSettings,
    Language,
    LibreTranslateRequest,
    TranslatedFile,
    request_bodies,
    responses,
)

if TYPE_CHECKING:
    from mt_cli.serve.app import Model

# What /translate_file reads, by extension: plain text as paragraphs, the rest as `mt translate`.
FILE_KINDS = {".txt": "text", **EXTENSIONS}
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default: how long its page waits after typing
DOWNLOAD = {
    "parameters": [
        {
            "name": "filename",
            "in": "path",
            "required": True,
            "schema": {"type": "string"},
            "description": "the name in translatedFileUrl",
        }
    ]
}


def client_of(request: Request) -> str:
    """The client's address, what per-client limits count by when it gives no API key."""
    return request.client.host if request.client is not None else "unknown"


def is_form(request: Request) -> bool:
    return is_form_type(request.headers.get("content-type", ""))


async def fields(request: Request) -> Any:
    """A request's fields: a form's (a field given several times as a list), else the JSON body
    parsed (whatever it holds: the caller checks); a body that is not JSON is 400."""
    if not is_form(request):
        return await json_body(request)
    found: dict[str, list[Any]] = {}
    if request.headers["content-type"].lower().startswith("multipart/"):
        form = await request.form()
        found = {k: form.getlist(k) for k in form.keys()}
    else:  # read here, not by Starlette, which reads unescaped bytes as Latin-1: `curl -d q=Grüße` sends UTF-8
        try:
            text = (await request.body()).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ApiError(400, f"Invalid request: the form is not UTF-8 ({e})") from None
        for k, v in parse_qsl(text, keep_blank_values=True):
            found.setdefault(k, []).append(v)
    return {k: v[0] if len(v) == 1 else v for k, v in found.items()}


async def json_body(request: Request) -> Any:
    """The body parsed as JSON, whatever its content type says (an empty one is {}); else 400."""
    body = await request.body()
    try:
        return json.loads(body) if body.strip() else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the body is not valid JSON: {e}") from None


def is_libretranslate(request: Request, body: Any) -> bool:
    """A LibreTranslate request, not the JSON API's: a form, or an object with a field only
    LibreTranslate's takes (the JSON API refuses q, source and target)."""
    return is_form(request) or (isinstance(body, dict) and any(k in body for k in ("q", "source", "target")))


def _missing(name: str) -> ApiError:
    return ApiError(400, f"Invalid request: missing {name} parameter")


class LibreTranslate:
    """The routes, with what they share: the model, the limits, the keys, the translated files."""

    def __init__(self, model: Model, cfg: ServeConfig) -> None:
        self.model, self.cfg = model, cfg
        self.keys = read_keys(cfg.api_keys)
        self.limits = Limits(cfg, self.keys, model.telemetry.limited)
        self.files = Files()
        self._detector: Detector | None = None
        self._alone = itertools.count()  # batcher keys: a document job never shares a batch

    def check_key(self, given: Any, client: str) -> None:
        """Under --api-keys a request must carry one of them (without it api_key is ignored); then
        the client's requests per minute are counted (limits.py)."""
        self.limits.admit(client, given if isinstance(given, str) and self.keys and given in self.keys else None)
        if self.keys is None:
            return
        if not given:
            raise ApiError(403, "Invalid API key: this server needs one (api_key); ask its operator", kind="forbidden")
        if not isinstance(given, str) or given not in self.keys:
            raise ApiError(403, "Invalid API key", kind="forbidden")

    def languages(self) -> Languages:
        self.model.ready()  # 503 while loading
        assert self.model.languages is not None  # set with the service
        return self.model.languages

    async def detect(self, texts: list[str]) -> list[Detection]:
        if self._detector is None:
            self._detector = Detector(self.languages())
        return await asyncio.to_thread(self._detector.detect, texts)  # lingua's first call loads its models

    async def translate(self, body: dict[str, Any], form: bool, client: str) -> dict[str, Any]:
        """POST /translate as LibreTranslate answers it."""
        self.check_key(body.get("api_key"), client)
        req = _request(body)
        texts = [req.q] if isinstance(req.q, str) else list(req.q)
        if form:  # as LibreTranslate: a form's line breaks (\r\n from a browser) become \n
            texts = ["\n".join(t.splitlines()) for t in texts]
        self._check_size(texts)
        if req.alternatives + 1 > self.cfg.max_beam:
            raise ApiError(
                400, f"Invalid request: alternatives parameter must be <= {self.cfg.max_beam - 1} (serve.max_beam)"
            )
        if req.format not in KINDS:
            raise ApiError(400, f"{req.format} format is not supported; this server reads {', '.join(KINDS)}")
        beam = self.model.ready()[0].translator.cfg.beam
        self.limits.check_size(sum(len(t) for t in texts), max(beam, req.alternatives + 1))
        source, detected = await self._source(req.source, texts)
        alternatives = req.alternatives if req.format == "text" else 0  # as LibreTranslate: none for html
        found = await self.decode(self._documents(texts, req.format, source, req.target, alternatives))
        out: dict[str, Any] = {"translatedText": found[0][0] if isinstance(req.q, str) else [t for t, _ in found]}
        if req.alternatives > 0:
            out["alternatives"] = found[0][1] if isinstance(req.q, str) else [a for _, a in found]
        if detected is not None:
            out["detectedLanguage"] = detected if isinstance(req.q, str) else [detected] * len(texts)
        return out

    def _check_size(self, texts: list[str]) -> None:
        cfg = self.cfg
        if len(texts) > cfg.max_request_lines:
            raise ApiError(
                400,
                f"Invalid request: request ({len(texts)}) exceeds text limit "
                f"({cfg.max_request_lines}, serve.max_request_lines)",
            )
        longest = max(len(t) for t in texts)
        if longest > cfg.max_chars:
            raise ApiError(
                400, f"Invalid request: request ({longest}) exceeds text limit ({cfg.max_chars}, serve.max_chars)"
            )

    async def _source(self, source: str, texts: list[str]) -> tuple[str, Detection | None]:
        """The source language asked for, or for "auto" the one detected, with its detection."""
        if source.lower() != "auto":
            return source, None
        detected = (await self.detect(texts))[0]
        return detected["language"], detected

    def _documents(self, texts: list[str], kind: str, source: str, target: str, alternatives: int) -> Documents:
        """The job for a requested pair (source "auto" resolved before); 400 when it is not served."""
        languages = self.languages()
        src, tgt = languages.pair(source, target)
        return Documents(texts, kind, src, tgt if languages.tokens else "", alternatives, languages.told_source)

    async def decode(self, job: Documents) -> list[Translated]:
        """The job queued with the batcher and awaited, errors as LibreTranslate's."""
        _, batcher = self.model.ready()
        # Its own key, and a full batch's tokens: it shares no batch, so the decoding thread starts
        # it at once instead of waiting for others to join (mt_source_tokens counts that budget).
        key = ("documents", next(self._alone))
        try:
            future = batcher.submit(key, len(job.texts), batcher.max_batch_tokens, job)
        except Overloaded as e:
            raise ApiError(429, f"Slowdown: {e}", {"Retry-After": str(e.retry_after)}, kind="overloaded") from None
        try:
            return await asyncio.wrap_future(future)
        except MtError as e:  # a document that does not parse, a target the model has no token for
            raise ApiError(400, str(e)) from None
        except Exception as e:  # noqa: BLE001 - this request failed; the server goes on
            raise ApiError(500, f"Cannot translate text: {type(e).__name__}: {e}", kind="decoding") from None

    def routes(self, app: FastAPI) -> None:
        """GET /languages, /frontend/settings, /download_file/NAME; POST /detect, /translate_file.
        (POST /translate is app.py's, which hands LibreTranslate's requests to `translate`.)"""

        bodies = request_bodies(self.cfg)

        @app.get("/languages", response_model=None, responses=responses(list[Language], "libretranslate", 503))
        async def languages() -> list[dict[str, Any]]:
            """LibreTranslate's: each language, its English name and the targets it translates into."""
            return self.languages().listing()

        detected = responses(list[DetectedLanguage], "libretranslate", 400, 403, 413, 429, 500, 503)

        @app.post("/detect", response_model=None, openapi_extra=bodies["/detect"], responses=detected)
        async def detect(request: Request) -> list[Detection]:
            """LibreTranslate's: `q` (a string or a list) -> [{"confidence": 0-100, "language": code}]."""
            body = await _object(request)
            self.check_key(body.get("api_key"), client_of(request))
            q = body.get("q")
            if not q:
                raise _missing("q")
            texts = [q] if isinstance(q, str) else q
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ApiError(400, "Invalid request: q must be a string or a list of strings")
            return await self.detect(texts)

        @app.get(
            "/frontend/settings", response_model=None, responses=responses(FrontendSettings, "libretranslate", 503)
        )
        async def frontend_settings() -> dict[str, Any]:
            return self.settings()

        self._file_routes(app, bodies)

    def _file_routes(self, app: FastAPI, bodies: dict[str, dict]) -> None:
        """POST /translate_file, and GET /download_file/NAME for what it translated."""

        @app.post(
            "/translate_file",
            response_model=None,
            openapi_extra=bodies["/translate_file"],
            responses=responses(TranslatedFile, "libretranslate", 400, 403, 413, 429, 500, 503),
        )
        async def translate_file(request: Request) -> dict[str, str]:
            """LibreTranslate's: a multipart `file` (by extension: .txt, .html, .md, .srt, .vtt, .po),
            `source`, `target` -> {"translatedFileUrl": ...}, a download kept 30 minutes."""
            name, text, kind, source, target = await self._upload(request)
            source, _ = await self._source(source, [text])
            [(translated, _)] = await self.decode(self._documents([text], kind, source, target, 0))
            saved = self.files.put(name, translated.encode("utf-8"))
            return {"translatedFileUrl": str(request.url_for("download_file", filename=saved))}

        # The name is read from the path, not declared: FastAPI would document a 422 no name can get.
        @app.get(
            "/download_file/{filename}",
            name="download_file",
            response_class=Response,
            openapi_extra=DOWNLOAD,
            responses={
                200: {"description": "the translated file", "content": {"*/*": {}}},
                **responses(None, "libretranslate", 404),
            },
        )
        async def download_file(request: Request) -> Response:
            filename = request.path_params["filename"]
            data = self.files.get(filename)
            if data is None:
                raise ApiError(
                    404,
                    f"{filename}: no such file (translated files are kept for 30 minutes, "
                    f"the newest {self.files.kept})",
                )
            shown = filename.split(".", 1)[1]
            kind = mimetypes.guess_type(shown)[0] or "application/octet-stream"
            headers = {"Content-Disposition": f'attachment; filename="{shown}"'}
            return Response(data, media_type=kind, headers=headers)

    async def _upload(self, request: Request) -> tuple[str, str, str, str, str]:
        """/translate_file's form: the file's name, its text and document type, source, target."""
        if not is_form(request):
            raise ApiError(400, "Invalid request: send the file as multipart/form-data (field file)")
        form = await request.form()
        self.check_key(form.get("api_key"), client_of(request))
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise _missing("file")
        for name in ("source", "target"):
            if not isinstance(form.get(name), str) or not form.get(name):
                raise _missing(name)
        if not upload.filename:
            raise ApiError(400, "Invalid request: empty file")
        kind = FILE_KINDS.get(Path(upload.filename).suffix.lower())
        if kind is None:
            raise ApiError(
                400,
                f"Invalid request: file format not supported ({upload.filename}); this server "
                f"reads {', '.join(FILE_KINDS)}",
            )
        try:
            text = (await upload.read()).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ApiError(400, f"Invalid request: {upload.filename} is not UTF-8 text ({e})") from None
        return upload.filename, text, kind, str(form["source"]), str(form["target"])

    def settings(self) -> dict[str, Any]:
        """GET /frontend/settings, in LibreTranslate's shape (for its web page and extensions)."""
        targets = self.languages().targets
        target = targets[0] if targets else ""
        return {
            "charLimit": self.cfg.max_chars,
            "frontendTimeout": FRONTEND_TIMEOUT_MS,
            "apiKeys": self.keys is not None,
            "keyRequired": self.keys is not None,
            "suggestions": False,
            "filesTranslation": True,
            "supportedFilesFormat": list(FILE_KINDS),
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {"code": target, "name": language_name(target) if target else ""},
            },
        }


async def _object(request: Request) -> dict[str, Any]:
    body = await fields(request)
    if not isinstance(body, dict):
        raise ApiError(400, "Invalid JSON format: the body must be an object")
    return body


def _request(body: dict[str, Any]) -> LibreTranslateRequest:
    """The fields checked in LibreTranslate's order, with its messages."""
    for name in ("q", "source", "target"):
        if not body.get(name):
            raise _missing(name)
    try:
        req = LibreTranslateRequest.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "body"  # q, not q.str: the field, not the union's branch
        if name == "alternatives":
            raise ApiError(400, "Invalid request: alternatives parameter is not a number") from None
        raise ApiError(400, f"Invalid request: {name}: {first['msg']}") from None
    return req.model_copy(update={"alternatives": max(0, req.alternatives)})
