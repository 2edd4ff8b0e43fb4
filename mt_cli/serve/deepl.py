"""DeepL's API v2, so that what speaks it (the official `deepl` clients, pointed at this server by
their server_url; apps with a DeepL setting) works against `mt serve`: POST /v2/translate, GET or
POST /v2/languages and /v2/usage.

Bodies come as JSON or as a form (a field given several times is a list, as DeepL's `text`), and
become the one request every API makes (api_request.py). Language codes are DeepL's, upper-case:
regional targets (EN-GB, EN-US, PT-BR, PT-PT, ZH-HANS) go to the model of their language where no
model writes the region itself. split_sentences: "1" (the default) splits at line breaks and at
sentence ends, "nonewlines" at sentence ends only, "0" translates each line as one sentence;
tag_handling html or xml translates each text as an HTML document, tags kept. The key is read
from `Authorization: DeepL-Auth-Key KEY` (or the old auth_key field) and checked under
serve.api_keys. Errors are DeepL's: {"message": ...} with 400, 403, 413, 429 or 456 (quota).
Fields DeepL has and mt does not use (context, outline_detection, model_type, ...) are accepted
and ignored; formality other than default or prefer_* is refused, as DeepL refuses it for a
language without formality. glossary_id names one of serve.glossaries' files (NAME.tsv): each
sentence holding a source term is translated with its target term.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from mt_cli.data.languages import language_name
from mt_cli.decode.glossary import Glossary, load_glossary
from mt_cli.errors import MtError
from mt_cli.serve.api_request import Caller, Names, TextRequest
from mt_cli.serve.guard import ApiError
from mt_cli.serve.libretranslate import client_of, fields
from mt_cli.serve.openapi import deepl_bodies, responses
from mt_cli.serve.request_pipeline import Pipeline
from mt_cli.serve.schemas import DeepLLanguage, DeepLTranslations, DeepLUsage

NAMES = Names(
    texts="text",
    beam="beam",
    nbest="nbest",
    source="source_lang",
    target="target_lang",
    key="auth_key",
)
# DeepL's targets for these languages
REGIONS = {
    "en": ("EN-GB", "EN-US"),
    "pt": ("PT-BR", "PT-PT"),
}
SPLITS = ("0", "1", "nonewlines")
FORMALITIES = ("default", "prefer_more", "prefer_less", "more", "less")
UNLIMITED = 10**12  # /v2/usage's character_limit where serve.char_quota is 0
ENDS = ".!?。！？"


def read_glossaries(folder: str) -> dict[str, Glossary]:
    """serve.glossaries: each NAME.tsv of the folder, by NAME (a malformed line: one error naming
    it)."""
    if not folder:
        return {}
    path = Path(folder)
    if not path.is_dir():
        raise MtError(f"serve.glossaries {folder}: no such folder")
    return {file.stem: load_glossary(file) for file in sorted(path.glob("*.tsv"))}


def _bad(message: str) -> ApiError:
    return ApiError(400, message, kind="invalid")


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name)
    return value in (True, 1, "1", "true", "True")


class DeepL:
    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.glossaries = read_glossaries(pipeline.models.cfg.glossaries)

    def _glossary(self, given: Any) -> dict[str, str] | None:
        """glossary_id: one of serve.glossaries' files, by name; its entries as the request's
        terms."""
        if not given:
            return None
        found = self.glossaries.get(given) if isinstance(given, str) else None
        if found is None:
            held = ", ".join(sorted(self.glossaries)[:20]) or "none"
            raise _bad(f"glossary_id: no glossary {given!r} on this server (it holds: {held})")
        return dict(found.entries)

    def caller(self, request: Request, body: dict[str, Any]) -> Caller:
        """The caller, admitted: its key from the Authorization header (DeepL-Auth-Key KEY)."""
        auth = request.headers.get("authorization", "")
        key = (
            auth.split(None, 1)[1].strip()
            if auth.lower().startswith("deepl-auth-key ")
            else body.get("auth_key")
        )
        caller = Caller(client_of(request), key if isinstance(key, str) and key else None)
        self.pipeline.limits.admit(caller, NAMES)
        return caller

    async def translate(self, request: Request) -> dict[str, Any]:
        request.state.dialect = "deepl"
        body = await _object(request)
        caller = self.caller(request, body)
        texts, target, source = (
            _texts(body),
            _code(body, "target_lang"),
            _code(body, "source_lang", False),
        )
        split = str(body.get("split_sentences", "nonewlines" if body.get("tag_handling") else "1"))
        if split not in SPLITS:
            raise _bad(f"split_sentences: {split!r} is not one of {', '.join(SPLITS)}")
        formality = str(body.get("formality") or "default")
        if formality not in FORMALITIES:
            raise _bad(f"formality: {formality!r} is not one of {', '.join(FORMALITIES)}")
        if formality in ("more", "less"):
            raise _bad(
                f"formality: {target} does not support formality; "
                "send default, prefer_more or prefer_less"
            )
        glossary = self._glossary(body.get("glossary_id"))
        tags = body.get("tag_handling")
        if tags not in (None, "", "html", "xml"):
            raise _bad(f"tag_handling: {tags!r} is not html or xml")
        kind = "html" if tags else ("lines" if split == "0" else "text")
        at_lines = split == "1" and not tags
        given = [_lines_apart(t) for t in texts] if at_lines else texts
        asked = TextRequest(
            given, caller, NAMES, kind, source or "auto", self._target(target), glossary=glossary
        )
        found, detected = await self.pipeline.translate(asked)
        translated = [text.replace("\n\n", "\n") if at_lines else text for text, _ in found]
        if _flag(body, "preserve_formatting") and not tags:
            translated = [_preserved(s, t) for s, t in zip(texts, translated)]
        language = (detected["language"] if detected else source or "").upper()
        return {
            "translations": [
                {"detected_source_language": language, "text": t, "billed_characters": len(s)}
                for s, t in zip(texts, translated)
            ]
        }

    def _target(self, code: str) -> str:
        """A DeepL target as a model writes it: the region itself where a model writes it (pt-BR),
        else its language (EN-GB -> en)."""
        self.pipeline.models.check_ready()
        written = {c.lower() for c in self.pipeline.models.targets()}
        return code.lower() if code.lower() in written else code.split("-")[0].lower()

    def languages(self, kind: str) -> list[dict[str, Any]]:
        """GET /v2/languages: DeepL's codes for the server's sources, or its targets."""
        models = self.pipeline.models
        models.check_ready()
        if kind == "source":
            return [{"language": c.upper(), "name": language_name(c)} for c in models.sources()]
        found = []
        for code in models.targets():
            for shown in REGIONS.get(code.lower(), (code.upper(),)):
                found.append(
                    {"language": shown, "name": language_name(code), "supports_formality": False}
                )
        return found

    def routes(self, app: FastAPI) -> None:
        bodies = deepl_bodies(self.pipeline.models.cfg)

        @app.post(
            "/v2/translate",
            response_model=None,
            openapi_extra=bodies["translate"],
            responses=responses(DeepLTranslations, "deepl", 400, 403, 413, 429, 456, 500, 503),
        )
        async def translate(request: Request) -> dict[str, Any]:
            """DeepL's: text (one or several), target_lang, source_lang (detected when absent)."""
            return await self.translate(request)

        listed = responses(list[DeepLLanguage], "deepl", 400, 403, 429, 503)

        @app.get(
            "/v2/languages",
            response_model=None,
            openapi_extra=bodies["languages_query"],
            responses=listed,
        )
        async def languages(request: Request) -> list[dict[str, Any]]:
            """DeepL's: the source languages, or with type=target the targets."""
            return await self._languages(request)

        @app.post(
            "/v2/languages",
            response_model=None,
            openapi_extra=bodies["languages"],
            responses=listed,
        )
        async def languages_post(request: Request) -> list[dict[str, Any]]:
            """DeepL's: the source languages, or with type=target the targets."""
            return await self._languages(request)

        used = responses(DeepLUsage, "deepl", 403, 429)

        @app.get("/v2/usage", response_model=None, responses=used)
        async def usage(request: Request) -> dict[str, int]:
            """DeepL's: the characters this key has had translated, and its quota
            (serve.char_quota)."""
            return await self._usage(request)

        @app.post("/v2/usage", response_model=None, responses=used)
        async def usage_post(request: Request) -> dict[str, int]:
            """DeepL's: the characters this key has had translated, and its quota
            (serve.char_quota)."""
            return await self._usage(request)

    async def _languages(self, request: Request) -> list[dict[str, Any]]:
        request.state.dialect = "deepl"
        body = {**(await _object(request)), **dict(request.query_params)}
        self.caller(request, body)
        kind = body.get("type", "source")
        if kind not in ("source", "target"):
            raise _bad(f"type: {kind!r} is not source or target")
        return self.languages(kind)

    async def _usage(self, request: Request) -> dict[str, int]:
        request.state.dialect = "deepl"
        caller = self.caller(request, await _object(request))
        used, quota = self.pipeline.limits.usage(caller)
        return {"character_count": used, "character_limit": quota or UNLIMITED}


