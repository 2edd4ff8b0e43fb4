"""LibreTranslate's API, so that what speaks it (Weblate, Discourse, Mastodon, libretranslatepy,
browser extensions) works against `mt serve` unchanged: POST /translate (with a `q` field or a
form body: web_app.py tells it from the JSON API's by its body), /detect and /translate_file, and
GET /languages, /frontend/settings and /download_file/NAME.

Fields come as JSON or as a form, as LibreTranslate takes them, and become the one request every API
makes (api_request.py) for the pipeline. Errors are LibreTranslate's: {"error": "..."} with 400 for
a request it cannot take (naming the field, the limit or the language pair), 403 for a missing or
wrong api_key under serve.api_keys, 429 past a rate or when the queue is full, 500 when decoding
fails. Each q is one paragraph or document, translated by Translator.translate_document."""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from mt_cli.data.languages import language_name
from mt_cli.documents import EXTENSIONS, TEXT_KINDS
from mt_cli.documents.encoding import read_document, written
from mt_cli.errors import MtError
from mt_cli.serve.api_request import Caller, Names, TextRequest
from mt_cli.serve.detect import Detection
from mt_cli.serve.documents import Files
from mt_cli.serve.guard import ApiError, is_form_type
from mt_cli.serve.openapi import request_bodies, responses
from mt_cli.serve.request_pipeline import Pipeline
from mt_cli.serve.schemas import (
    DetectedLanguage,
    FrontendSettings,
    Language,
    LibreTranslateRequest,
    TranslatedFile,
)

# What /translate_file reads, by extension: plain text as paragraphs, the rest as `mt translate`.
FILE_KINDS = {".txt": "text", **EXTENSIONS}
NAMES = Names(
    texts="q", beam="alternatives", nbest="alternatives", source="source", target="target"
)
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
    else:
        # Read here, not by Starlette, which reads unescaped bytes as Latin-1: `curl -d q=Grüße`
        # sends UTF-8.
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
    return is_form(request) or (
        isinstance(body, dict) and any(k in body for k in ("q", "source", "target"))
    )


def _missing(name: str) -> ApiError:
    return ApiError(400, f"Invalid request: missing {name} parameter")


