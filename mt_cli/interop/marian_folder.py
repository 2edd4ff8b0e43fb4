"""A Marian model folder as Bergamot / Firefox Translations ship their students: a binary model
(interop/marian_bin.py), one SentencePiece vocabulary for both sides, a decoder config (yml),
read as an mt checkpoint.

The model is rebuilt from the file's own `special:model.yml`: a post-norm Transformer ("dan" after
each sublayer) whose decoder self-attention may be an SSRU (`transformer-decoder-autoreg: rnn`,
`dec-cell: ssru`), all embeddings tied, a bias on the output layer, embeddings scaled by sqrt(d),
Marian's own sinusoids (model.positions tensor2tensor) and layer-norm epsilon (1e-6), decoding from
a zero vector. Marian multiplies x W with W as (in, out); nn.Linear holds W^T. int8 matrices are
read as floats (int8 / their multiplier), which is what the int8 engine then quantizes again.

The vocabulary's ids are SentencePiece's (`</s>` 0, `<unk>` 1, no padding id); they are laid out
as a Hugging Face Marian model's, the pieces then `<pad>` last, so that mt's Marian tokenizer
(data/marian_vocab.py) and its id permutation serve both.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece
import torch
import yaml

from mt_cli.config import Config, DecodeConfig, ModelConfig, TokenizerConfig
from mt_cli.data.languages import NAMES
from mt_cli.data.marian_vocab import MarianVocab, mt_order
from mt_cli.data.tokenizer import PAD
from mt_cli.decode.shortlist import Shortlist
from mt_cli.errors import MtError
from mt_cli.interop.marian_bin import Item, floats, model_config, read_model
from mt_cli.interop.marian_lex import read_lex
from mt_cli.model.checkpoint import Checkpoint

ACTIVATIONS = {"relu": "relu", "swish": "swish", "gelu": "gelu"}


def read_folder(folder: Path) -> Checkpoint:
    """The checkpoint of the Marian model in `folder` (its decoder yml names the model and
    vocabularies)."""
    settings, yml = decoder_settings(folder)
    models = [folder / m for m in settings.get("models", [])]
    if len(models) != 1:
        raise MtError(
            f"{yml}: names {len(models)} models; mt imports one (an ensemble: import each)"
        )
    path = models[0]
    if path.suffix not in (".bin", ".npz"):
        raise MtError(
            f"{path}: mt reads Marian's binary (.bin) and numpy (.npz) models; "
            "convert it with marian-conv"
        )
    items = read_model(path)
    marian = model_config(items, path)
    vocabs = {folder / v for v in settings.get("vocabs", [])}
    if len(vocabs) != 1 or not all(v.suffix == ".spm" for v in vocabs):
        raise MtError(
            f"{yml}: mt imports models with one SentencePiece vocabulary (.spm) for both sides"
        )
    vocab = next(iter(vocabs))
    tokenizer = _tokenizer(vocab.read_bytes())
    _check_vocabulary(items, path, tokenizer, vocab)
    src, tgt = _languages(folder)
    cfg = replace(_model_config(marian, tokenizer, path), source_langs=src, target_langs=tgt)
    decode = DecodeConfig(
        # fp32, as their own engine decodes: mt's int8 (a scale per input row, not the fixed input
        # scales, "alphas", these weights were trained for) departs from that engine's output
        # where fp32 matches it (benchmarks/student_parity.py measures both).
        precision="fp32",
        beam=int(settings.get("beam-size", 1)),
        length_penalty=float(settings.get("normalize", 1.0)),
        max_len_ratio=float(settings.get("max-length-factor", 3.0)),
    )
    config = Config(
        model=cfg,
        tokenizer=TokenizerConfig(vocab_size=cfg.tgt_vocab_size, joint=True),
        decode=decode,
    )
    weights = state_dict(items, path, tokenizer, cfg)
    lists = settings.get("shortlist") or []
    shortlist = _shortlist(folder / lists[0], tokenizer).to_state() if lists else None
    return Checkpoint(config, tokenizer, weights, None, shortlist)


def _check_vocabulary(items: dict[str, Item], path: Path, tok: MarianVocab, vocab: Path) -> None:
    """One line where the vocabulary is not the one the embeddings were trained with."""
    pieces = len(tok.src_vocab) - 1  # less the <pad> mt adds
    if "Wemb" in items and items["Wemb"].shape[0] != pieces:
        rows = f"the model's embeddings ({path.name}) have {items['Wemb'].shape[0]:,} rows"
        raise MtError(
            f"{vocab}: {pieces:,} pieces, but {rows}; "
            "the folder mixes two models' files: use the vocabulary the model was trained with"
        )


def _shortlist(path: Path, tok: MarianVocab) -> Shortlist:
    """Marian's binary shortlist in mt's form: each source piece's targets (up to `best`, -1 after)
    and the `first` most frequent targets, every id in mt's order."""
    lex = read_lex(path)
    to_mt = torch.empty(len(tok.src_vocab), dtype=torch.long)
    # Marian -> mt
    to_mt[torch.tensor(mt_order(tok.src_vocab, tok.specials))] = torch.arange(len(tok.src_vocab))
    sizes = torch.from_numpy(np.diff(lex.offsets.astype(np.int64)))
    width = int(sizes.max()) if len(sizes) else 0
    table = torch.full((len(tok.src_vocab), width), -1, dtype=torch.int32)
    targets = to_mt[torch.from_numpy(lex.targets.astype(np.int64))]
    rows = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    cols = torch.arange(len(targets)) - torch.repeat_interleave(
        torch.cumsum(sizes, 0) - sizes, sizes
    )
    table[to_mt[rows], cols] = targets.int()
    frequent = to_mt[torch.arange(min(lex.first, len(tok.tgt_vocab) - 1))].int()
    return Shortlist(table, frequent, len(tok.tgt_vocab))


