"""The model's own attention probabilities for one sentence pair, every layer and head.

They come from the real forward pass: each MultiHeadAttention keeps what its softmax gave
(`record`) while the model reads the pair with teacher forcing, so the maps are what the model
computed, not a re-derivation. `mt attention` draws them (tools/heatmap.py); `mt serve`'s
/attention route returns them (serve/service.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mt_cli.data.tokenizer import Tokenizer
from mt_cli.errors import MtError
from mt_cli.model.transformer import Transformer

KINDS = {
    "encoder": "encoder self-attention",
    "decoder-self": "decoder self-attention (causal)",
    "decoder-cross": "encoder-decoder attention",
}


@dataclass
class AttentionMaps:
    src_pieces: list[str]  # the encoder's positions (source pieces and </s>)
    tgt_pieces: list[str]  # the decoder's input positions: the start token, then the target pieces
    target: str  # the target text drawn: the reference given, or the model's own translation
    maps: dict[str, list[Tensor]]  # kind -> per layer (H, queries, keys)


def check_one_model(model: object) -> Transformer:
    """The model whose attention is recorded: one Transformer, not an ensemble of them."""
    if not isinstance(model, Transformer):
        raise MtError("attention maps are drawn for one model, not an ensemble")
    return model


def record(model: object, tokenizer: Tokenizer, src: str, tgt: str) -> AttentionMaps:
    """Attention probabilities of `model` reading src -> tgt."""
    one = check_one_model(model).eval()
    src_ids, tgt_ids = tokenizer.encode_src([src])[0], tokenizer.encode_tgt([tgt])[0]
    layers = one.attention_modules()
    kept: dict[str, list[list[Tensor]]] = {kind: [] for kind in layers}
    for kind, modules in layers.items():
        for m in modules:
            m.record = []
            kept[kind].append(m.record)
    try:
        with torch.no_grad():
            one(torch.tensor([src_ids]), torch.tensor([[one.start_token] + tgt_ids]))
        maps = {
            kind: [record[0][0] for record in records] for kind, records in kept.items()
        }  # (1, H, q, k) -> (H, q, k)
    finally:
        for modules in layers.values():
            for m in modules:
                m.record = None
    tgt_pieces = ["<start>"] + tokenizer.tgt_pieces(tgt_ids)
    return AttentionMaps(tokenizer.src_pieces(src), tgt_pieces, tgt, maps)
