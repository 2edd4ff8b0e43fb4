"""The SSRU, a decoder's self-attention replaced by a recurrence (Kim et al., 2019, "From Research
to Production and Back: Ludicrously Fast Neural Machine Translation"), as Marian's `dec-cell: ssru`
and the Bergamot / Firefox Translations students have it.

At each target position t, from the layer's input x_t (D,):

    f_t = sigmoid(x_t W_f + b_f)            the forget gate
    c_t = f_t * c_{t-1} + (1 - f_t) * x_t W  the cell, c_0 = 0
    h_t = ReLU(c_t)                          the output, then Add & Norm as any sublayer

A position reads the ones before it only through c_{t-1}: one (D,) state per sentence instead of
keys and values that grow with the target, which is what makes these students cheap to decode.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class SSRU(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.input_proj = nn.Linear(d_model, d_model, bias=False)  # W (Marian's `_rnn_W`)
        self.forget_proj = nn.Linear(d_model, d_model)  # W_f, b_f (`_rnn_Wf`, `_rnn_bf`)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D), every target position at once (teacher forcing) -> h (B, T, D)."""
        xw, f = self.input_proj(x), torch.sigmoid(self.forget_proj(x))
        cell = x.new_zeros(x.size(0), x.size(2))
        out = []
        for t in range(x.size(1)):  # a recurrence: position t needs c_{t-1}
            cell = f[:, t] * cell + (1 - f[:, t]) * xw[:, t]
            out.append(cell)
        return torch.relu(torch.stack(out, dim=1))

    def step(self, x: Tensor, cell: Tensor) -> tuple[Tensor, Tensor]:
        """One position: x (R, D) and c_{t-1} (R, D) -> h_t (R, D) and c_t (R, D)."""
        f = torch.sigmoid(self.forget_proj(x))
        cell = f * cell + (1 - f) * self.input_proj(x)
        return torch.relu(cell), cell
