"""The decoder state of a running batch (decode/running_batch.py): a StepCache whose rows joined at
different steps, so that sentences can join between two decoder steps and leave as they end.

The self-attention buffers stay time-major, one column per step of the batch: a row that joined
at column j has its own positions 0, 1, ... at columns j, j+1, ..., and the columns before j are
zeros it never reads (`self_mask`). Rows that join are laid out after the running ones, their
source padded (or the running ones' padded) to the longer of the two; the columns no running row
needs any more are dropped in the copy a reorder makes anyway.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from mt_cli.decode.step_cache import StepCache, keep_sentences


class RunningCache(StepCache):
    """A StepCache with, for each row, the column where its first position is (`joined`). Its
    buffers hold room for `cap` rows at each position (doubled when rows join past it), so that
    rows join by writing their own columns only; the step reads the first `rows` of each position,
    a strided view. Its cross_mask is never None (a source that joins may be longer than those
    running)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # StepCache's
        super().__init__(*args, **kwargs)
        self.cap = self.rows
        self.joined = torch.zeros(self.rows, dtype=torch.long, device=self.cross_k[0].device)

    def _block(self, flat: Tensor, rows: int, steps: int, cap: int = 0) -> Tensor:
        """The first `steps` positions of the first `rows` rows of buffers holding `cap` (0: the
        cache's) at each: a (steps, rows, H, D/H) view."""
        cap = cap or self.cap
        return flat[: steps * cap * self.width].view(steps, cap, *self.head_shape)[:, :rows]

    def _rows_held(self) -> int:
        return self.cap

    def positions(self) -> Tensor:
        """Each row's own position at this step (R,)."""
        return self.length - self.joined

    def self_mask(self) -> Tensor:
        """(R, 1, 1, T+1): True at the columns each row has, this step's included."""
        cols = torch.arange(self.length + 1, device=self.joined.device)
        return (cols[None, :] >= self.joined[:, None])[:, None, None, :]

    def add(self, new: RunningCache) -> None:
        """`new`'s rows (sentences at their first step, new.length 0) join after these."""
        n, m, t = self.rows, new.rows, self.length
        if n + m > self.cap:
            self._widen(max(2 * self.cap, n + m))
        for main, fresh in ((self.self_k, new.self_k), (self.self_v, new.self_v)):
            for i in range(len(main)):
                if self.recurrent[i] and main is self.self_v:
                    continue  # a cell has no values
                block = self._block(main[i], n + m, 1 if self.recurrent[i] else t)
                # a new row's cell is its c_0; its columns before it joined, zeros it never reads
                block[:, n:] = new._block(fresh[i], m, 1) if self.recurrent[i] else 0
        s = max(self.source_length, new.source_length)
        for mine, theirs in ((self.cross_k, new.cross_k), (self.cross_v, new.cross_v)):
            for i in range(len(mine)):
                mine[i] = torch.cat([_padded(mine[i], s, 2), _padded(theirs[i], s, 2)])
        mask, new_mask = (c.cross_mask for c in (self, new))
        assert mask is not None and new_mask is not None  # a running batch always has one
        self.cross_mask = torch.cat([_padded(mask, s, 3), _padded(new_mask, s, 3)])
        self.joined = torch.cat([self.joined, torch.full_like(new.joined, t)])
        self.rows = n + m

    def _widen(self, cap: int) -> None:
        """Buffers for `cap` rows at each position, the rows so far copied into them."""
        t, n = self.length, self.rows
        for main, spare in ((self.self_k, self.spare_k), (self.self_v, self.spare_v)):
            for i in range(len(main)):
                if self.recurrent[i] and main is self.self_v:
                    continue
                steps = 1 if self.recurrent[i] else t
                size = (cap if self.recurrent[i] else self.room * cap) * self.width
                old = self._block(main[i], n, steps)
                main[i], spare[i] = main[i].new_empty(size), main[i].new_empty(size)
                self._block(main[i], n, steps, cap).copy_(old)
        self.cap = cap

    @property
    def source_length(self) -> int:
        return self.cross_k[0].size(2)

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """As StepCache's, and the columns before the first that a kept row has are dropped in the
        same copy; with sentences gone, the source padding none of the rest needs too."""
        joined = self.joined.index_select(0, rows)
        first = int(joined.min()) if rows.numel() else 0
        t, n, m = self.length, self.rows, rows.numel()
        for main, spare in ((self.self_k, self.spare_k), (self.self_v, self.spare_v)):
            for i in range(len(main)):
                if self.recurrent[i] and main is self.self_v:
                    continue
                steps, skip = (1, 0) if self.recurrent[i] else (t, first)
                kept = self._block(main[i], n, steps)[skip:]
                out = self._block(spare[i], m, steps - skip)
                torch.index_select(kept, 1, rows, out=out)
                main[i], spare[i] = spare[i], main[i]
        self.rows, self.length, self.joined = m, t - first, joined - first
        if sentences is not None:
            mask = self.cross_mask
            assert mask is not None
            kept_mask = mask.index_select(0, sentences)
            s = int(kept_mask.flatten(0, 2).any(0).nonzero().max()) + 1 if m else 1
            if s < self.source_length:  # the longest source left the batch
                for tensors in (self.cross_k, self.cross_v):
                    tensors[:] = [x[:, :, :s] for x in tensors]
                mask = mask[..., :s]
            self.cross_mask = keep_sentences(self.cross_k, self.cross_v, mask, sentences)


def _padded(x: Tensor, size: int, dim: int) -> Tensor:
    """x with zeros (False for a mask) after its end along `dim`, to `size`."""
    short = size - x.size(dim)
    if short == 0:
        return x
    shape = list(x.shape)
    shape[dim] = short
    return torch.cat([x, x.new_zeros(shape)], dim=dim)
