"""Random sampling: each step draws a row's next token from the model's distribution, reshaped by
temperature, top-k and top-p (nucleus), instead of taking the most probable one.

Every row draws from its own random stream, seeded by (seed, the sentence's key, the draw index),
never by its place in a batch: so the same seed gives the same output whatever --batch-size, and
lines are independent of one another. A draw is one uniform number per step, turned into a token
through the distribution's cumulative sum.
"""

from __future__ import annotations

import random

import torch
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.decode.topk import topk


class Sampler:
    """A `Pick` for greedy_search's loop: row i of the batch draws with stream `draws[i]`."""

    def __init__(self, cfg: DecodeConfig, draws: list[tuple[int, int]]) -> None:
        self.topk, self.topp, self.temperature = (
            cfg.sampling_topk,
            cfg.sampling_topp,
            cfg.temperature,
        )
        # A string seed is hashed (SHA-512) by random.Random: stable across runs and machines.
        self.streams = [random.Random(f"{cfg.seed}/{key}/{d}") for key, d in draws]

    def __call__(self, lprobs: Tensor, rows: Tensor) -> Tensor:
        """(N, V) log-probabilities of the running rows, whose batch rows are `rows` -> (N,)
        tokens."""
        probs = self.distribution(lprobs)
        u = torch.tensor(
            [self.streams[r].random() for r in rows.tolist()],
            dtype=probs.dtype,
            device=probs.device,
        )
        cdf = probs.cumsum(dim=-1)  # (N, V)
        # The first token whose cumulative probability exceeds u * total: one with probability > 0.
        tok = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(1)
        return tok.clamp(max=probs.size(1) - 1)

    def distribution(self, lprobs: Tensor) -> Tensor:
        """What is sampled from: softmax(log p / T), cut to the top k tokens and to the smallest
        set whose probability reaches p, not renormalised (the cumulative sum does it)."""
        logits = lprobs / self.temperature
        if 0 < self.topk < logits.size(1):
            kth = topk(logits, self.topk)[0][:, -1:]  # (N, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if self.topp < 1.0:
            sorted_p, idx = probs.sort(dim=-1, descending=True)
            # A token stays if the tokens before it hold less than p: the first always stays.
            drop = (sorted_p.cumsum(dim=-1) - sorted_p) >= self.topp
            probs = probs.scatter(1, idx, sorted_p.masked_fill(drop, 0.0))
        return probs