class LibreTranslate:
    """The routes, with what they share: the pipeline (models, limits, keys) and the translated
    files."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline, self.cfg = pipeline, pipeline.models.cfg
        self.files = Files()

    def admit(self, given: Any, client: str) -> Caller:
        """The caller, admitted: counted against its rate, and under serve.api_keys holding one."""
        caller = Caller(
            client, given if isinstance(given, str) else None if not given else str(given)
        )
        self.pipeline.limits.admit(caller, NAMES)
        return caller

    async def translate(self, body: dict[str, Any], form: bool, client: str) -> dict[str, Any]:
        """POST /translate as LibreTranslate answers it."""
        caller = self.admit(body.get("api_key"), client)
        req = _request(body)
        texts = [req.q] if isinstance(req.q, str) else list(req.q)
        if form:  # as LibreTranslate: a form's line breaks (\r\n from a browser) become \n
            texts = ["\n".join(t.splitlines()) for t in texts]
        if req.format not in TEXT_KINDS:  # office files and e-books come as files: /translate_file
            raise ApiError(
                400,
                f"{req.format} format is not supported; this server reads {', '.join(TEXT_KINDS)} "
                "(office files and e-books through /translate_file)",
            )
        # as LibreTranslate: none for html
        alternatives = req.alternatives if req.format == "text" else 0
        asked = TextRequest(
            texts, caller, NAMES, req.format, req.source, req.target, nbest=alternatives + 1
        )
        found, detected = await self.pipeline.translate(asked)
        out: dict[str, Any] = {
            "translatedText": found[0][0] if isinstance(req.q, str) else [t for t, _ in found]
        }
        if req.alternatives > 0:
            out["alternatives"] = found[0][1] if isinstance(req.q, str) else [a for _, a in found]
        if detected is not None:
            out["detectedLanguage"] = (
                detected if isinstance(req.q, str) else [detected] * len(texts)
            )
        return out

    def routes(self, app: FastAPI) -> None:
        """GET /languages, /frontend/settings, /download_file/NAME; POST /detect, /translate_file.
        (POST /translate is web_app.py's, which hands LibreTranslate's requests to `translate`.)"""

        bodies = request_bodies(self.cfg)

        @app.get(
            "/languages",
            response_model=None,
            responses=responses(list[Language], "libretranslate", 503),
        )
        async def languages() -> list[dict[str, Any]]:
            """LibreTranslate's: each language, its English name and the targets it translates
            into."""
            self.pipeline.models.check_ready()  # 503 while starting
            return self.pipeline.models.listing()

        detected = responses(list[DetectedLanguage], "libretranslate", 400, 403, 413, 429, 500, 503)

        @app.post(
            "/detect", response_model=None, openapi_extra=bodies["/detect"], responses=detected
        )
        async def detect(request: Request) -> list[Detection]:
            """LibreTranslate's: `q` (a string or a list) -> [{"confidence": 0-100, "language":
            code}]."""
            body = await _object(request)
            self.admit(body.get("api_key"), client_of(request))
            q = body.get("q")
            if not q:
                raise _missing("q")
            texts = [q] if isinstance(q, str) else q
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ApiError(400, "Invalid request: q must be a string or a list of strings")
            return await self.pipeline.detect(texts)

        @app.get(
            "/frontend/settings",
            response_model=None,
            responses=responses(FrontendSettings, "libretranslate", 503),
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
            """LibreTranslate's: a multipart `file` (by extension: .txt, .html, .md, .srt, .vtt,
            .po, .docx), `source`, `target` -> {"translatedFileUrl": ...}, a download kept 30
            minutes."""
            name, text, kind, source, target, caller = await self._upload(request)
            asked = TextRequest([text], caller, NAMES, kind, source, target, file=True)
            [(translated, _)], _ = await self.pipeline.translate(asked)
            saved = self.files.put(name, written(translated))
            return {"translatedFileUrl": str(request.url_for("download_file", filename=saved))}

        # The name is read from the path, not declared: FastAPI would document a 422 no name can
        # get.
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

    async def _upload(self, request: Request) -> tuple[str, str | bytes, str, str, str, Caller]:
        """/translate_file's form: the file's name, its text and document type, source, target,
        caller."""
        if not is_form(request):
            raise ApiError(
                400, "Invalid request: send the file as multipart/form-data (field file)"
            )
        form = await request.form()
        caller = self.admit(form.get("api_key"), client_of(request))
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
            # text in the encoding it declares
            text = read_document(await upload.read(), kind, upload.filename)
        except MtError as e:
            raise ApiError(400, f"Invalid request: {e}") from None
        return upload.filename, text, kind, str(form["source"]), str(form["target"]), caller

    def settings(self) -> dict[str, Any]:
        """GET /frontend/settings, in LibreTranslate's shape (for its web page and extensions)."""
        self.pipeline.models.check_ready()
        targets = self.pipeline.models.targets()
        target = targets[0] if targets else ""
        return {
            "charLimit": self.cfg.max_chars,
            "frontendTimeout": FRONTEND_TIMEOUT_MS,
            "apiKeys": self.pipeline.limits.keys is not None,
            "keyRequired": self.pipeline.limits.keys is not None,
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
        # q, not q.str: the field, not the union's branch
        name = str(first["loc"][0]) if first["loc"] else "body"
        if name == "alternatives":
            raise ApiError(400, "Invalid request: alternatives parameter is not a number") from None
        raise ApiError(400, f"Invalid request: {name}: {first['msg']}") from None
    return req.model_copy(update={"alternatives": max(0, req.alternatives)})
