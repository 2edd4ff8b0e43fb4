"""Sinusoidal positions: the fixed table each model adds to its token embeddings, in the layouts
of the models mt reads and writes (Marian's, and fairseq's for M2M100 and NLLB-200)."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def sinusoid_table(n_positions: int, dim: int, layout: str = "marian") -> Tensor:
    """(P, D) with sin in columns [0, D/2) and cos in [D/2, D), as Marian lays it out.

    layout "fairseq" is M2M100's and NLLB's table (fairseq's, computed as transformers does, in
    float32): frequencies 10000^(-i/(D/2-1)), and its rows from 2 on, because fairseq numbers
    positions from padding_idx + 1 = 2. Row t is then what those models add at position t."""
    if layout == "fairseq":
        half = dim // 2
        freq = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1)))
        angle = torch.arange(n_positions + 2, dtype=torch.int64).float()[:, None] * freq[None, :]
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)[2:].contiguous()
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(10000.0, 2 * i / dim)
    return torch.cat([angle.sin(), angle.cos()], dim=1).float()
