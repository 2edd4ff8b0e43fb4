"""Rules on one decoding step's log-probabilities, applied in one list by both searches.

A processor takes the step's log-probabilities (N, V), one row per running hypothesis, over every
output token (PAD is never one: its row is -inf before the softmax, as CTranslate2 drops it), and
returns them changed (in place is allowed). Search then picks from what the processors leave.
`NoRepeatNgram` (decode.no_repeat_ngram) and `ForcePrefix` (a target prefix per sentence) are
added by search when asked for; terminology is not a processor but a choice of candidates
(constraints.py), since it changes which hypotheses survive, not what one step may pick.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from mt_cli.data.tokenizer import EOS, PAD


@dataclass(frozen=True)
class Step:
    """What a processor may look at: the step index (0 for the first output token), whether each
    row has reached its sentence's length limit (N,), each row's output so far (N, t), and which
    sentence of the batch each row belongs to (N,)."""

    t: int
    at_limit: Tensor
    history: Tensor | None = None
    rows: Tensor | None = None


class Processor(Protocol):
    def __call__(self, lprobs: Tensor, step: Step) -> Tensor: ...


def end_at_limit(lprobs: Tensor, step: Step) -> Tensor:
    """Rows at their length limit may only end: all but EOS to -inf, in place. EOS keeps its own
    log-probability (over every token but PAD), not 0, so scores stay comparable."""
    if bool(step.at_limit.any()):
        eos = lprobs[:, EOS].clone()
        lprobs[step.at_limit] = float("-inf")
        lprobs[:, EOS] = eos
    return lprobs


class NoRepeatNgram:
    """No token n-gram occurs twice in a hypothesis (fairseq's and Joey NMT's rule): a token that
    would complete an n-gram the row already holds is set to -inf."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, lprobs: Tensor, step: Step) -> Tensor:
        h, n = step.history, self.n
        if h is None or h.size(1) < n:  # no complete n-gram yet, so nothing can repeat
            return lprobs
        windows = h.unfold(1, n, 1)  # (N, t - n + 1, n): every n-gram so far
        # its first n-1 = our last n-1
        seen = (windows[:, :, :-1] == h[:, None, h.size(1) - n + 1 :]).all(dim=-1)
        # (N, V): -inf at each token that would repeat an n-gram
        ban = torch.zeros_like(lprobs).scatter_reduce_(
            1, windows[:, :, -1], torch.where(seen, float("-inf"), 0.0), reduce="amin"
        )
        return lprobs.add_(ban)


class ForcePrefix:
    """A sentence with a target prefix takes its t-th token at step t while the prefix lasts: every
    other token of its rows goes to -inf, the forced one keeps its own log-probability, so the
    hypothesis is scored as the model scores that prefix and search continues from it."""

    def __init__(self, prefixes: list[list[int]], device: torch.device) -> None:
        width = max(1, max(len(p) for p in prefixes))
        self.ids = torch.full((len(prefixes), width), PAD, dtype=torch.long)  # (B, P)
        for i, p in enumerate(prefixes):
            self.ids[i, : len(p)] = torch.tensor(p, dtype=torch.long)
        self.ids = self.ids.to(device)
        self.lens = torch.tensor([len(p) for p in prefixes], device=device)  # (B,)

    def __call__(self, lprobs: Tensor, step: Step) -> Tensor:
        if step.rows is None or step.t >= self.ids.size(1):
            return lprobs
        # rows still inside their prefix
        forced = (self.lens[step.rows] > step.t).nonzero().squeeze(1)
        if forced.numel() == 0:
            return lprobs
        tok = self.ids[step.rows[forced], step.t]
        kept = lprobs[forced, tok]
        lprobs[forced] = float("-inf")
        lprobs[forced, tok] = kept
        return lprobs


DEFAULT_PROCESSORS: tuple[Processor, ...] = (end_at_limit,)


def apply(processors: tuple[Processor, ...], lprobs: Tensor, step: Step) -> Tensor:
    for processor in processors:
        lprobs = processor(lprobs, step)
    return lprobs
