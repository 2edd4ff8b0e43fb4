"""The Transformer of "Attention Is All You Need", named as in its Figure 1.

Parameter layout follows Hugging Face's MarianMTModel (biases on every projection, the same
sinusoidal table, post-norm, no final encoder/decoder norm) so that export is a copy of weights.
With model.pre_norm, model.positions fairseq and model.decoder_start eos it is M2M100's and
NLLB's (pre-norm layers with a final norm on each side), which import and export the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mt_cli.config import ModelConfig
from mt_cli.data.tokenizer import BOS, EOS, PAD
from mt_cli.errors import MtError
from mt_cli.model.positions import sinusoid_table
from mt_cli.model.ssru import SSRU


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

    PyTorch's fused kernel where it is fast. On the CPU in bf16 its backward pass measured several
    times slower than these three explicit products when it was timed (issue 4), so bf16
    on the CPU takes the explicit path.
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


class Encoder(nn.Module):
    def __init__(self, cfg: ModelConfig, embeddings: Embeddings) -> None:
        super().__init__()
        self.embeddings = embeddings
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.enc_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps) if cfg.pre_norm else None

    def forward(self, src: Tensor, mask: Tensor | None) -> Tensor:
        x = self.embeddings(src)
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_norm(x) if self.final_norm is not None else x


class Decoder(nn.Module):
    def __init__(self, cfg: ModelConfig, embeddings: Embeddings) -> None:
        super().__init__()
        self.embeddings = embeddings
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.dec_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps) if cfg.pre_norm else None

    def forward(self, tgt: Tensor, memory: Tensor, memory_mask: Tensor | None) -> Tensor:
        """tgt (B, T) ids from position 0, memory (B, S, D) -> the last layer's states (B, T, D).

        The whole target at once, as training reads it: decoding one position at a time, with
        cached keys and values, is decode/engine.py's, which this is the reference for."""
        x = self.embeddings(tgt)
        for layer in self.layers:
            x = layer(x, memory, memory_mask)
        return self.final_norm(x) if self.final_norm is not None else x


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.src_vocab_size <= 0 or cfg.tgt_vocab_size <= 0:
            raise MtError(
                "model.src_vocab_size and tgt_vocab_size must be set (they come from the tokenizer)"
            )
        self.cfg = cfg
        # The first decoder input: PAD, which embeds as zeros (see Embeddings); format-1 models used
        # BOS; M2M100 and NLLB start from EOS.
        self.start_token = {"pad": PAD, "bos": BOS, "eos": EOS}[cfg.decoder_start]
        positions = sinusoid_table(cfg.max_positions, cfg.d_model, cfg.positions)
        tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model, padding_idx=PAD)
        tie_src = cfg.tie_embeddings and cfg.shared_vocab
        src_embed = (
            tgt_embed if tie_src else nn.Embedding(cfg.src_vocab_size, cfg.d_model, padding_idx=PAD)
        )
        self.encoder = Encoder(
            cfg, Embeddings(src_embed, positions, cfg.dropout, cfg.scale_embedding)
        )
        self.decoder = Decoder(
            cfg, Embeddings(tgt_embed, positions, cfg.dropout, cfg.scale_embedding)
        )
        # Marian's final_logits_bias, where an imported model has one.
        self.output_projection = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=cfg.output_bias)
        self._init_weights()
        if cfg.tie_embeddings:
            self.output_projection.weight = tgt_embed.weight

    def _init_weights(self) -> None:
        for name, p in self.named_parameters():
            if "embeddings.token" in name:
                # std d^-1/2 so that scaling by sqrt(d) gives unit-variance inputs.
                nn.init.normal_(p, mean=0.0, std=self.cfg.d_model**-0.5)
                with torch.no_grad():
                    p[PAD].zero_()
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def attention_modules(self) -> dict[str, list[MultiHeadAttention]]:
        """Every attention of the model by kind, layer by layer (the heat maps record them)."""
        enc = cast("list[EncoderLayer]", self.encoder.layers)
        dec = cast("list[DecoderLayer]", self.decoder.layers)
        kinds = {"encoder": [layer.self_attn for layer in enc]}
        if self.cfg.decoder_autoreg == "attention":  # an SSRU decoder has no self-attention to draw
            kinds["decoder-self"] = [cast(MultiHeadAttention, layer.self_attn) for layer in dec]
        kinds["decoder-cross"] = [layer.cross_attn for layer in dec]
        return kinds

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S) ids, src_mask (B, S) True for real tokens -> memory (B, S, D)."""
        return self.encoder(src, key_mask(src_mask))

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V) of tgt_in (B, T), the decoder's input from its start
        token, given memory (B, S, D) of a source whose real tokens src_mask (B, S) marks."""
        return self.output_projection(self.decoder(tgt_in, memory, key_mask(src_mask)))

    def forward(self, src: Tensor, tgt_in: Tensor, at: Tensor | None = None) -> Tensor:
        """Teacher-forced logits (B, T, V), or (N, V) at the N positions where `at` (B, T) is
        True."""
        return self.output_projection(self.hidden(src, tgt_in, at))

    def hidden(self, src: Tensor, tgt_in: Tensor, at: Tensor | None = None) -> Tensor:
        """The decoder's last states, teacher-forced: (B, T, D), or (N, D) where `at` is True.

        The output layer is the largest product in the model, so training runs it on real target
        tokens only, not on padding (and model/loss.py fuses it with the loss)."""
        src_mask = src != PAD
        h = self.decoder(tgt_in, self.encode(src, src_mask), key_mask(src_mask))
        if at is not None:
            # index_select, not h[at]: its backward is a cheap index_add, boolean indexing's a slow
            # index_put.
            # (B, T, D) -> (N, D)
            h = h.flatten(0, 1).index_select(0, at.flatten().nonzero().squeeze(1))
        return h


def key_mask(src_mask: Tensor) -> Tensor | None:
    """(B, S) -> (B, 1, 1, S) for attention; None when nothing is padded, which allows fused
    kernels.

    Under torch.compile the mask is always kept: a branch on the data would break the graph at
    every call (the compiled code gains nothing from dropping it)."""
    if not torch.compiler.is_compiling() and bool(src_mask.all()):
        return None
    return src_mask[:, None, None, :]


def build_model(cfg: ModelConfig, init: bool = True) -> Transformer:
    """init=False: weights left as allocated, for a checkpoint to fill (every one of them: the load
    is strict). Drawing them was a tenth of a second of `mt translate`'s start."""
    if init:
        return Transformer(cfg)
    # nn.Linear, nn.Embedding, nn.LayerNorm and _init_weights all draw through torch.nn.init
    # (transformers' no_init_weights does the same). Not the meta device: there nn.Embedding's
    # normal_ imports torch's whole compiler stack, seconds more.
    names = ("uniform_", "normal_", "kaiming_uniform_", "xavier_uniform_", "zeros_", "ones_")
    saved = {name: getattr(nn.init, name) for name in names}
    try:
        for name in names:
            setattr(nn.init, name, lambda tensor, *args, **kwargs: tensor)
        return Transformer(cfg)
    finally:
        for name, fn in saved.items():
            setattr(nn.init, name, fn)
