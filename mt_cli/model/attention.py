"""Scaled dot-product and multi-head attention (the paper's section 3.2), and the dropout every
sublayer uses."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Dropout(nn.Module):
    """Zero each element with probability p and scale the rest by 1/(1-p), as nn.Dropout does.

    On the CPU the mask comes from 15-bit random integers, which cost far less than PyTorch's
    bernoulli_ there (dropout was a visible share of a training step); p is rounded to a multiple
    of 1/32768.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        # compiled code fuses its own mask
        if x.device.type != "cpu" or torch.compiler.is_compiling():
            return F.dropout(x, self.p, training=True)
        cut = round(self.p * 32768)
        keep = torch.empty(x.shape, dtype=torch.int16).random_().ge_(cut)  # uniform in [0, 32768)
        return x * keep.to(x.dtype).mul_(32768 / (32768 - cut))

    def extra_repr(self) -> str:
        return f"p={self.p}"


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout: float
) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) V over (B, H, T, D/H) tensors; mask True = attend.

    PyTorch's fused kernel where it is fast. On the CPU in bf16 its backward pass is slower than
    these three explicit products (benchmarks/RESULTS.md, "bf16 training on the CPU"), so bf16 on
    the CPU takes the explicit path.
    """
    if not (q.dtype == torch.bfloat16 and q.device.type == "cpu"):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=causal
        )
    probs = attention_probs(q, k, mask, causal)
    return (F.dropout(probs, dropout) if dropout > 0 else probs) @ v


def attention_probs(q: Tensor, k: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) with masked keys at 0: (B, H, Tq, D/H), (B, H, Tk, D/H) -> (B, H,
    Tq, Tk)."""
    scores = q @ k.transpose(-1, -2) * q.size(-1) ** -0.5
    if causal:  # query i sees keys 0..i (the queries are the last Tq positions of Tk)
        tq, tk = scores.shape[-2:]
        mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril(tk - tq)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        self.n_heads, self.head_dim, self.dropout = n_heads, d_model // n_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape  # (B, T, D) -> (B, H, T, D/H)
        return x.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.split_heads(self.k_proj(x)), self.split_heads(self.v_proj(x))

    def forward(
        self, query: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool = False
    ) -> Tensor:
        """query (B, Tq, D); k, v (B, H, Tk, D/H); mask broadcastable to (B, H, Tq, Tk), True =
        attend."""
        q = self.split_heads(self.q_proj(query))
        out = attention(q, k, v, mask, causal, self.dropout if self.training else 0.0)
        b, _, t, _ = q.shape  # (B, H, Tq, D/H) -> (B, Tq, D)
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1))
