"""Several models searched as one: at each step their log-probabilities are averaged.

An Ensemble keeps the decoding contract (start_token, encode, decode, a cache with `reorder`), so
greedy, beam, constrained and sampling search and forced scoring take it as they take one model.
The average of log-probabilities is a geometric mean of the distributions; search renormalises it
(its log_softmax), so scores stay log-probabilities. Each model starts from its own start token.
All models read the same source and target ids, so they must share both vocabularies
(Translator.load checks this).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from mt_cli.data.tokenizer import PAD
from mt_cli.model.decoder_cache import DecoderCache
from mt_cli.model.transformer import Transformer


class EnsembleCache:
    """One cache per model, reordered together."""

    def __init__(self, caches: list[DecoderCache]) -> None:
        self.caches = caches

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        for cache in self.caches:
            cache.reorder(rows, sentences)


class Ensemble(nn.Module):
    def __init__(self, models: list[Transformer]) -> None:
        super().__init__()
        self.models = nn.ModuleList(models)
        self.start_token = models[0].start_token
        # The shortest position table bounds every model's input.
        self.cfg = dataclasses.replace(models[0].cfg, max_positions=min(m.cfg.max_positions for m in models))

    def encode(self, src: Tensor, src_mask: Tensor) -> list[Tensor]:
        return [m.encode(src, src_mask) for m in self._models()]

    def decode(
        self, tgt: Tensor, memory: list[Tensor] | None, src_mask: Tensor | None, cache: EnsembleCache | None = None,
        vocab: Tensor | None = None,
    ) -> tuple[Tensor, EnsembleCache]:  # fmt: skip
        """tgt (B, T) -> the models' mean log-probabilities (B, T, V), or (B, T, V_s) over a
        shortlist's `vocab`, and their caches."""
        out, caches = [], []
        for i, m in enumerate(self._models()):
            ids = tgt
            if cache is None and m.start_token != self.start_token:  # position 0 is the start token
                ids = tgt.clone()
                ids[:, 0] = m.start_token
            logits, c = m.decode(ids, memory[i] if memory is not None else None, src_mask,
                                 cache.caches[i] if cache is not None else None, vocab)  # fmt: skip
            logits = logits.float()
            logits[..., PAD] = float("-inf")  # never an output, as in search
            out.append(torch.log_softmax(logits, dim=-1))
            caches.append(c)
        return torch.stack(out).mean(dim=0), EnsembleCache(caches)

    def _models(self) -> list[Transformer]:
        return list(self.models)  # type: ignore[arg-type]
