"""What /openapi.json says of each route besides its bodies' shapes (schemas.py): each status
every API answers and why, limits included (limits.LIMITS states them once), and each POST
route's request body with this server's limits (they come from ServeConfig, so the document is
built per server)."""

from __future__ import annotations

import copy
from typing import Any, Literal

from mt_cli.config import ServeConfig
from mt_cli.documents import EXTENSIONS
from mt_cli.serve.limits import described
from mt_cli.serve.schemas import (
    AttentionRequest,
    DeepLError,
    DeepLRequest,
    DetectRequest,
    ErrorBody,
    LibreTranslateError,
    LibreTranslateRequest,
    ScoreRequest,
    TranslateRequest,
)

# Why each status, on each API, besides a limit (limits.LIMITS adds those).
NATIVE = {
    400: "the body is not JSON (or not UTF-8)",
    422: (
        "a field of the wrong type or value, an unknown field, or a request the model "
        "cannot take (see the fields)"
    ),
    500: "decoding failed; only this request's batch failed",
    503: "the model is loading, or the queue is full (serve.max_queue_lines); with Retry-After",
}
LIBRE = {
    400: "a request LibreTranslate refuses: a missing or malformed field, a pair not served, a "
    "document that does not parse",
    404: "no such translated file (they are kept 30 minutes)",
    429: "the queue is full; with Retry-After",
    500: "translation failed (or, on /detect, lingua is not installed)",
    503: "the model is loading",
}

DEEPL = {
    400: "a field missing or malformed, a language not served, formality a language lacks",
    429: "the queue is full; with Retry-After",
    500: "translation failed",
    503: "the model is loading",
}


def _with_limits(table: dict[int, str], dialect: str) -> dict[int, str]:
    found = dict(table)
    for status, text in described(dialect).items():
        found[status] = f"{found[status]}; {text}" if status in found else text
    return found


NATIVE, LIBRE = _with_limits(NATIVE, "native"), _with_limits(LIBRE, "libretranslate")
DEEPL = _with_limits(DEEPL, "deepl")
Api = Literal["native", "libretranslate", "deepl", "both"]
APIS: dict[str, list[tuple[str, dict[int, str], Any]]] = {  # each API's statuses and error body
    "native": [("", NATIVE, ErrorBody)],
    "libretranslate": [("", LIBRE, LibreTranslateError)],
    "deepl": [("", DEEPL, DeepLError)],
    "both": [("JSON API: ", NATIVE, ErrorBody), ("LibreTranslate: ", LIBRE, LibreTranslateError)],
}
FORM, MULTIPART = "application/x-www-form-urlencoded", "multipart/form-data"
# an example file name (a client sends its own)
NAMED = 'form-data; name="file"; filename="document.txt"'
RETRY_AFTER = {
    "Retry-After": {"required": True, "schema": {"type": "integer"}, "description": "seconds"}
}


def responses(
    ok: Any, api: Api, *statuses: int, retry_after: bool = True
) -> dict[int | str, dict[str, Any]]:
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
    bodies themselves), with this server's limits: the lines, the beam, LibreTranslate's characters.
    """
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
                "description": (
                    f"UTF-8 text named {', '.join(['.txt', *EXTENSIONS])} (its type), else 400"
                ),
            },
            "source": libre["properties"]["source"],
            "target": libre["properties"]["target"],
            "api_key": libre["properties"]["api_key"],
        },
    }
    form = _form(libre)  # LibreTranslate's web page sends multipart forms, Weblate url-encoded ones
    named = {
        "file": {
            "headers": {"Content-Disposition": {"schema": {"type": "string"}, "example": NAMED}}
        }
    }
    return {
        "/translate": _body(
            {"application/json": {"oneOf": [translate, libre]}, FORM: form, MULTIPART: form}
        ),
        "/score": _body({"application/json": score}),
        "/attention": _body({"application/json": AttentionRequest.model_json_schema()}),
        "/detect": _body(
            {"application/json": detect, FORM: _form(detect), MULTIPART: _form(detect)}
        ),
        "/translate_file": _body({MULTIPART: upload}, encoding=named),
    }


def deepl_bodies(cfg: ServeConfig) -> dict[str, dict[str, Any]]:
    """DeepL's request bodies, with this server's limits on the texts."""
    translate = DeepLRequest.model_json_schema()
    translate["properties"]["text"].update(minItems=1, maxItems=cfg.max_request_lines)
    translate["properties"]["text"]["items"]["maxLength"] = cfg.max_chars
    # A form's values are strings: none is null, and the text may come once as a string.
    form_fields = {k: _not_null(v) for k, v in translate["properties"].items()}
    form_fields["text"] = {
        "anyOf": [{"type": "string", "maxLength": cfg.max_chars}, translate["properties"]["text"]]
    }
    form = {**translate, "properties": form_fields}
    kind: dict[str, Any] = {
        "type": "string",
        "enum": ["source", "target"],
        "description": "source (default)",
    }
    languages = {"type": "object", "properties": {"type": kind}}
    query = {"parameters": [{"name": "type", "in": "query", "required": False, "schema": kind}]}
    return {
        "translate": _body({"application/json": translate, FORM: form}),
        "languages_query": query,
        "languages": {
            "requestBody": {
                **_body({"application/json": languages, FORM: languages})["requestBody"],
                "required": False,
            }
        },
    }


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    branches = [b for b in schema.get("anyOf", []) if b.get("type") != "null"]
    if not branches:
        return schema
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
    return {**rest, **branches[0]} if len(branches) == 1 else {**rest, "anyOf": branches}


def _body(
    content: dict[str, dict[str, Any]], encoding: dict[str, Any] | None = None
) -> dict[str, Any]:
    found = {
        kind: {"schema": s, **({"encoding": encoding} if encoding else {})}
        for kind, s in content.items()
    }
    return {"requestBody": {"required": True, "content": found}}


def _form(schema: dict[str, Any]) -> dict[str, Any]:
    """A form's q: a list of one empty q is sent as no q at all (q=), which is refused as
    missing."""
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
            branch.update(
                {k: v for k, v in limits.items() if v and (k != "minLength" or branch is string)}
            )
