"""The request and response bodies, and what the OpenAPI document (/openapi.json) says of each
route.

The JSON API's requests are strict: a field of the wrong type is refused, not coerced ("5" is not
a beam), and an unknown field is an error, not silently ignored. LibreTranslate's is as lenient as
LibreTranslate. The document states every rule a request body can be checked against on its own,
the server's limits included (they come from ServeConfig, so the request schemas are built per
server); what depends on the model (its beam, its vocabulary, its languages), on a document's own
syntax, or on two lists' lengths, JSON Schema cannot state, and the fields' descriptions do.
Errors are one JSON object: {"error", "field"} on the JSON API, {"error"} on LibreTranslate's.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.config import JsonDict

from mt_cli.config import language_help
from mt_cli.documents import TEXT_KINDS

# A string that str.strip() leaves non-empty: one character Python does not count as whitespace
# (ECMA's \s differs: it lacks \x1c-\x1f and \x85, and has \ufeff). None lies above U+3000.
SPACES = "".join(f"\\u{c:04x}" for c in range(0x3001) if chr(c).isspace())
NOT_BLANK = f"[^{SPACES}]"
# nbest > 1, token_scores and alignment need "format": "full" (OutputConfig.needs_objects), as the
# OpenAPI document states it: one or the other holds.
FULL_ONLY: JsonDict = {
    "anyOf": [
        {"required": ["format"], "properties": {"format": {"const": "full"}}},
        {
            "properties": {
                "nbest": {"const": 1},
                "token_scores": {"const": False},
                "alignment": {"const": False},
            }
        },
    ]
}


def _terms(schema: dict[str, Any]) -> None:
    terms = schema["anyOf"][0]
    terms["propertyNames"] = {"pattern": NOT_BLANK}
    terms["additionalProperties"]["pattern"] = NOT_BLANK


def _key() -> Any:
    return Field(
        None,
        description="one of the server's keys when it has them (serve.api_keys), else 403; or send "
        "it as an Authorization: Bearer header",
    )


def _language(side: str) -> Any:
    return Field(
        None, description=language_help(side, "to choose the model on a server of several")
    )


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=FULL_ONLY)

    text: str | list[str] = Field(description="the lines to translate; a single string is one line")
    beam: int | None = Field(None, ge=1, description="beam size; the checkpoint's own when absent")
    nbest: int = Field(
        1,
        ge=1,
        description='with "format": "full": the K best hypotheses of each line; K <= the beam '
        "(the request's "
        "or the checkpoint's), else 422",
    )
    glossary: dict[str, str] | None = Field(
        None,
        json_schema_extra=_terms,
        description="source term -> target term the translation must use; both non-blank; a term "
        "that applies to a line needs beam search (beam 2 or more) and a target term the model's "
        "vocabulary can spell, else 422",
    )
    prefix: str | list[str | None] | None = Field(
        None,
        description="target prefix per line (null for none), one per line of text, else 422; a "
        "single string with a single line",
    )
    format: Literal["text", "full"] = Field(
        "text", description="text: strings; full: mt translate's JSONL objects"
    )
    token_scores: bool = Field(
        False, description='with "format": "full": each output piece and its log-probability'
    )
    alignment: bool = Field(
        False, description='with "format": "full": per output piece, the source piece attended most'
    )
    source_lang: str | None = Field(
        None,
        description=language_help(
            "source",
            "the text's, for a model told it (M2M100, NLLB) or a server of several models; auto "
            "to detect; the server's own (serve.source_lang) when absent",
        ),
    )
    target_lang: str | None = Field(
        None,
        description=language_help(
            "target",
            "for a model of several targets or a server of several models; the server's own "
            "(serve.target_lang) when absent; one no model writes is a 422 naming what the "
            "server translates",
        ),
    )
    api_key: str | None = _key()


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str | list[str] = Field(description="the source lines; a single string is one line")
    target: str | list[str] = Field(description="one target per source line, else 422")
    normalize: bool = Field(False, description="divide each score by its token count, EOS included")
    format: Literal["text", "full"] = Field(
        "text", description="text: scores; full: mt score's JSONL objects"
    )
    source_lang: str | None = _language("source")
    target_lang: str | None = _language("target")
    api_key: str | None = _key()


class AttentionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description="one source line")
    target: str | None = Field(
        None, description="the target to read; the model's own translation when absent"
    )
    source_lang: str | None = _language("source")
    target_lang: str | None = _language("target")
    api_key: str | None = _key()


DIGITS = re.compile(r"[+-]?[0-9]+")


def _int_or_digits(schema: dict[str, Any]) -> None:
    del schema["type"]
    schema["anyOf"] = [{"type": "integer"}, {"type": "string", "pattern": f"^{DIGITS.pattern}$"}]


class LibreTranslateRequest(BaseModel):
    """LibreTranslate's POST /translate, as JSON or a form. Not strict, as LibreTranslate is not: a
    form's values are strings ("3" alternatives), and fields it does not know are ignored."""

    model_config = ConfigDict(extra="ignore")

    q: str | list[str] = Field(
        description="the text to translate (one paragraph or document), or a list of them"
    )
    source: str = Field(
        description="the source language's code (one /languages lists, else 400), or auto to detect"
    )
    target: str = Field(
        description="the target language's code (one /languages lists for the source, else 400)"
    )
    format: str = Field(
        "text",
        json_schema_extra={"enum": list(TEXT_KINDS)},
        description="text or html; mt also reads markdown, srt, vtt, po and lines (each q a "
        "document; one that does not parse as its format is 400)",
    )
    alternatives: int = Field(
        0,
        json_schema_extra=_int_or_digits,
        description="this many more translations of each text, next best first",
    )
    api_key: str | None = Field(
        None, description="required when the server has keys (serve.api_keys), else 403"
    )

    @field_validator("alternatives", mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        """A number, or decimal digits as a form sends them; not true or "1_000", which pydantic
        would take."""
        if isinstance(value, bool) or (isinstance(value, str) and not DIGITS.fullmatch(value)):
            raise ValueError("not a number")
        return value


class DetectRequest(BaseModel):
    """POST /detect's fields, as JSON or a form (for the document: the route reads them itself)."""

    q: str | list[str] = Field(
        description="the text to identify, or a list of texts judged together"
    )
    api_key: Any = Field(
        None,
        description=(
            "one of the keys when the server has them (serve.api_keys), else 403; "
            "otherwise any value, ignored"
        ),
    )


class ErrorBody(BaseModel):
    """The JSON API's refusals and failures."""

    error: str = Field(description="what was wrong, naming the field or the limit and its option")
    field: str | None = Field(
        description="the request field at fault (text.0: text's first line); null for none"
    )


class DeepLRequest(BaseModel):
    """DeepL's POST /v2/translate, as JSON or a form; DeepL's other fields are accepted and
    ignored."""

    model_config = ConfigDict(extra="allow")

    text: list[str] = Field(description="the texts to translate (a form: the field once per text)")
    target_lang: str = Field(
        description="a target /v2/languages?type=target lists (EN-GB, PT-BR, DE, ...), else 400"
    )
    source_lang: str | None = Field(
        None, description="a source /v2/languages lists; detected when absent"
    )
    split_sentences: Literal["0", "1", "nonewlines"] = Field(
        "1",
        description=(
            "1: at line breaks and sentence ends; nonewlines: sentence ends only; "
            "0: each line is one"
        ),
    )
    preserve_formatting: bool = Field(
        False, description="keep the source's case at the start and its lack of an end"
    )
    formality: Literal["default", "prefer_more", "prefer_less", "more", "less"] = Field(
        "default", description="more and less are refused (400): the models have no formality"
    )
    tag_handling: Literal["html", "xml"] | None = Field(
        None, description="translate each text as HTML, tags kept"
    )
    glossary_id: str | None = Field(
        None,
        description="a glossary of the server's (serve.glossaries: NAME.tsv as NAME), else 400",
    )


class DeepLTranslation(BaseModel):
    detected_source_language: str
    text: str
    billed_characters: int


class DeepLTranslations(BaseModel):
    translations: list[DeepLTranslation]


class DeepLLanguage(BaseModel):
    language: str
    name: str
    supports_formality: bool | None = Field(None, description="targets only: always false")


class DeepLUsage(BaseModel):
    character_count: int
    character_limit: int


class DeepLError(BaseModel):
    """DeepL's refusals and failures, in its shape."""

    message: str = Field(description="what was wrong, naming the field, the limit or the language")


class LibreTranslateError(BaseModel):
    """LibreTranslate's refusals and failures, in its shape."""

    error: str = Field(
        description="what was wrong, naming the field, the limit or the language pair"
    )


class Translations(BaseModel):
    translations: list[str | dict[str, Any]] = Field(
        description=(
            "one per line, in order; with format full mt translate's JSONL object of each line"
        )
    )


class Scores(BaseModel):
    scores: list[float | dict[str, Any]] = Field(
        description="one per pair; with format full mt score's JSONL object"
    )


class AttentionMap(BaseModel):
    source: list[str] = Field(description="the source pieces")
    target: list[str] = Field(description="the output pieces, </s> last")
    translation: str
    layers: list[list[list[float]]] = Field(
        description="per layer, a row per target piece over the source pieces"
    )


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
    alternatives: list[str] | list[list[str]] = Field(
        default_factory=list, description="when asked"
    )
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
