"""The model's own attention probabilities for sentence pairs read with teacher forcing: what heat
maps draw, what `/attention` answers and what word alignments are read from.

One implementation, owned here: for one teacher-forced pass, a forward hook on each attention
module asked for reads the inputs it was called with and computes its softmax again, by the
model's own `attention_probs`, on the model's own device. The model carries nothing for it. What
leaves this module is on the CPU, so a model served on a GPU answers the same.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from torch import Tensor, nn

from mt_cli.data.collate import collate
from mt_cli.data.tokenizer import PAD
from mt_cli.errors import MtError
from mt_cli.model.attention import MultiHeadAttention, attention_probs
from mt_cli.model.transformer import Transformer

if TYPE_CHECKING:  # the translator aligns through this module: a runtime import would be a cycle
    from mt_cli.decode.translator import Translator


@dataclass
class AttentionMaps:
    src_pieces: list[str]  # the encoder's positions (source pieces and </s>)
    tgt_pieces: list[str]  # the decoder's input positions: the start token, then the target pieces
    target: str  # the target text read: the reference given, or the model's own translation
    maps: dict[str, list[Tensor]]  # kind -> per layer (H, queries, keys), on the CPU


def _probabilities(module: MultiHeadAttention, args: tuple, kwargs: dict) -> Tensor:
    """The probabilities a call of `module` with these inputs weighs its values by: (B, H, Tq,
    Tk)."""
    bound = inspect.signature(module.forward).bind(*args, **kwargs)
    bound.apply_defaults()
    query, k, mask, causal = (bound.arguments[name] for name in ("query", "k", "mask", "causal"))
    return attention_probs(module.split_heads(module.q_proj(query)), k, mask, causal)


@contextmanager
def _recording(
    modules: dict[str, list[MultiHeadAttention]],
) -> Iterator[dict[str, list[list[Tensor]]]]:
    """While inside, each module's calls append their probabilities to its list; afterwards none
    does."""
    kept: dict[str, list[list[Tensor]]] = {
        kind: [[] for _ in layer_modules] for kind, layer_modules in modules.items()
    }
    hooks = []
    try:
        for kind, layer_modules in modules.items():
            for module, record in zip(layer_modules, kept[kind]):

                def hook(
                    m: nn.Module, args: tuple, kwargs: dict, _out: Tensor, record: list = record
                ) -> None:
                    record.append(
                        _probabilities(cast(MultiHeadAttention, m), args, kwargs).detach()
                    )

                hooks.append(module.register_forward_hook(hook, with_kwargs=True))
        yield kept
    finally:
        for handle in hooks:
            handle.remove()


@torch.inference_mode()
def read_attention(
    model: Transformer, src_ids: list[list[int]], tgt_ids: list[list[int]], kinds: dict[str, slice]
) -> dict[str, list[Tensor]]:
    """The attention of a batch of pairs (source ids ending in EOS, target ids without it), for the
    layers `kinds` picks (kind -> slice of layers): kind -> per layer (B, H, queries, keys) on the
    model's device, padding included; the decoder's queries are the start token and the target."""
    device = next(model.parameters()).device
    src, tgt_in, _ = (t.to(device) for t in collate(src_ids, tgt_ids, model.start_token))
    src_mask = src != PAD
    picked = {kind: model.attention_modules()[kind][layers] for kind, layers in kinds.items()}
    with _recording(picked) as kept:
        model.decode(tgt_in, model.encode(src, src_mask), src_mask)
    return {kind: [record[0] for record in records] for kind, records in kept.items()}


def record_attention(translator: Translator, src: str, tgt: str | None) -> AttentionMaps:
    """Every attention of the translator's model reading src -> tgt (or its own translation of
    src)."""
    model, tokenizer = translator.model, translator.tokenizer
    if not isinstance(model, Transformer):
        raise MtError("attention maps are drawn for one model, not an ensemble")
    if tgt is None:
        tgt = translator.translate([src])[0]
    src_ids, tgt_ids = tokenizer.encode_src([src])[0], tokenizer.encode_tgt([tgt])[0]
    was_training = model.training
    model.eval()
    try:
        every = {kind: slice(None) for kind in model.attention_modules()}
        maps = read_attention(model, [src_ids], [tgt_ids], every)
    finally:
        model.train(was_training)
    tgt_pieces = ["<start>"] + tokenizer.tgt_pieces(tgt_ids)
    # (1, H, q, k) -> (H, q, k)
    cpu = {kind: [probs[0].cpu() for probs in layers] for kind, layers in maps.items()}
    return AttentionMaps(tokenizer.src_pieces(src), tgt_pieces, tgt, cpu)


def align_batch(
    model: Transformer, src_ids: list[list[int]], tgt_ids: list[list[int]]
) -> list[list[int]]:
    """For each target token (EOS included), the source position (0-based, over the source pieces
    and their EOS) that the last decoder layer's cross-attention, averaged over its heads, weighs
    most when the model reads the pair: the attention that produced that token."""
    (last,) = read_attention(model, src_ids, tgt_ids, {"decoder-cross": slice(-1, None)})[
        "decoder-cross"
    ]
    best = last.float().mean(dim=1).argmax(dim=-1)  # (B, H, T, S) -> (B, T, S) -> (B, T)
    return [row[: len(tokens) + 1] for row, tokens in zip(best.tolist(), tgt_ids)]
