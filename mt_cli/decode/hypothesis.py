"""What search gives and takes: the model contract, hypotheses, requests, one beam step's choice."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from torch import Tensor, nn

from mt_cli.config import ModelConfig


class Searchable(Protocol):
    """What search and scoring need of a model: a Transformer, or an Ensemble of them."""

    cfg: ModelConfig
    start_token: int
    training: bool

    def encode(self, src: Tensor, src_mask: Tensor) -> Any: ...

    def decode(
        self, tgt: Tensor, memory: Any, src_mask: Tensor | None, cache: Any = None, vocab: Tensor | None = None
    ) -> tuple[Tensor, Any]: ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...

    def eval(self) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...


@dataclass(frozen=True)
class Hypothesis:
    """One translation of one sentence. `score` is the length-normalised sum of `token_logprobs`
    (natural-log probabilities of each output token, EOS included): what beam search ranks by."""

    tokens: list[int]  # output ids, without EOS
    score: float
    token_logprobs: list[float] = field(default_factory=list)
    text: str = ""  # filled in by the Translator, which holds the tokenizer
    alignment: list[int] = field(default_factory=list)  # per output token (EOS too): the source token attended most


@dataclass(frozen=True)
class Request:
    """What one sentence asks of search besides the config: target ids it must start with, target
    terms (id sequences) it must contain, and the key its random draws are seeded by (its line)."""

    prefix: tuple[int, ...] = ()
    constraints: tuple[tuple[int, ...], ...] = ()
    key: int = 0


@dataclass
class Choice:
    """One step's outcome for the n running sentences: the candidates that end here, as
    (sentence row, beam, cumulative score, EOS log-probability), and the K that go on, (n, K) each."""

    ended: list[tuple[int, int, float, float]]
    scores: Tensor  # cumulative log-probabilities of the K that go on
    beam: Tensor  # which of the sentence's beams each extends
    tok: Tensor  # the token it adds
    lp: Tensor  # that token's own log-probability
