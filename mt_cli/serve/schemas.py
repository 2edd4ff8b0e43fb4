"""The request and response bodies, and what the OpenAPI document (/openapi.json) says of each route.

The JSON API's requests are strict: a field of the wrong type is refused, not coerced ("5" is not
a beam), and an unknown field is an error, not silently ignored. LibreTranslate's is as lenient as
LibreTranslate. The document states every rule a request body can be checked against on its own,
the server's limits included (they come from ServeConfig, so the request schemas are built per
server); what depends on the model (its beam, its vocabulary, its languages), on a document's own
syntax, or on two lists' lengths, JSON Schema cannot state, and the fields' descriptions do.
Errors are one JSON object: {"error", "field"} on the JSON API, {"error"} on LibreTranslate's.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.config import JsonDict

from mt_cli.config import ServeConfig
from mt_cli.documents import EXTENSIONS, KINDS

# A string that str.strip() leaves non-empty: one character Python does not count as whitespace
# (ECMA's \s differs: it lacks \x1c-\x1f and \x85, and has \ufeff). None lies above U+3000.
SPACES = "".join(f"\\u{c:04x}" for c in range(0x3001) if chr(c).isspace())
NOT_BLANK = f"[^{SPACES}]"
# nbest > 1, token_scores and alignment need "format": "full": one or the other holds.
FULL_ONLY: JsonDict = {
    "anyOf": [
        {"required": ["format"], "properties": {"format": {"const": "full"}}},
        {"properties": {"nbest": {"const": 1}, "token_scores": {"const": False}, "alignment": {"const": False}}},
    ]
}


def _terms(schema: dict[str, Any]) -> None:
    terms = schema["anyOf"][0]
    terms["propertyNames"] = {"pattern": NOT_BLANK}
    terms["additionalProperties"]["pattern"] = NOT_BLANK


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=FULL_ONLY)

    text: str | list[str] = Field(description="the lines to translate; a single string is one line")
    beam: int | None = Field(None, ge=1, description="beam size; the checkpoint's own when absent")
    nbest: int = Field(
        1,
        ge=1,
        description='with "format": "full": the K best hypotheses of each line; K <= the beam (the request\'s '
        "or the checkpoint's), else 422",
    )
    glossary: dict[str, str] | None = Field(
        None,
        json_schema_extra=_terms,
        description="source term -> target term the translation must use; both "
        "non-blank; a term that applies to a line needs beam search (beam 2 or more) and a target term the model's "
        "vocabulary can spell, else 422",
    )
    prefix: str | list[str | None] | None = Field(
        None,
        description="target prefix per line (null for none), one per line of text, else 422; a single string "
        "with a single line",
    )
    format: Literal["text", "full"] = Field("text", description="text: strings; full: mt translate's JSONL objects")
    token_scores: bool = Field(False, description='with "format": "full": each output piece and its log-probability')
    alignment: bool = Field(
        False, description='with "format": "full": per output piece, the source piece attended most'
    )
    source_lang: str | None = Field(
        None,
        description="the language of the text, for a model told it (M2M100, NLLB: deu_Latn or de); the server's"
        " own (--source-lang) when absent",
    )
    target_lang: str | None = Field(
        None,
        description="the language to write, for a model of several targets; the server's own (--target-lang)"
        " when absent; one the model lacks is a 422 naming its nearest",
    )


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str | list[str] = Field(description="the source lines; a single string is one line")
    target: str | list[str] = Field(description="one target per source line, else 422")
    normalize: bool = Field(False, description="divide each score by its token count, EOS included")
    format: Literal["text", "full"] = Field("text", description="text: scores; full: mt score's JSONL objects")


class AttentionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description="one source line")
    target: str | None = Field(None, description="the target to read; the model's own translation when absent")


DIGITS = re.compile(r"[+-]?[0-9]+")


def _int_or_digits(schema: dict[str, Any]) -> None:
    del schema["type"]
    schema["anyOf"] = [{"type": "integer"}, {"type": "string", "pattern": f"^{DIGITS.pattern}$"}]


class LibreTranslateRequest(BaseModel):
    """LibreTranslate's POST /translate, as JSON or a form. Not strict, as LibreTranslate is not: a
    form's values are strings ("3" alternatives), and fields it does not know are ignored."""

    model_config = ConfigDict(extra="ignore")

    q: str | list[str] = Field(description="the text to translate (one paragraph or document), or a list of them")
    source: str = Field(description="the source language's code (one /languages lists, else 400), or auto to detect")
    target: str = Field(description="the target language's code (one /languages lists for the source, else 400)")
    format: str = Field(
        "text",
        json_schema_extra={"enum": list(KINDS)},
        description="text or html; mt also reads markdown, srt, vtt, po and lines (each q a document; one that does "
        "not parse as its format is 400)",
    )
    alternatives: int = Field(
        0, json_schema_extra=_int_or_digits, description="this many more translations of each text, next best first"
    )
    api_key: str | None = Field(None, description="required when the server runs with --api-keys, else 403")

    @field_validator("alternatives", mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        """A number, or decimal digits as a form sends them; not true or "1_000", which pydantic would take."""
        if isinstance(value, bool) or (isinstance(value, str) and not DIGITS.fullmatch(value)):
            raise ValueError("not a number")
        return value


class DetectRequest(BaseModel):
    """POST /detect's fields, as JSON or a form (for the document: the route reads them itself)."""

    q: str | list[str] = Field(description="the text to identify, or a list of texts judged together")
    api_key: Any = Field(
        None, description="one of the keys when the server runs with --api-keys, else 403; otherwise any value, ignored"
    )


class ErrorBody(BaseModel):
    """The JSON API's refusals and failures."""

    error: str = Field(description="what was wrong, naming the field or the limit and its option")
    field: str | None = Field(description="the request field at fault (text.0: text's first line); null for none")


class LibreTranslateError(BaseModel):
    """LibreTranslate's refusals and failures, in its shape."""

    error: str = Field(description="what was wrong, naming the field, the limit or the language pair")


class Translations(BaseModel):
    translations: list[str | dict[str, Any]] = Field(
        description="one per line, in order; with format full mt translate's JSONL object of each line"
    )


class Scores(BaseModel):
    scores: list[float | dict[str, Any]] = Field(description="one per pair; with format full mt score's JSONL object")


class AttentionMap(BaseModel):
    source: list[str] = Field(description="the source pieces")
    target: list[str] = Field(description="the output pieces, </s> last")
    translation: str
    layers: list[list[list[float]]] = Field(description="per layer, a row per target piece over the source pieces")


class ServedLanguages(BaseModel):
    source: list[str]
    target: list[str]


class Health(BaseModel):
    status: Literal["ok", "loading", "failed"]
    model: str = Field(description="the checkpoint's file name (several: an ensemble)")
    languages: ServedLanguages | None = Field(None, description="what it translates, once loaded")
    uptime_s: float | None = None
    threads: int | None = Field(None, description="the CPU threads decoding uses")
    error: str | None = Field(None, description="why loading failed")


class DetectedLanguage(BaseModel):
    confidence: float = Field(description="0 to 100")
    language: str


class Translated(BaseModel):
    translatedText: str | list[str] = Field(description="a list for a list of q")
    alternatives: list[str] | list[list[str]] = Field(default_factory=list, description="when asked")
    detectedLanguage: DetectedLanguage | list[DetectedLanguage] = Field(
        default_factory=list, description='for source "auto"'
    )


class Language(BaseModel):
    code: str
    name: str
    targets: list[str]


class TranslatedFile(BaseModel):
    translatedFileUrl: str = Field(description="GET it for the translated file (kept 30 minutes)")


class FrontendSettings(BaseModel):
    charLimit: int
    frontendTimeout: int
    apiKeys: bool
    keyRequired: bool
    suggestions: bool
    filesTranslation: bool
    supportedFilesFormat: list[str]
    language: dict[str, dict[str, str]]


# Why each status, on each API (the JSON API's 503 also means a full queue; LibreTranslate's says 429).
NATIVE = {
    400: "the body is not JSON (or not UTF-8)",
    413: "over a limit: the body (--max-body-bytes), the lines (--max-request-lines), the characters "
    "(--char-limit) or characters x beam (--max-request-cost)",
    422: "a field of the wrong type or value, an unknown field, or a request the model cannot take (see the fields)",
    429: "too many requests from this client (--req-limit, or its API key's limit); with Retry-After",
    500: "decoding failed; only this request's batch failed",
    503: "the model is loading, or the queue is full (--max-queue-lines); with Retry-After",
}
LIBRE = {
    400: "a request LibreTranslate refuses: a missing or malformed field, a pair not served, a text over a limit, "
    "a document that does not parse",
    403: "api_key missing or wrong, under --api-keys",
    404: "no such translated file (they are kept 30 minutes)",
    413: "the body is over --max-body-bytes, or a request over --char-limit or --max-request-cost",
    429: "the queue is full, or too many requests from this client (--req-limit); with Retry-After",
    500: "translation failed (or, on /detect, lingua is not installed)",
    503: "the model is loading",
}
Api = Literal["native", "libretranslate", "both"]
APIS: dict[str, list[tuple[str, dict[int, str], Any]]] = {  # each API's statuses and error body
    "native": [("", NATIVE, ErrorBody)],
    "libretranslate": [("", LIBRE, LibreTranslateError)],
    "both": [("JSON API: ", NATIVE, ErrorBody), ("LibreTranslate: ", LIBRE, LibreTranslateError)],
}
FORM, MULTIPART = "application/x-www-form-urlencoded", "multipart/form-data"
NAMED = 'form-data; name="file"; filename="document.txt"'  # an example file name (a client sends its own)
RETRY_AFTER = {"Retry-After": {"required": True, "schema": {"type": "integer"}, "description": "seconds"}}


def responses(ok: Any, api: Api, *statuses: int, retry_after: bool = True) -> dict[int | str, dict[str, Any]]:
    """A route's `responses`: its 200 body, and each error status with the error body of the API
    that answers it (on /translate, which serves both, of either); 429 and 503 say when to retry
    (not /health's 503, which reports)."""
    found: dict[int | str, dict[str, Any]] = {200: {"model": ok}} if ok is not None else {}
    for status in statuses:
        answering = [(label, table, shape) for label, table, shape in APIS[api] if status in table]
        shapes = [shape for _, _, shape in answering]
        found[status] = {
            "model": shapes[0] if len(shapes) == 1 else shapes[0] | shapes[1],
            "description": "; ".join(label + table[status] for label, table, _ in answering),
        }
        if retry_after and status in (429, 503):
            found[status]["headers"] = RETRY_AFTER
    return found


def request_bodies(cfg: ServeConfig) -> dict[str, dict[str, Any]]:
    """Each POST route's request body for the document (its `openapi_extra`: the routes read their
    bodies themselves), with this server's limits: the lines, the beam, LibreTranslate's characters."""
    translate = TranslateRequest.model_json_schema()
    _texts(translate["properties"]["text"], cfg.max_request_lines)
    translate["properties"]["beam"]["anyOf"][0]["maximum"] = cfg.max_beam
    translate["properties"]["nbest"]["maximum"] = cfg.max_beam
    score = ScoreRequest.model_json_schema()
    for name in ("source", "target"):
        _texts(score["properties"][name], cfg.max_request_lines)
    libre = LibreTranslateRequest.model_json_schema()
    _texts(libre["properties"]["q"], cfg.max_request_lines, cfg.max_chars, least=1)
    for name in ("source", "target"):
        libre["properties"][name]["minLength"] = 1
    number, digits = libre["properties"]["alternatives"]["anyOf"]
    number["maximum"] = cfg.max_beam - 1  # the widened beam holds the best and the alternatives
    digits["pattern"] = f"^(-[0-9]+|\\+?0*({'|'.join(map(str, range(cfg.max_beam)))}))$"
    detect = DetectRequest.model_json_schema()
    _texts(detect["properties"]["q"], 0, least=1)
    upload = {
        "type": "object",
        "required": ["file", "source", "target"],
        "properties": {
            "file": {
                "type": "string",
                "format": "binary",
                "description": f"UTF-8 text named {', '.join(['.txt', *EXTENSIONS])} (its type), else 400",
            },
            "source": libre["properties"]["source"],
            "target": libre["properties"]["target"],
            "api_key": libre["properties"]["api_key"],
        },
    }
    form = _form(libre)  # LibreTranslate's web page sends multipart forms, Weblate url-encoded ones
    named = {"file": {"headers": {"Content-Disposition": {"schema": {"type": "string"}, "example": NAMED}}}}
    return {
        "/translate": _body({"application/json": {"oneOf": [translate, libre]}, FORM: form, MULTIPART: form}),
        "/score": _body({"application/json": score}),
        "/attention": _body({"application/json": AttentionRequest.model_json_schema()}),
        "/detect": _body({"application/json": detect, FORM: _form(detect), MULTIPART: _form(detect)}),
        "/translate_file": _body({MULTIPART: upload}, encoding=named),
    }


def _body(content: dict[str, dict[str, Any]], encoding: dict[str, Any] | None = None) -> dict[str, Any]:
    found = {kind: {"schema": s, **({"encoding": encoding} if encoding else {})} for kind, s in content.items()}
    return {"requestBody": {"required": True, "content": found}}


def _form(schema: dict[str, Any]) -> dict[str, Any]:
    """A form's q: a list of one empty q is sent as no q at all (q=), which is refused as missing."""
    q = copy.deepcopy(schema["properties"]["q"])
    array = next(branch for branch in q["anyOf"] if branch["type"] == "array")
    array.update({"if": {"maxItems": 1}, "then": {"items": {"minLength": 1}}})
    return {**schema, "properties": {**schema["properties"], "q": q}}


def _texts(field: dict[str, Any], lines: int, chars: int = 0, least: int = 0) -> None:
    """A `str | list[str]` field's limits: at most `lines` items (0: any), `chars` characters each
    (0: any), and at least `least` characters or items."""
    string, array = sorted(field["anyOf"], key=lambda branch: branch["type"] != "string")
    for limits, where in (
        ({"minLength": least, "maxLength": chars}, [string, array["items"]]),
        ({"minItems": least, "maxItems": lines}, [array]),
    ):
        for branch in where:
            branch.update({k: v for k, v in limits.items() if v and (k != "minLength" or branch is string)})
