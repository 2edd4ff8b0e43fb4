"""Sinusoidal positions: the fixed table each model adds to its token embeddings, in the layouts
of the models mt reads and writes (Hugging Face's Marian, Marian's own C++, and fairseq's for
M2M100 and NLLB-200)."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def sinusoid_table(n_positions: int, dim: int, layout: str = "marian") -> Tensor:
    """(P, D) with sin in columns [0, D/2) and cos in [D/2, D).

    layout "marian" is Hugging Face's MarianMTModel's (and mt's own models'): the paper's
    frequencies 10000^(-2i/D). Marian's C++ (and tensor2tensor before it) spaces them as
    10000^(-i/(D/2-1)) instead, in float32: layout "tensor2tensor", the table of models read from
    Marian's own files. Off by up to a few percent of an angle, the two tables are not
    interchangeable: with the other one an imported Bergamot student parts from its own engine on
    6-8% of sentences. layout "fairseq" is M2M100's and NLLB's (fairseq's, computed as
    transformers does): tensor2tensor's frequencies, its rows from 2 on, because fairseq numbers
    positions from padding_idx + 1 = 2. Row t is then what those models add at position t."""
    if layout in ("fairseq", "tensor2tensor"):
        first = 2 if layout == "fairseq" else 0
        half = dim // 2
        freq = torch.exp(
            torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1))
        )
        angle = (
            torch.arange(n_positions + first, dtype=torch.int64).float()[:, None] * freq[None, :]
        )
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)[first:].contiguous()
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(10000.0, 2 * i / dim)
    return torch.cat([angle.sin(), angle.cos()], dim=1).float()
