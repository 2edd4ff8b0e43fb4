"""The request bodies. The JSON API's are strict: a field of the wrong type is refused, not
coerced ("5" is not a beam), and an unknown field is an error, not silently ignored.
LibreTranslate's (libretranslate.py) is as lenient as LibreTranslate."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] = Field(description="the lines to translate; a single string is one line")
    beam: int | None = Field(None, ge=1, description="beam size; the checkpoint's own when absent")
    nbest: int = Field(1, ge=1, description="with format full: the K best hypotheses of each line (K <= beam)")
    glossary: dict[str, str] | None = Field(None, description="source term -> target term the translation must use")
    prefix: str | list[str | None] | None = Field(
        None, description="target prefix per line (null for none); a single string with a single line"
    )
    format: Literal["text", "full"] = Field("text", description="text: strings; full: mt translate's JSONL objects")
    token_scores: bool = Field(False, description="with format full: each output piece and its log-probability")
    alignment: bool = Field(False, description="with format full: per output piece, the source piece attended most")


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str | list[str]
    target: str | list[str]
    normalize: bool = Field(False, description="divide each score by its token count, EOS included")
    format: Literal["text", "full"] = Field("text", description="text: scores; full: mt score's JSONL objects")


class AttentionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description="one source line")
    target: str | None = Field(None, description="the target to read; the model's own translation when absent")


class LibreTranslateRequest(BaseModel):
    """LibreTranslate's POST /translate, as JSON or a form. Not strict, as LibreTranslate is not: a
    form's values are strings ("3" alternatives), and fields it does not know are ignored."""

    model_config = ConfigDict(extra="ignore")

    q: str | list[str] = Field(description="the text to translate (one paragraph or document), or a list of them")
    source: str = Field(description="the source language's code, or auto to detect it")
    target: str = Field(description="the target language's code")
    format: str = Field(
        "text", description="text or html; mt also reads markdown, srt, vtt, po and lines (each q a document)"
    )
    alternatives: int = Field(0, description="this many more translations of each text, next best first")
    api_key: str | None = Field(None, description="required when the server runs with --api-keys")
