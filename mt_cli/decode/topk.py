"""The k best entries of each row of a step's scores, fast over large vocabularies.

`torch.topk` and `torch.argmax` on the CPU walk each row of 256k pieces element by element:
on a 2-core Xeon, 33 ms for 128 rows x 256,206 (beam 4 of 32 sentences), 45 ms for argmax, a
seventh of an NLLB-shaped model's whole step. The rows' maxima over blocks of 256 columns are
a vectorised reduction (5 ms there); the k best entries of a row lie in its k blocks of highest
maximum (a block holding one of them has a maximum at least as high, and fewer than k blocks can
beat it), so the exact top k is found among k x 256 columns.
"""

from __future__ import annotations

import torch
from torch import Tensor

# Columns per block: small blocks keep each block's top k in cache (benchmarks/topk_ab.py times
# the sizes).
BLOCK = 256


def topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """x (N, V) -> the k largest values of each row, largest first, and their columns (N, k):
    what `x.topk(k, dim=-1)` returns. Rows too short to gain (k x BLOCK x 8 > V) take torch.topk."""
    n, v = x.shape
    blocks = v // BLOCK
    if k * BLOCK * 8 > v:
        return x.topk(k, dim=-1)
    x = x.contiguous()
    best = x[:, : blocks * BLOCK].view(n, blocks, BLOCK).amax(dim=-1)  # (N, V/BLOCK)
    chosen = best.topk(k, dim=-1).indices  # (N, k): the blocks that hold the k best
    cols = (chosen[:, :, None] * BLOCK + torch.arange(BLOCK, device=x.device)).view(n, k * BLOCK)
    if blocks * BLOCK < v:  # the columns after the last whole block are always candidates
        cols = torch.cat(
            [cols, torch.arange(blocks * BLOCK, v, device=x.device).expand(n, -1)], dim=1
        )
    values, at = x.gather(1, cols).topk(k, dim=-1)
    return values, cols.gather(1, at)
