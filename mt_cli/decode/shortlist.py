"""A vocabulary shortlist: per batch, the output layer scores only the target pieces its sources can
plausibly produce, as Marian and Bergamot decode.

The output layer (d_model x target vocabulary) is the largest product of a decoding step, and its
softmax and top-k the widest operations. A lexicon built once from the training pairs says, for
each source piece, which K target pieces co-occur with it most strongly (Dice's coefficient over
sentence pairs: 2 c(s, t) / (c(s) + c(t)), which, unlike p(t | s), does not rank "a" and "." first
for every word); the F most frequent target pieces are always allowed. A batch's shortlist is the
union over its source pieces, plus the special pieces, sorted: ids 0..3 (PAD, UNK, BOS, EOS) then
sit at their own positions, so rules that read EOS's column (end_at_limit) read the same column.

Search uses it only where nothing else names target ids (no prefix, terminology, n-gram ban or
sampling); its log-probabilities are then normalised over the shortlist, as Marian's are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from mt_cli.data.tokenizer import EOS
from mt_cli.errors import MtError

IdPairs = tuple[list[list[int]], list[list[int]]]  # source and target ids of some sentence pairs
SPECIALS = EOS + 1  # PAD, UNK, BOS, EOS are ids 0..3: always in, each at its own position


class PairSource(Protocol):
    """Token ids of parallel sentences (data.pairs.Pairs or a tokenized cache)."""

    def __len__(self) -> int: ...

    def take(self, indices: Iterable[int]) -> IdPairs: ...


@dataclass(frozen=True)
class Shortlist:
    table: Tensor  # (source vocabulary, K) int32: each source piece's K target pieces, -1 where it has fewer
    frequent: Tensor  # (F,) int32: the most frequent target pieces
    tgt_vocab_size: int

    def for_batch(self, src: Tensor) -> Tensor:
        """src (B, S) padded source ids -> the batch's allowed target ids (V_s,), sorted, specials first."""
        rows = self.table.to(src.device)[src.unique()].flatten()  # (U * K,)
        allowed = torch.zeros(self.tgt_vocab_size, dtype=torch.bool, device=src.device)
        allowed[:SPECIALS] = True
        allowed[self.frequent.to(src.device).long()] = True
        allowed[rows[rows >= 0].long()] = True
        return allowed.nonzero().squeeze(1)

    def to_state(self) -> dict[str, Tensor | int]:
        return {"table": self.table, "frequent": self.frequent, "tgt_vocab_size": self.tgt_vocab_size}

    @classmethod
    def from_state(cls, state: dict, where: str) -> Shortlist:
        try:
            table, frequent, size = state["table"], state["frequent"], int(state["tgt_vocab_size"])
        except (KeyError, TypeError, ValueError):
            raise MtError(f"{where}: the shortlist is malformed (rebuild it with `mt shortlist`)") from None
        return cls(table, frequent, size)


def pair_chunks(pairs: PairSource, size: int = 20_000) -> Iterator[IdPairs]:
    """A corpus's pairs `size` at a time (a tokenized cache stays on disk meanwhile)."""
    for start in range(0, len(pairs), size):
        yield pairs.take(range(start, min(start + size, len(pairs))))


def build_shortlist(
    chunks: Iterable[IdPairs], src_vocab: int, tgt_vocab: int, per_source: int, frequent: int
) -> Shortlist:
    """Count in how many sentence pairs each (source piece, target piece) occurs together, and keep
    each source piece's `per_source` best by Dice, with the `frequent` most frequent target pieces.
    Counted a chunk at a time, so memory follows the distinct pairs seen, not the corpus."""
    src_count = np.zeros(src_vocab, dtype=np.int64)  # sentences holding each piece
    tgt_count = np.zeros(tgt_vocab, dtype=np.int64)
    keys, counts = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)  # s * V_tgt + t -> sentences
    for src, tgt in chunks:
        found = []
        for s, t in zip(src, tgt):
            s_ids, t_ids = np.unique(np.asarray(s, dtype=np.int64)), np.unique(np.asarray(t, dtype=np.int64))
            src_count[s_ids] += 1
            tgt_count[t_ids] += 1
            found.append((s_ids[:, None] * tgt_vocab + t_ids[None, :]).ravel())
        merged, inverse = np.unique(np.concatenate([keys, *found]), return_inverse=True)
        weights = np.concatenate([counts, np.ones(len(inverse) - len(counts), dtype=np.int64)])
        keys, counts = merged, np.bincount(inverse, weights=weights, minlength=len(merged)).astype(np.int64)
    if not len(keys):
        raise MtError("no sentence pairs to build a shortlist from")
    src_of, tgt_of = keys // tgt_vocab, keys % tgt_vocab
    dice = 2 * counts / (src_count[src_of] + tgt_count[tgt_of])
    order = np.lexsort((-dice, src_of))  # by source piece, best target first
    src_of, tgt_of = src_of[order], tgt_of[order]
    rank = np.arange(len(src_of)) - np.searchsorted(src_of, src_of)  # position within its source piece's run
    keep = rank < per_source
    table = np.full((src_vocab, per_source), -1, dtype=np.int32)
    table[src_of[keep], rank[keep]] = tgt_of[keep]
    top = np.argsort(-tgt_count, kind="stable")[:frequent]
    return Shortlist(torch.from_numpy(table), torch.from_numpy(top.astype(np.int32)), tgt_vocab)
