"""The reference decoder the engine is held to: search's contract kept by the model alone, which
reads the whole target so far again at every step, teacher-forced, with nothing cached but the
tokens. Slow (each step is a whole forward pass) and plainly right: a test oracle, not a product."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mt_cli.model.transformer import Transformer


class ReferenceCache:
    """The rows' tokens so far, and the encoder's output with its mask, one row per sentence."""

    def __init__(self, memory: Tensor, src_mask: Tensor, rows: int) -> None:
        self.memory, self.src_mask = memory, src_mask
        self.tokens = torch.zeros(rows, 0, dtype=torch.long, device=memory.device)

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        self.tokens = self.tokens.index_select(0, rows)
        if sentences is not None:
            self.memory, self.src_mask = (
                self.memory.index_select(0, sentences),
                self.src_mask.index_select(0, sentences),
            )


class Reference(nn.Module):
    """A Transformer searched by rereading: `decode` appends tgt (R, T) to each row's tokens and
    returns the logits at the new positions from one teacher-forced pass over all of them."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model, self.cfg, self.start_token = model, model.cfg, model.start_token

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.model.encode(src, src_mask)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        src_mask: Tensor | None,
        cache: ReferenceCache | None = None,
        vocab: Tensor | None = None,
    ) -> tuple[Tensor, ReferenceCache]:
        if cache is None:
            assert memory is not None and src_mask is not None
            cache = ReferenceCache(memory, src_mask, tgt.size(0))
        cache.tokens = torch.cat([cache.tokens, tgt], dim=1)
        # the beams of each sentence read its source
        group = cache.tokens.size(0) // cache.memory.size(0)
        memory = cache.memory.repeat_interleave(group, dim=0)
        src_mask = cache.src_mask.repeat_interleave(group, dim=0)
        logits = self.model.decode(cache.tokens, memory, src_mask)[:, -tgt.size(1) :].float()
        return (logits if vocab is None else logits.index_select(-1, vocab)), cache
