"""One step of a search, as greedy search, beam search and sampling share it: how long each
output may grow, the decoder's first input, and a step's log-probabilities through the processors
(`processors.py`). Scores are sum / length**alpha."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.data.tokenizer import PAD
from mt_cli.decode.hypothesis import Searchable
from mt_cli.decode.processors import (
    Processor,
    Step,
    apply,
)

# Picks each running row's next token from its log-probabilities (N, V), given the rows' sentences
# (N,).
Pick = Callable[[Tensor, Tensor], Tensor]


def max_lengths(src_lens: Tensor, cfg: DecodeConfig, limit: int) -> Tensor:
    """Longest output (EOS included) each sentence may get: ratio * source length + offset."""
    lens = (src_lens.float() * cfg.max_len_ratio).long() + cfg.max_len_offset
    return lens.clamp(min=1, max=limit)


def step_log_probs(
    logits: Tensor, step: Step, processors: tuple[Processor, ...], allowed: Tensor | None = None
) -> Tensor:
    """(N, 1, V) logits -> (N, V) float log-probabilities over every token but PAD, after the
    processors. `allowed` (B, V), a shortlist's columns each sentence may choose
    (Shortlist.for_batch): each row's are normalised over its own sentence's only (step.rows: the
    sentence of each row).

    PAD is never an output (CTranslate2 drops it too), so the same weights score the same here,
    in Hugging Face and in CTranslate2."""
    logits = logits[:, -1].float()
    logits[:, PAD] = float("-inf")
    if allowed is not None and step.rows is not None:
        logits.masked_fill_(~allowed.index_select(0, step.rows), float("-inf"))
    return apply(processors, torch.log_softmax(logits, dim=-1), step)


def normalised(total: float, length: int, length_penalty: float) -> float:
    return total / length**length_penalty


def start_tokens(
    model: Searchable, rows: int, start: Tensor | None, device: torch.device
) -> Tensor:
    """The decoder's first input (rows, 1 + E): its start token, then `start` (rows, E) where
    given."""
    first = torch.full((rows, 1), model.start_token, dtype=torch.long, device=device)
    return first if start is None else torch.cat([first, start.to(device)], dim=1)
