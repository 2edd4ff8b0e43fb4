"""What search gives and takes: the model contract, hypotheses, requests, one beam step's choice,
and the JSON objects of hypotheses that `mt translate --format jsonl` and the server write:

    {"translation": str, "score": float, "nbest": [{"translation": str, "score": float}, ...]}

`score` is what beam search ranks by: the sum of the natural-log probabilities of the output
tokens, EOS included, divided by length**alpha (decode.length_penalty; alpha 0 is the plain sum).
A blank input line gives {"translation": "", "score": null}.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from torch import Tensor, nn

from mt_cli.config import ModelConfig, OutputConfig


class Searchable(Protocol):
    """What search and scoring need of a model: a Transformer, or an Ensemble of them."""

    cfg: ModelConfig
    start_token: int
    training: bool

    def encode(self, src: Tensor, src_mask: Tensor) -> Any: ...

    def decode(
        self,
        tgt: Tensor,
        memory: Any,
        src_mask: Tensor | None,
        cache: Any = None,
        vocab: Tensor | None = None,
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
    # per output token (EOS too): the source token attended most
    alignment: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Request:
    """One sentence as search takes it, built and checked once (decode/request.py): its source ids
    (ending in EOS), target ids it must start with, target terms (id sequences) it must contain,
    the key its random draws are seeded by (its line), and target ids the decoder reads after its
    start token and before the output (an M2M100 or NLLB model's target language)."""

    src: tuple[int, ...] = ()
    prefix: tuple[int, ...] = ()
    constraints: tuple[tuple[int, ...], ...] = ()
    key: int = 0
    start: tuple[int, ...] = ()
    source_lang: str = ""  # the language detected for this line (source "auto")


@dataclass
class Choice:
    """One step's outcome for the n running sentences: the candidates that end here, as (sentence
    row, beam, cumulative score, EOS log-probability), and the K that go on, (n, K) each."""

    ended: list[tuple[int, int, float, float]]
    scores: Tensor  # cumulative log-probabilities of the K that go on
    beam: Tensor  # which of the sentence's beams each extends
    tok: Tensor  # the token it adds
    lp: Tensor  # that token's own log-probability


EOS_PIECE = "</s>"  # the piece named for EOS in "tokens": token_logprobs has one entry for it


def as_object(
    hyps: list[Hypothesis],
    blank: bool,
    out: OutputConfig,
    pieces: Callable[[list[int]], list[str]],
    source_lang: str = "",
) -> dict[str, Any]:
    """The JSON object of one input line (`--format jsonl`; the server's "full" format), with the
    language identified in it where the source was "auto"."""
    if blank:
        return {"translation": "", "score": None}

    def entry(h: Hypothesis) -> dict[str, Any]:
        # A sentence that found no finished hypothesis scores -inf, which JSON cannot hold.
        d: dict[str, Any] = {
            "translation": h.text,
            "score": h.score if math.isfinite(h.score) else None,
        }
        if out.token_scores:
            d.update(_token_fields(h, pieces))
        if out.alignment:
            d["alignment"] = h.alignment
        return d

    obj = entry(hyps[0])
    if source_lang:
        obj["source_lang"] = source_lang
    if out.nbest > 1:
        obj["nbest"] = [entry(h) for h in hyps[: out.nbest]]
    return obj


def pair_score(h: Hypothesis, normalize: bool) -> float:
    return h.score / len(h.token_logprobs) if normalize else h.score


def score_object(
    h: Hypothesis, normalize: bool, pieces: Callable[[list[int]], list[str]]
) -> dict[str, Any]:
    """The JSON object of one scored pair (`mt score --format jsonl`; the server's "full"
    format)."""
    return {"score": pair_score(h, normalize), **_token_fields(h, pieces)}


def _token_fields(h: Hypothesis, pieces: Callable[[list[int]], list[str]]) -> dict[str, Any]:
    """The output pieces, EOS as `</s>` where it has a log-probability, and each one's
    log-probability."""
    eos = [EOS_PIECE][: len(h.token_logprobs) - len(h.tokens)]
    return {"tokens": pieces(h.tokens) + eos, "token_logprobs": h.token_logprobs}
