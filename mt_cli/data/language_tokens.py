"""One translation direction of a model of several languages: the language tokens that tell the
model the direction (LanguageTokens), and a corpus of that direction encoded with them (Directed),
as fine-tuning and multilingual training read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mt_cli.data.tokenizer import Tokenizer


@dataclass(frozen=True)
class LanguageTokens:
    """How one direction is told to a model of several languages, as ids: before each source line
    (a target tag, <2de> or OPUS-MT's >>de<<; M2M100's and NLLB's source language), after its EOS
    (NLLB's legacy layout), and after the decoder's start token (M2M100's and NLLB's target
    language, which their decoder reads before the translation)."""

    source: tuple[int, ...] = ()
    source_end: tuple[int, ...] = ()
    start: tuple[int, ...] = ()
    tags: frozenset[int] = frozenset()  # target tags: a line that starts with one keeps its own

    def wrap(self, ids: list[int]) -> list[int]:
        """A source line's ids (ending in EOS) with the language tokens around them."""
        if self.source and not (ids and ids[0] in self.tags):
            ids = [*self.source, *ids]
        return [*ids, *self.source_end]

    @property
    def extra(self) -> int:
        """Positions the tokens take on the source side (a line's own tag aside)."""
        return len(self.source) + len(self.source_end)


class Encoder(Protocol):
    """What encodes a corpus for training (a Tokenizer, or Directed) and names how (its state)."""

    def encode_src(self, lines: list[str]) -> list[list[int]]: ...

    def encode_tgt(self, lines: list[str]) -> list[list[int]]: ...

    def to_state(self) -> dict[str, Any]: ...


class Directed:
    """A tokenizer encoding one direction's pairs for training: each source line with its language
    tokens, each target after the decoder's start ids (M2M100's and NLLB's target language), which
    training then reads after the start token and learns to predict, as transformers' fine-tuning
    does. Encodes like a Tokenizer (encode_src, encode_tgt), and its state names the tokens, so
    that a tokenized cache of one direction is never read as another's."""

    def __init__(self, tokenizer: Tokenizer, languages: LanguageTokens) -> None:
        self.tokenizer, self.languages = tokenizer, languages

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        return [self.languages.wrap(ids) for ids in self.tokenizer.encode_src(lines)]

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return [[*self.languages.start, *ids] for ids in self.tokenizer.encode_tgt(lines)]

    def to_state(self) -> dict[str, Any]:
        lt = self.languages
        return {
            **self.tokenizer.to_state(),
            "direction": [list(lt.source), list(lt.source_end), list(lt.start)],
        }
