"""Several models read as one: at each position their log-probabilities are averaged.

The average of log-probabilities is a geometric mean of the distributions; search renormalises it
(its log_softmax), so scores stay log-probabilities. Each model starts from its own start token.
All models read the same source and target ids, so they must share both vocabularies
(Translator.load checks this). Two forms, as for one model: `Ensemble` of engines for search
(the decoding contract: start_token, encode, decode one position at a time with a cache that
`reorder`s), and `ForcedEnsemble` of models for forced scoring (a whole target at once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import Tensor, nn

from mt_cli.config import ModelConfig
from mt_cli.data.tokenizer import PAD
from mt_cli.decode.engine import Engine
from mt_cli.decode.step_cache import StepCache
from mt_cli.model.transformer import Transformer


class EnsembleCache:
    """One cache per engine, reordered together."""

    def __init__(self, caches: list[StepCache]) -> None:
        self.caches = caches

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        for cache in self.caches:
            cache.reorder(rows, sentences)


def _common_cfg(models: Sequence[nn.Module]) -> ModelConfig:
    """The first model's config, its position table the shortest: that bounds every model's
    input."""
    cfgs: list[ModelConfig] = [m.cfg for m in models]  # type: ignore[misc]
    return dataclasses.replace(cfgs[0], max_positions=min(c.max_positions for c in cfgs))


def mean_log_probs(logits: list[Tensor]) -> Tensor:
    out = []
    for x in logits:
        x = x.float()
        x[..., PAD] = float("-inf")  # never an output, as in search
        out.append(torch.log_softmax(x, dim=-1))
    return torch.stack(out).mean(dim=0)


def _starting_with(tgt: Tensor, start_token: int, own: int) -> Tensor:
    """tgt with position 0, the ensemble's start token, replaced by a member's own."""
    if own == start_token:
        return tgt
    ids = tgt.clone()
    ids[:, 0] = own
    return ids


class _Members(nn.Module):
    """What both forms share: the members, the first one's start token, and one encode each."""

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.start_token: int = members[0].start_token  # type: ignore[assignment]
        self.cfg = _common_cfg(members)

    def encode(self, src: Tensor, src_mask: Tensor) -> list[Tensor]:
        return [m.encode(src, src_mask) for m in cast("list[Any]", list(self.members))]


class Ensemble(_Members):
    """Engines searched as one (the `Searchable` contract)."""

    def __init__(self, engines: list[Engine]) -> None:
        super().__init__(engines)

    def decode(
        self,
        tgt: Tensor,
        memory: list[Tensor] | None,
        src_mask: Tensor | None,
        cache: EnsembleCache | None = None,
        vocab: Tensor | None = None,
    ) -> tuple[Tensor, EnsembleCache]:
        """tgt (R, T) -> the engines' mean log-probabilities (R, T, V), or (R, T, V_s) over a
        shortlist's `vocab`, and their caches."""
        logits, caches = [], []
        for i, e in enumerate(cast("list[Engine]", list(self.members))):
            ids = _starting_with(tgt, self.start_token, e.start_token) if cache is None else tgt
            mem = memory[i] if memory is not None else None
            x, c = e.decode(
                ids, mem, src_mask, cache.caches[i] if cache is not None else None, vocab
            )
            logits.append(x)
            caches.append(c)
        return mean_log_probs(logits), EnsembleCache(caches)


class ForcedEnsemble(_Members):
    """Models read as one with teacher forcing: forced scoring of whole targets."""

    def __init__(self, models: list[Transformer]) -> None:
        super().__init__(models)

    def decode(self, tgt_in: Tensor, memory: list[Tensor], src_mask: Tensor) -> Tensor:
        """tgt_in (B, T) from the start token -> the models' mean log-probabilities (B, T, V)."""
        models = self.models()
        starts = [_starting_with(tgt_in, self.start_token, m.start_token) for m in models]
        return mean_log_probs(
            [m.decode(ids, mem, src_mask) for m, ids, mem in zip(models, starts, memory)]
        )

    def models(self) -> list[Transformer]:
        return list(self.members)  # type: ignore[arg-type]