def _languages(folder: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The languages model_info.json names (translateLocally's: "English", "Portuguese"), as
    codes."""
    info_path = folder / "model_info.json"
    if not info_path.is_file():
        return (), ()
    info = json.loads(info_path.read_text(encoding="utf-8"))
    codes = {name.lower(): code for code, name in NAMES.items()}
    src, tgt = (codes.get(str(info.get(key, "")).lower()) for key in ("src", "trg"))
    return ((src,) if src else ()), ((tgt,) if tgt else ())


def decoder_settings(folder: Path) -> tuple[dict[str, Any], Path]:
    """The folder's decoder config (`config*.yml`, Bergamot's `config.intgemm8bitalpha.yml`)."""
    found = sorted(folder.glob("config*.yml")) or sorted(folder.glob("*.yml"))
    if not found:
        raise MtError(
            f"{folder}: no decoder config (config*.yml) naming the model and its vocabulary"
        )
    settings = yaml.safe_load(found[0].read_text(encoding="utf-8"))
    if not isinstance(settings, dict):
        raise MtError(f"{found[0]}: not a mapping of Marian options")
    return settings, found[0]


def _tokenizer(spm: bytes) -> MarianVocab:
    sp = sentencepiece.SentencePieceProcessor(model_proto=spm)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    state = {
        "source_spm": spm,
        "target_spm": spm,
        "specials": {
            "pad": "<pad>",
            "unk": sp.id_to_piece(sp.unk_id()),
            "eos": sp.id_to_piece(sp.eos_id()),
        },
        "vocab": [
            *pieces,
            "<pad>",
        ],  # Marian has no padding id; Hugging Face's conversion adds it last
        "target_vocab": None,
    }
    return MarianVocab(state)


def _model_config(m: dict[str, Any], tok: MarianVocab, path: Path) -> ModelConfig:
    def need(key: str, *allowed: Any) -> Any:
        value = m.get(key)
        if value not in allowed:
            raise MtError(f"{path}: {key}: {value!r}; mt imports {' or '.join(map(repr, allowed))}")
        return value

    need("type", "transformer")
    need("transformer-postprocess", "dan")
    need("transformer-preprocess", "", None)
    need("tied-embeddings-all", True)
    autoreg = need("transformer-decoder-autoreg", "self-attention", "rnn", None)
    if autoreg == "rnn":
        need("dec-cell", "ssru")
    activation = need("transformer-ffn-activation", *ACTIVATIONS)
    for key in ("transformer-ffn-depth", "transformer-decoder-ffn-depth"):
        need(key, 2, 0, None)  # 0: the decoder's is the encoder's
    dim_ffn = int(m["transformer-dim-ffn"])
    if int(m.get("transformer-decoder-dim-ffn") or dim_ffn) != dim_ffn:
        raise MtError(
            f"{path}: the decoder's feed-forward width differs from the encoder's, "
            "which mt does not hold"
        )
    return ModelConfig(
        d_model=int(m["dim-emb"]),
        n_heads=int(m["transformer-heads"]),
        ffn_dim=dim_ffn,
        enc_layers=int(m["enc-depth"]),
        dec_layers=int(m["dec-depth"]),
        dropout=0.0,
        tie_embeddings=True,
        shared_vocab=True,
        src_vocab_size=tok.src_vocab_size,
        tgt_vocab_size=tok.tgt_vocab_size,
        activation=ACTIVATIONS[activation],
        output_bias=True,
        decoder_autoreg="ssru" if autoreg == "rnn" else "attention",
        # Marian's own sinusoids, not Hugging Face's (model/positions.py)
        positions="tensor2tensor",
        norm_eps=1e-6,  # Marian's layerNorm in its Transformer
    )


def _linear(out: dict[str, torch.Tensor], name: str, get: Any, w: str, b: str | None) -> None:
    out[f"{name}.weight"] = get(w).t().contiguous()  # Marian's (in, out) -> nn.Linear's (out, in)
    if b is not None:
        out[f"{name}.bias"] = get(b).reshape(-1)


def _norm(out: dict[str, torch.Tensor], name: str, get: Any, prefix: str) -> None:
    out[f"{name}.weight"], out[f"{name}.bias"] = (
        get(f"{prefix}_ln_scale").reshape(-1),
        get(f"{prefix}_ln_bias").reshape(-1),
    )


def _attention(out: dict[str, torch.Tensor], name: str, get: Any, prefix: str) -> None:
    for p in ("q", "k", "v"):
        _linear(out, f"{name}.{p}_proj", get, f"{prefix}_W{p}", f"{prefix}_b{p}")
    _linear(out, f"{name}.out_proj", get, f"{prefix}_Wo", f"{prefix}_bo")


def _ffn(out: dict[str, torch.Tensor], name: str, get: Any, prefix: str) -> None:
    _linear(out, f"{name}.feed_forward.fc1", get, f"{prefix}_ffn_W1", f"{prefix}_ffn_b1")
    _linear(out, f"{name}.feed_forward.fc2", get, f"{prefix}_ffn_W2", f"{prefix}_ffn_b2")
    _norm(out, f"{name}.ffn_sublayer.norm", get, f"{prefix}_ffn_ffn")


def state_dict(
    items: dict[str, Item], path: Path, tok: MarianVocab, cfg: ModelConfig
) -> dict[str, torch.Tensor]:
    """Marian's items -> mt's weights (floats), vocabulary rows in mt's id order."""

    def get(name: str) -> torch.Tensor:
        if name not in items:
            raise MtError(
                f"{path}: no item {name}, which a model of its config has; "
                "the file is not a whole model"
            )
        return floats(items[name], path)

    out: dict[str, torch.Tensor] = {}
    for i in range(cfg.enc_layers):
        name, prefix = f"encoder.layers.{i}", f"encoder_l{i + 1}"
        _attention(out, f"{name}.self_attn", get, f"{prefix}_self")
        _norm(out, f"{name}.attn_sublayer.norm", get, f"{prefix}_self_Wo")
        _ffn(out, name, get, prefix)
    for i in range(cfg.dec_layers):
        name, prefix = f"decoder.layers.{i}", f"decoder_l{i + 1}"
        if cfg.decoder_autoreg == "ssru":
            _linear(out, f"{name}.ssru.input_proj", get, f"{prefix}_rnn_W", None)
            _linear(out, f"{name}.ssru.forget_proj", get, f"{prefix}_rnn_Wf", f"{prefix}_rnn_bf")
            _norm(out, f"{name}.self_sublayer.norm", get, f"{prefix}_rnn_ffn")
        else:
            _attention(out, f"{name}.self_attn", get, f"{prefix}_self")
            _norm(out, f"{name}.self_sublayer.norm", get, f"{prefix}_self_Wo")
        _attention(out, f"{name}.cross_attn", get, f"{prefix}_context")
        _norm(out, f"{name}.cross_sublayer.norm", get, f"{prefix}_context_Wo")
        _ffn(out, name, get, prefix)
    order = torch.tensor(mt_order(tok.src_vocab, tok.specials))
    emb = get("Wemb")
    emb = torch.cat([emb, emb.new_zeros(1, emb.size(1))])[order]  # + <pad>'s row, then mt's order
    bias = get("decoder_ff_logit_out_b").reshape(-1)
    bias = torch.cat([bias, bias.new_zeros(1)])[order]
    bias[PAD] = 0.0
    for name in (
        "encoder.embeddings.token.weight",
        "decoder.embeddings.token.weight",
        "output_projection.weight",
    ):
        out[name] = emb  # tied: one tensor under every name
    out["output_projection.bias"] = bias
    return out
