"""The layers of the paper's Figure 1: position-wise feed-forward, the residual Add & Norm around
each sublayer, encoder and decoder layers, and the embeddings with their sinusoidal positions."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from mt_cli.config import ModelConfig
from mt_cli.data.tokenizer import PAD
from mt_cli.errors import MtError
from mt_cli.model.attention import Dropout, MultiHeadAttention
from mt_cli.model.ssru import SSRU

ACTIVATION: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "swish": F.silu,
}


class FeedForward(nn.Module):
    """Position-wise FFN(x) = max(0, x W1 + b1) W2 + b2 (the paper's ReLU; GELU or swish where an
    imported model was trained with them)."""

    def __init__(
        self, d_model: int, ffn_dim: int, activation_dropout: float, activation: str = "relu"
    ) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.activation_dropout = Dropout(activation_dropout)
        self.act = ACTIVATION[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.activation_dropout(self.act(self.fc1(x))))


class SublayerConnection(nn.Module):
    """Add & Norm around one sublayer: post-norm LN(x + f(x)) as in the paper, or pre-norm x +
    f(LN(x))."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.feed_forward = FeedForward(
            cfg.d_model, cfg.ffn_dim, cfg.activation_dropout, cfg.activation
        )
        self.attn_sublayer = SublayerConnection(
            cfg.d_model, cfg.dropout, cfg.pre_norm, cfg.norm_eps
        )
        self.ffn_sublayer = SublayerConnection(cfg.d_model, cfg.dropout, cfg.pre_norm, cfg.norm_eps)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.attn_sublayer(x, lambda h: self.self_attn(h, *self.self_attn.project_kv(h), mask))
        return self.ffn_sublayer(x, self.feed_forward)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        # Earlier target positions are read by causal self-attention, or by an SSRU in its place.
        recurrent = cfg.decoder_autoreg == "ssru"
        self.self_attn = (
            None
            if recurrent
            else MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        )
        self.ssru = SSRU(cfg.d_model) if recurrent else None
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.feed_forward = FeedForward(
            cfg.d_model, cfg.ffn_dim, cfg.activation_dropout, cfg.activation
        )
        self.self_sublayer = SublayerConnection(
            cfg.d_model, cfg.dropout, cfg.pre_norm, cfg.norm_eps
        )
        self.cross_sublayer = SublayerConnection(
            cfg.d_model, cfg.dropout, cfg.pre_norm, cfg.norm_eps
        )
        self.ffn_sublayer = SublayerConnection(cfg.d_model, cfg.dropout, cfg.pre_norm, cfg.norm_eps)

    def forward(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None) -> Tensor:
        """x (B, T, D), every target position at once (teacher forcing): position i attends to
        positions 0..i of x and to all of memory (B, S, D) where memory_mask (B, 1, 1, S) is True.
        """
        sa = self.self_attn
        x = self.self_sublayer(
            x, self.ssru if sa is None else lambda h: sa(h, *sa.project_kv(h), None, True)
        )
        x = self.cross_sublayer(
            x, lambda h: self.cross_attn(h, *self.cross_attn.project_kv(memory), memory_mask)
        )
        return self.ffn_sublayer(x, self.feed_forward)


class Embeddings(nn.Module):
    """Token embedding * sqrt(d_model) + sinusoidal position, then dropout.

    PAD embeds as the zero vector whatever its (tied, output-side) row holds: padding carries no
    content, and the decoder's first input is PAD, the zero start vector Marian and CTranslate2 use.
    """

    positions: Tensor  # (P, D), a buffer

    def __init__(
        self, token: nn.Embedding, positions: Tensor, dropout: float, scale: bool = True
    ) -> None:
        super().__init__()
        self.token = token
        self.register_buffer("positions", positions, persistent=False)
        self.scale = math.sqrt(token.embedding_dim) if scale else 1.0
        self.dropout = Dropout(dropout)

    def forward(self, ids: Tensor) -> Tensor:
        """ids (B, T) from position 0 -> (B, T, D)."""
        if ids.size(1) > self.positions.size(0):
            raise MtError(
                f"sequence of {ids.size(1)} tokens exceeds "
                f"model.max_positions={self.positions.size(0)}"
            )
        tok = self.token(ids).masked_fill((ids == PAD).unsqueeze(-1), 0.0)
        x = tok * self.scale + self.positions[: ids.size(1)]
        return self.dropout(x)
