"""The Transformer of "Attention Is All You Need", named as in its Figure 1.

Parameter layout follows Hugging Face's MarianMTModel (biases on every projection, the same
sinusoidal table, post-norm, no final encoder/decoder norm) so that export is a copy of weights.
With model.pre_norm, model.positions fairseq and model.decoder_start eos it is M2M100's and
NLLB's (pre-norm layers with a final norm on each side), which import and export the same way.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from mt_cli.config import ModelConfig
from mt_cli.data.tokenizer import BOS, EOS, PAD
from mt_cli.errors import MtError
from mt_cli.model.attention import MultiHeadAttention
from mt_cli.model.layers import DecoderLayer, Embeddings, EncoderLayer
from mt_cli.model.positions import sinusoid_table


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
        """The decoder's last states, teacher-forced: (B, T, D), or (N, D) at the N positions
        `at` names: True in a (B, T) mask, or their flat indices (N,) into B * T.

        The output layer is the largest product in the model, so training runs it on real target
        tokens only, not on padding (and model/loss.py fuses it with the loss). Training passes
        indices made on the host with its batch: finding them here (nonzero) would make the host
        wait for a GPU at every step."""
        src_mask = src != PAD
        # Training never reads the mask back (the host runs ahead of a GPU); nearly every
        # training batch is padded anyway.
        mask = key_mask(src_mask, read=not self.training)
        h = self.decoder(tgt_in, self.encoder(src, mask), mask)
        if at is not None:
            index = at.flatten().nonzero().squeeze(1) if at.dtype == torch.bool else at
            # index_select, not h[at]: its backward is a cheap index_add, boolean indexing's a slow
            # index_put.
            h = h.flatten(0, 1).index_select(0, index)  # (B, T, D) -> (N, D)
        return h


def key_mask(src_mask: Tensor, read: bool = True) -> Tensor | None:
    """(B, S) -> (B, 1, 1, S) for attention; None when nothing is padded, which allows fused
    kernels: found by reading the mask, which `read=False` skips.

    Under torch.compile the mask is always kept: a branch on the data would break the graph at
    every call (the compiled code gains nothing from dropping it)."""
    if read and not torch.compiler.is_compiling() and bool(src_mask.all()):
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
