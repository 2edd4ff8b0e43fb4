"""The decoder's incremental state: what decoding step t needs from the steps before it.

This is the whole contract between search and the model besides `encode` and `decode`: search
only ever calls `reorder` on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class DecoderCache:
    """Everything decoding step t needs from steps < t, one entry per decoder layer.

    Cross-attention keys/values are computed from the encoder output once, when the cache is made,
    one row per sentence; the self-attention rows may be several per sentence (beams), in order.
    Self-attention keys/values are kept time-major, (T, N, H, D/H), in buffers with room for more
    steps: a step writes its own in place, and reordering beams copies the filled steps once
    (torch.cat per step, then index_select, copied them twice).
    """

    self_k: list[Tensor | None]
    self_v: list[Tensor | None]
    cross_k: list[Tensor]
    cross_v: list[Tensor]
    cross_mask: Tensor | None  # (B, 1, 1, S), True = real source token
    length: int = 0  # target positions already decoded
    keep: bool = True  # False for one teacher-forced pass (training), which nothing continues
    # A shortlist's rows of the output layer, (V_s, D) and (V_s,) or None, sliced once per batch:
    # logits then cover only those target ids (decode/shortlist.py). None: the whole vocabulary.
    output: tuple[Tensor, Tensor | None] | None = None

    def append(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k, v (N, H, T, D/H) at the new positions -> (N, H, T_all, D/H) at all positions so far."""
        if not self.keep:
            return k, v
        start, end = self.length, self.length + k.size(2)
        filled = []
        for store, new in ((self.self_k, k), (self.self_v, v)):
            buf = store[layer]
            if buf is None or buf.size(0) < end:
                grown = new.new_empty((max(2 * end, 16), new.size(0), new.size(1), new.size(3)))
                if buf is not None:
                    grown[:start] = buf[:start]
                store[layer] = buf = grown
            buf[start:end] = new.permute(2, 0, 1, 3)  # (N, H, T, D/H) -> (T, N, H, D/H)
            # (T_all, N, H, D/H) -> (N, H, T_all, D/H), a strided view: attention reads it in place.
            filled.append(buf[:end].permute(1, 2, 0, 3))
        return filled[0], filled[1]

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep decoder rows `rows` (the beams that survive, in their new order) and, when some
        sentences are finished, the source rows of the `sentences` that go on (None: all of them).
        Beams moving within a sentence leave the encoder side untouched, so it is not copied."""
        for store in (self.self_k, self.self_v):
            for i, buf in enumerate(store):
                if buf is not None:
                    out = buf.new_empty((buf.size(0), rows.numel(), *buf.shape[2:]))
                    torch.index_select(buf[: self.length], 1, rows, out=out[: self.length])
                    store[i] = out
        if sentences is not None:
            self.cross_mask = keep_sentences(self.cross_k, self.cross_v, self.cross_mask, sentences)


def keep_sentences(
    cross_k: list[Tensor], cross_v: list[Tensor], cross_mask: Tensor | None, sentences: Tensor
) -> Tensor | None:
    """The encoder side of a cache for the `sentences` that go on: each layer's cross-attention
    keys/values replaced in their lists, and the mask returned (None stays None)."""
    for tensors in (cross_k, cross_v):
        for i, t in enumerate(tensors):
            tensors[i] = t.index_select(0, sentences)
    return None if cross_mask is None else cross_mask.index_select(0, sentences)