async def _object(request: Request) -> dict[str, Any]:
    body = (
        await fields(request)
        if request.method == "POST" or request.headers.get("content-type")
        else {}
    )
    if not isinstance(body, dict):
        raise _bad("the body must be a JSON object or a form")
    return body


def _texts(body: dict[str, Any]) -> list[str]:
    text = body.get("text")
    texts = [text] if isinstance(text, str) else text
    if not texts or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise _bad("text: give one or more texts to translate (a string or a list of strings)")
    return texts


def _code(body: dict[str, Any], name: str, required: bool = True) -> str:
    code = body.get(name)
    if code is None or code == "":
        if required:
            raise _bad(f"{name}: missing; give a language code such as DE or EN-GB")
        return ""
    if not isinstance(code, str) or not code.replace("-", "").replace("_", "").isalnum():
        raise _bad(f"{name}: {code!r} is not a language code; give one such as DE or EN-GB")
    return code


def _lines_apart(text: str) -> str:
    """split_sentences "1": every line break a paragraph break of the text type (which keeps its
    breaks as they were and never writes one inside a paragraph), undone in the translation."""
    return text.replace("\n", "\n\n")


def _preserved(source: str, translation: str) -> str:
    """preserve_formatting: the translation keeps the source's case at its start and its lack of
    a sentence end (a model corrects both: "hello" -> "Hallo.")."""
    if not source or not translation:
        return translation
    if source[0].islower() and translation[0].isupper():
        translation = translation[0].lower() + translation[1:]
    if source.rstrip()[-1:] not in ENDS and translation.rstrip()[-1:] in ENDS:
        translation = translation.rstrip()[:-1]
    return translation
