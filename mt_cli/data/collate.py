"""Batches as tensors: right-padded ids, and the shifted target pair that teacher forcing reads."""

from __future__ import annotations

import torch

from mt_cli.data.tokenizer import EOS, PAD


def pad(seqs: list[list[int]]) -> torch.Tensor:
    """Right-pad id lists into a (B, T) tensor."""
    out = torch.full((len(seqs), max(len(s) for s in seqs)), PAD, dtype=torch.long)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def collate(
    src: list[list[int]], tgt: list[list[int]], start: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher forcing: the decoder reads start + target and predicts target + EOS."""
    return pad(src), pad([[start] + t for t in tgt]), pad([t + [EOS] for t in tgt])
