"""The direction a Translator translates in: the source and target languages as given, and the
tokens that tell them to the model, for every line or, with source "auto", for each line the
language identified in it (data/language_id.py)."""

from __future__ import annotations

from collections.abc import Sequence

from mt_cli.config import ModelConfig
from mt_cli.data.language_id import LanguageIdentifier
from mt_cli.data.language_tokens import LanguageTokens
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.errors import MtError

AUTO = "auto"


class Direction:
    """(source, target) as given ("" for not given; source "auto": identified per line), for a
    model (its tokenizer, and its config's recorded languages). Tokens are worked out when first
    needed and kept, per source language."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        model: ModelConfig,
        source: str = "",
        target: str = "",
        identifier: LanguageIdentifier | None = None,
    ) -> None:
        self.tokenizer, self.model, self.source, self.target = tokenizer, model, source, target
        self._tokens: dict[str, LanguageTokens] = {}
        self._identifier = identifier

    def but(self, source: str | None, target: str | None) -> Direction:
        """This direction with the given languages changed (None keeps one), checked now: a language
        the model lacks, or one it needs and is not given, is refused here, not at the first line.
        """
        new = Direction(
            self.tokenizer,
            self.model,
            self.source if source is None else source,
            self.target if target is None else target,
            self._identifier,
        )
        if (new.source, new.target) != ("", ""):
            new.tokens()
        return new

    def tokens(self, source: str | None = None) -> LanguageTokens:
        """The tokens for the given source language (None: this direction's own; for "auto", the
        first the model has, which serves where only the target's tokens matter)."""
        source = self.source if source is None else source
        source = self.sources()[0] if source == AUTO else source
        if source not in self._tokens:
            target = self.target
            if not self.tokenizer.languages()[1] and target and target in self.model.target_langs:
                target = ""  # a model of one target, told the language it writes: nothing to add
            told = bool(self.tokenizer.languages()[0])  # a model told its source (M2M100, NLLB)
            self._tokens[source] = self.tokenizer.language_tokens(source if told else "", target)
        return self._tokens[source]

    def for_lines(
        self, lines: Sequence[str]
    ) -> tuple[LanguageTokens | list[LanguageTokens], list[str] | None]:
        """Each line's tokens: the direction's; for source "auto" those of the language identified
        in the line, with the identified codes."""
        if self.source != AUTO:
            return self.tokens(), None
        codes = self.identifier().best(lines)
        return [self.tokens(c) for c in codes], codes

    def sources(self) -> list[str]:
        """The languages "auto" chooses among: those the model is told, else those it records."""
        codes = self.tokenizer.languages()[0] or list(self.model.source_langs)
        if not codes:
            raise MtError(
                "source language auto: the model records no source languages to choose among; "
                "name the language (source_lang de)"
            )
        return codes

    def identifier(self) -> LanguageIdentifier:
        if self._identifier is None or self._identifier.codes != self.sources():
            self._identifier = LanguageIdentifier(self.sources())
        return self._identifier

    def document_language(self, text: str) -> str:
        """The language a document's sentences are split by: the source, or the one identified in
        its beginning; "" when none is known."""
        if self.source == AUTO:
            return self.identifier().best([text[:2000]])[0]
        return self.source or next(iter(self.model.source_langs), "")
