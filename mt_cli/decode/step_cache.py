"""The engine's decoder state between steps (decode/engine.py): the cache search's `reorder`
contract asks of any model, laid out so that a step reads it without a copy."""

from __future__ import annotations

import torch
from torch import Tensor


class StepCache:
    """The engine's decoder state: what search's `reorder` contract asks of any cache.

    Self-attention keys/values per layer, time-major: position t of all R rows, then t+1, in one
    flat buffer allocated once per batch (grown by doubling), so that the first T positions are
    always one contiguous (T, R, H, D/H) block, whatever R is now: the step, eager or compiled,
    reads the positions so far without a copy. A reorder gathers rows into a second set of buffers
    and the two swap (a fresh buffer per step was a cold allocation each time). Cross-attention
    keys/values (B, H, S, D/H), one row per running sentence. A layer with an SSRU (`recurrent`)
    keeps its cell (R, D) instead, in the same buffers as one position that never grows."""

    def __init__(
        self,
        layers: int,
        rows: int,
        heads: int,
        cross_k: list[Tensor],
        cross_v: list[Tensor],
        cross_mask: Tensor | None,
        output: tuple[Tensor, Tensor | None, Tensor | None],
        recurrent: list[bool] | None = None,
    ) -> None:
        like = cross_k[0]
        self.head_shape = (heads, like.size(-1))  # (H, D/H)
        self.width = heads * like.size(-1)  # one position of one row
        self.recurrent = recurrent or [False] * layers
        self.room = 16  # positions each attention layer's buffers hold before they double
        # A cell is one position of keys only (rows never grow: search starts with all its beams).
        sizes = [(rows if r else self.room * rows) * self.width for r in self.recurrent]
        self.self_k, self.spare_k = ([like.new_empty(n) for n in sizes] for _ in range(2))
        self.self_v, self.spare_v = (
            [like.new_empty(0 if r else n) for n, r in zip(sizes, self.recurrent)] for _ in range(2)
        )
        for i in (i for i, r in enumerate(self.recurrent) if r):
            self.self_k[i].zero_()  # c_0 = 0
        # mask (B, 1, 1, S), True = real
        self.cross_k, self.cross_v, self.cross_mask = (
            cross_k,
            cross_v,
            cross_mask,
        )
        # the output layer's weight (V or V_s, D), int8 scale and bias (Output.rows)
        self.output = output
        self.length = 0
        self.rows = rows

    def _block(self, flat: Tensor, rows: int, steps: int) -> Tensor:
        """The first `steps` positions of `rows` rows: a contiguous (steps, rows, H, D/H) view."""
        return flat[: steps * rows * self.width].view(steps, rows, *self.head_shape)

    def next_step(self) -> tuple[list[Tensor], list[Tensor]]:
        """Each layer's keys and values (T+1, R, H, D/H): the T positions so far and room for the
        next."""
        t, n = self.length, self.rows
        if t + 1 > self.room and not all(self.recurrent):
            self._grow()
        keys = [self._block(k, n, 1 if r else t + 1) for k, r in zip(self.self_k, self.recurrent)]
        # a cell: none
        values = [v if r else self._block(v, n, t + 1) for v, r in zip(self.self_v, self.recurrent)]
        return keys, values

    def _grow(self) -> None:
        """Twice the room in every buffer, the positions so far kept."""
        rows = self._rows_held()
        used = self.length * rows * self.width
        self.room *= 2
        for store in (self.self_k, self.self_v, self.spare_k, self.spare_v):
            for i, old in enumerate(store):
                if self.recurrent[i]:  # a cell is one position: it never grows
                    continue
                store[i] = old.new_empty(self.room * rows * self.width)
                store[i][:used] = old[:used]

    def _rows_held(self) -> int:
        """Rows the buffers hold at each position: the rows running (a running batch's keep room
        for more: running_cache.py)."""
        return self.rows

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep decoder rows `rows` (surviving beams, in their new order) and, when some sentences
        finished, the source rows of the `sentences` that go on (None: all)."""
        t, n, m = self.length, self.rows, rows.numel()
        for main, spare in ((self.self_k, self.spare_k), (self.self_v, self.spare_v)):
            for i in range(len(main)):
                if self.recurrent[i] and main is self.self_v:
                    continue  # a cell has no values
                steps = 1 if self.recurrent[i] else t
                torch.index_select(
                    self._block(main[i], n, steps), 1, rows, out=self._block(spare[i], m, steps)
                )
                main[i], spare[i] = spare[i], main[i]
        self.rows = m
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
