"""What `mt translate` writes for each input line: the best translation as text, or one JSON
object with its score, and on request the n-best list and each token's log-probability.

    {"translation": str, "score": float, "nbest": [{"translation": str, "score": float}, ...]}

`score` is what beam search ranks by: the sum of the natural-log probabilities of the output
tokens, EOS included, divided by length**alpha (--length-penalty; alpha 0 is the plain sum).
A blank input line gives {"translation": "", "score": null}.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from mt_cli.config import DecodeConfig, OutputConfig
from mt_cli.decode.search import Hypothesis
from mt_cli.errors import MtError

EOS_PIECE = "</s>"  # the piece named for EOS in "tokens": token_logprobs has one entry for it


def check_output(out: OutputConfig, cfg: DecodeConfig) -> None:
    check_nbest(out.nbest, cfg)


def check_nbest(nbest: int, cfg: DecodeConfig) -> None:
    """Refuse an n-best list longer than the search can find, in one line naming the fix (sampling
    draws as many as asked)."""
    if nbest < 1:
        raise MtError(f"output.nbest must be at least 1, not {nbest}")
    found = {"greedy": 1, "beam": cfg.beam}.get(cfg.search_method, nbest)
    if nbest > found:
        raise MtError(
            f"output.nbest {nbest} is larger than the beam ({found}): beam search finds at most beam "
            f"hypotheses; raise decode.beam to {nbest} or more, or lower output.nbest"
        )


def render(hyps: list[Hypothesis], blank: bool, out: OutputConfig, pieces: Callable[[list[int]], list[str]]) -> str:
    """One output line (without its newline) for one input line's hypotheses, best first."""
    if out.format == "text":
        return hyps[0].text
    return json.dumps(as_object(hyps, blank, out, pieces), ensure_ascii=False)


def as_object(
    hyps: list[Hypothesis], blank: bool, out: OutputConfig, pieces: Callable[[list[int]], list[str]]
) -> dict[str, Any]:
    """The JSON object of one input line (`--format jsonl`; the server's "full" format)."""
    if blank:
        return {"translation": "", "score": None}

    def entry(h: Hypothesis) -> dict[str, Any]:
        # A sentence that found no finished hypothesis scores -inf, which JSON cannot hold.
        d: dict[str, Any] = {"translation": h.text, "score": h.score if math.isfinite(h.score) else None}
        if out.token_scores:
            d.update(_token_fields(h, pieces))
        if out.alignment:
            d["alignment"] = h.alignment
        return d

    obj = entry(hyps[0])
    if out.nbest > 1:
        obj["nbest"] = [entry(h) for h in hyps[: out.nbest]]
    return obj


def render_score(h: Hypothesis, fmt: str, normalize: bool, pieces: Callable[[list[int]], list[str]]) -> str:
    """`mt score`'s line for one pair: the summed log-probability (divided by the token count, EOS
    included, with `normalize`), or a JSON object with the tokens and their log-probabilities."""
    if fmt == "text":
        return repr(pair_score(h, normalize))
    return json.dumps(score_object(h, normalize, pieces), ensure_ascii=False)


def pair_score(h: Hypothesis, normalize: bool) -> float:
    return h.score / len(h.token_logprobs) if normalize else h.score


def score_object(h: Hypothesis, normalize: bool, pieces: Callable[[list[int]], list[str]]) -> dict[str, Any]:
    """The JSON object of one scored pair (`mt score --format jsonl`; the server's "full" format)."""
    return {"score": pair_score(h, normalize), **_token_fields(h, pieces)}


def _token_fields(h: Hypothesis, pieces: Callable[[list[int]], list[str]]) -> dict[str, Any]:
    """The output pieces, EOS as `</s>` where it has a log-probability, and each one's log-probability."""
    eos = [EOS_PIECE][: len(h.token_logprobs) - len(h.tokens)]
    return {"tokens": pieces(h.tokens) + eos, "token_logprobs": h.token_logprobs}
