"""Batches as tensors: right-padded ids, and the shifted target pair that teacher forcing reads."""

from __future__ import annotations

import torch

from mt_cli.data.ragged import Ragged, Rows
from mt_cli.data.tokenizer import EOS, PAD


def _ragged(rows: Rows) -> Ragged:
    return rows if isinstance(rows, Ragged) else Ragged.of(rows)


def pad(seqs: Rows) -> torch.Tensor:
    """Right-pad id rows into a (B, T) tensor."""
    return torch.from_numpy(_ragged(seqs).padded(PAD))


def collate(src: Rows, tgt: Rows, start: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher forcing: the decoder reads start + target and predicts target + EOS. Each of the
    three is padded in one vectorised operation (training builds these off its own thread)."""
    s, t = _ragged(src), _ragged(tgt)
    return (
        torch.from_numpy(s.padded(PAD)),
        torch.from_numpy(t.padded(PAD, first=start)),
        torch.from_numpy(t.padded(PAD, last=EOS)),
    )
