"""One translation request, whichever API it came by. The three dialects (the JSON API,
LibreTranslate's, DeepL's) each parse their body into a TextRequest and render its answer and its
errors in their own shape; between the two, limits (limits.py), routing to a model (models.py),
the cache and decoding (pipeline.py) read this one shape.

A request keeps the names its dialect gave its fields (`Names`), so that a refusal names the
field the client sent ("q", "text", "target_lang"), never a server option or a flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mt_cli.config import OutputConfig

LINES = "lines"  # the JSON API's kind: each text is one line, translated as `mt translate` does


@dataclass(frozen=True)
class Caller:
    """Who asks: the address, and the API key the request carried (None when it carried none)."""

    address: str
    key: str | None = None


@dataclass(frozen=True)
class Names:
    """The request's own names for what the server checks, as its dialect spells them."""

    texts: str = "text"
    beam: str = "beam"
    nbest: str = "nbest"
    source: str = "source_lang"
    target: str = "target_lang"
    key: str = "api_key"
    kind: str = "format"


@dataclass(frozen=True)
class TextRequest:
    texts: list[Any]  # str; bytes for an office file (documents.BINARY kinds)
    caller: Caller
    names: Names = Names()
    # "lines" (each text one line, with the JSON API's outputs), or a documents type (text, html,
    # markdown, srt, vtt, po, docx): each text one document, split into sentences and put back
    # together.
    kind: str = LINES
    source: str | None = None  # a language code, "auto" to detect, None: the model's own
    target: str | None = None
    beam: int | None = None  # None: the model's own
    nbest: int = 1  # hypotheses per text: the JSON API's nbest, LibreTranslate's alternatives + 1
    glossary: dict[str, str] | None = None
    prefixes: list[str | None] | None = None
    # lines: format, scores, alignment
    output: OutputConfig = field(default_factory=lambda: OutputConfig("text"))
    # an uploaded file (LibreTranslate's /translate_file): bounded by the body, not per text
    file: bool = False

    @property
    def chars(self) -> int:
        return sum(len(t) for t in self.texts)

    @property
    def plain(self) -> bool:
        """Asks for nothing but each text's best translation (or its alternatives): what a pivot
        through a third language and the cache can answer."""
        out = self.output
        return (
            self.prefixes is None
            and out.format == "text"
            and not out.token_scores
            and not out.alignment
        )
