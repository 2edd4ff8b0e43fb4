"""Rules on one decoding step's log-probabilities, applied in one list by both searches.

A processor takes the step's log-probabilities (N, V), one row per running hypothesis, over every
output token (PAD is never one: its row is -inf before the softmax, as CTranslate2 drops it), and
returns them changed (in place is allowed). Search then picks from what the processors leave.
The next decoding controls (prefixes, banned words, terminology) are more entries in the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from torch import Tensor

from mt_cli.data.tokenizer import EOS


@dataclass(frozen=True)
class Step:
    """What a processor may look at: the step index (0 for the first output token) and whether
    each row has reached its sentence's length limit (N,)."""

    t: int
    at_limit: Tensor


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


DEFAULT_PROCESSORS: tuple[Processor, ...] = (end_at_limit,)


def apply(processors: tuple[Processor, ...], lprobs: Tensor, step: Step) -> Tensor:
    for processor in processors:
        lprobs = processor(lprobs, step)
    return lprobs
