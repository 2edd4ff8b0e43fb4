"""A lexicon counted from a parallel corpus: for each source piece, the target pieces it occurs
with most strongly, and the corpus's most frequent target pieces. Decoding uses it as a
vocabulary shortlist (decode/shortlist.py), as Marian and Bergamot do.

Strength is Dice's coefficient over sentence pairs, 2 c(s, t) / (c(s) + c(t)), which, unlike
p(t | s), does not rank "a" and "." first for every word.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from mt_cli.config import CORPUS_CHUNK_LINES
from mt_cli.data.ragged import Rows
from mt_cli.errors import MtError

IdPairs = tuple[Rows, Rows]  # source and target ids of some sentence pairs


class PairSource(Protocol):
    """Token ids of parallel sentences (data.pairs.Pairs or a tokenized cache)."""

    def __len__(self) -> int: ...

    def take(self, indices: Iterable[int]) -> IdPairs: ...


@dataclass(frozen=True)
class Lexicon:
    # (source vocabulary, K) int32: each source piece's K target pieces, -1 where it has fewer
    table: Tensor
    frequent: Tensor  # (F,) int32: the most frequent target pieces
    tgt_vocab_size: int


def pair_chunks(pairs: PairSource, size: int = CORPUS_CHUNK_LINES) -> Iterator[IdPairs]:
    """A corpus's pairs `size` at a time (a tokenized cache stays on disk meanwhile)."""
    for start in range(0, len(pairs), size):
        yield pairs.take(range(start, min(start + size, len(pairs))))


def build_lexicon(
    chunks: Iterable[IdPairs], src_vocab: int, tgt_vocab: int, per_source: int, frequent: int
) -> Lexicon:
    """Count in how many sentence pairs each (source piece, target piece) occurs together, and keep
    each source piece's `per_source` best by Dice, with the `frequent` most frequent target pieces.
    Counted a chunk at a time, so memory follows the distinct pairs seen, not the corpus."""
    src_count = np.zeros(src_vocab, dtype=np.int64)  # sentences holding each piece
    tgt_count = np.zeros(tgt_vocab, dtype=np.int64)
    # s * V_tgt + t -> sentences
    keys, counts = (
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
    )
    for src, tgt in chunks:
        found = []
        for s, t in zip(src, tgt):
            s_ids, t_ids = (
                np.unique(np.asarray(s, dtype=np.int64)),
                np.unique(np.asarray(t, dtype=np.int64)),
            )
            src_count[s_ids] += 1
            tgt_count[t_ids] += 1
            found.append((s_ids[:, None] * tgt_vocab + t_ids[None, :]).ravel())
        merged, inverse = np.unique(np.concatenate([keys, *found]), return_inverse=True)
        weights = np.concatenate([counts, np.ones(len(inverse) - len(counts), dtype=np.int64)])
        keys, counts = (
            merged,
            np.bincount(inverse, weights=weights, minlength=len(merged)).astype(np.int64),
        )
    if not len(keys):
        raise MtError("no sentence pairs to build a shortlist from")
    src_of, tgt_of = keys // tgt_vocab, keys % tgt_vocab
    dice = 2 * counts / (src_count[src_of] + tgt_count[tgt_of])
    order = np.lexsort((-dice, src_of))  # by source piece, best target first
    src_of, tgt_of = src_of[order], tgt_of[order]
    # position within its source piece's run
    rank = np.arange(len(src_of)) - np.searchsorted(src_of, src_of)
    keep = rank < per_source
    table = np.full((src_vocab, per_source), -1, dtype=np.int32)
    table[src_of[keep], rank[keep]] = tgt_of[keep]
    top = np.argsort(-tgt_count, kind="stable")[:frequent]
    return Lexicon(torch.from_numpy(table), torch.from_numpy(top.astype(np.int32)), tgt_vocab)
