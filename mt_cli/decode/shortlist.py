"""A vocabulary shortlist: per batch, the output layer scores only the target pieces its sources can
plausibly produce, as Marian and Bergamot decode.

The output layer (d_model x target vocabulary) is the largest product of a decoding step, and its
softmax and top-k the widest operations. A lexicon built once from the training pairs
(data/lexicon.py) says, for each source piece, which K target pieces co-occur with it most
strongly; the F most frequent target pieces are always allowed. A batch's shortlist is the
union over its sentences' pieces, plus the special pieces, sorted: ids 0..3 (PAD, UNK, BOS, EOS)
then sit at their own positions, so rules that read EOS's column (end_at_limit) read the same
column. The output layer scores the union once; each sentence then chooses only among its own
candidates (a mask per sentence), its log-probabilities normalised over them, as Marian's are
over a shortlist: a translation never depends on the sentences beside it in a batch.

Search uses it only where nothing else names target ids (no prefix, terminology, n-gram ban or
sampling).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mt_cli.data.lexicon import Lexicon
from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.errors import MtError

SPECIALS = EOS + 1  # PAD, UNK, BOS, EOS are ids 0..3: always in, each at its own position


@dataclass(frozen=True)
class Shortlist(Lexicon):
    """A lexicon (its table, frequent pieces and target vocabulary size) as decoding uses it."""

    @classmethod
    def of(cls, lexicon: Lexicon) -> Shortlist:
        return cls(lexicon.table, lexicon.frequent, lexicon.tgt_vocab_size)

    def for_batch(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src (B, S) padded source ids -> the target ids any sentence allows (V_s,), sorted,
        specials first, and which of them each sentence allows (B, V_s)."""
        allowed = self.allowed(src)
        vocab = allowed.any(dim=0).nonzero().squeeze(1)
        return vocab, allowed.index_select(1, vocab)

    def allowed(self, src: Tensor) -> Tensor:
        """src (B, S) padded source ids -> which target ids each sentence allows (B, V)."""
        b, dev = src.size(0), src.device
        allowed = torch.zeros(b, self.tgt_vocab_size, dtype=torch.bool, device=dev)
        allowed[:, :SPECIALS] = True
        allowed[:, self.frequent.to(dev).long()] = True
        # (B, S * K): each source piece's candidates, -1 for none
        cand = self.table.to(dev)[src].flatten(1)
        # padding allows nothing
        real = (cand >= 0) & (src != PAD).repeat_interleave(self.table.size(1), dim=1)
        sentence = torch.arange(b, device=dev)[:, None].expand_as(cand)
        allowed[sentence[real], cand[real].long()] = True
        return allowed

    def to_state(self) -> dict[str, Tensor | int]:
        return {
            "table": self.table,
            "frequent": self.frequent,
            "tgt_vocab_size": self.tgt_vocab_size,
        }

    @classmethod
    def from_state(cls, state: dict, where: str) -> Shortlist:
        try:
            table, frequent, size = state["table"], state["frequent"], int(state["tgt_vocab_size"])
        except (KeyError, TypeError, ValueError):
            raise MtError(
                f"{where}: the shortlist is malformed (rebuild it with `mt shortlist`)"
            ) from None
        return cls(table, frequent, size)
