"""Rows of token ids of different lengths, held as one flat array and the rows' lengths.

What a batch is read as from the cache (Arrow keeps list columns the same way) and padded from in
one vectorised operation: no Python list per sentence on the training thread. numpy only (no
torch): the tokenized cache's worker processes import the data package.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ragged:
    """Row i is values[starts[i] : starts[i] + lengths[i]]; rows are laid end to end."""

    values: np.ndarray  # (total,) int64: every row's ids, one row after another
    lengths: np.ndarray  # (rows,) int64

    @staticmethod
    def of(rows: Sequence[Sequence[int]]) -> Ragged:
        """From id lists (validation sets, search, tests)."""
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        flat = [i for r in rows for i in r]
        return Ragged(np.asarray(flat, dtype=np.int64), lengths)

    @staticmethod
    def concat(parts: Sequence[Ragged]) -> Ragged:
        if not parts:
            return Ragged(np.zeros(0, np.int64), np.zeros(0, np.int64))
        return Ragged(
            np.concatenate([p.values for p in parts]), np.concatenate([p.lengths for p in parts])
        )

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.lengths) - self.lengths

    def positions(self) -> np.ndarray:
        """(total,): each value's place within its row (0, 1, ... for every row)."""
        return np.arange(len(self.values)) - np.repeat(self.starts, self.lengths)

    def rows(self, order: np.ndarray) -> Ragged:
        """The rows at `order` (any order, repeats allowed), as a new Ragged."""
        order = np.asarray(order, dtype=np.int64)
        lengths = self.lengths[order]
        # each kept value's index in self.values: its row's start plus its place in the row
        firsts = np.repeat(self.starts[order] - (np.cumsum(lengths) - lengths), lengths)
        return Ragged(self.values[firsts + np.arange(int(lengths.sum()))], lengths)

    def keep(self, mask: np.ndarray) -> Ragged:
        """Only the values where `mask` (total,) is True; each row shrinks by what it lost."""
        row = np.repeat(np.arange(len(self.lengths)), self.lengths)
        return Ragged(self.values[mask], np.bincount(row[mask], minlength=len(self.lengths)))

    def padded(
        self, pad: int, first: int | None = None, last: int | None = None, dtype: type = np.int64
    ) -> np.ndarray:
        """(rows, width) right-padded with `pad`, each row optionally after a `first` id and
        before a `last` one: one masked assignment, however many rows."""
        extra = (first is not None) + (last is not None)
        width = int(self.lengths.max(initial=0)) + extra
        out: np.ndarray = np.full((len(self.lengths), width), pad, dtype=dtype)
        shift = int(first is not None)
        if first is not None:
            out[:, 0] = first
        # row-major order of the mask's True cells is the order of self.values
        inside = np.arange(width - shift)[None, :] < self.lengths[:, None]
        out[:, shift:][inside] = self.values
        if last is not None:
            out[np.arange(len(self.lengths)), self.lengths + shift] = last
        return out

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(np.split(self.values, np.cumsum(self.lengths)[:-1]) if len(self) else [])

    def tolist(self) -> list[list[int]]:
        return [row.tolist() for row in self]


# Rows of ids as callers hold them: a Ragged, or lists (validation sets, search, tests).
Rows = Ragged | Sequence[Sequence[int]]
