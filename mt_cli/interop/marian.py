"""Hugging Face MarianMTModel: the weight-name and vocabulary mapping (both directions), and export.

mt's Transformer was laid out like Marian from the start (post-norm, a bias on every projection,
the same sinusoid table, embeddings scaled by sqrt(d), decoding from a zero start vector), so export
renames weights and rotates the vocabulary by one: Marian keeps <pad> as the last id, and
CTranslate2's converter drops that last row, while mt keeps <pad> at id 0.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from mt_cli.data.marian_vocab import MarianVocab, mt_order
from mt_cli.data.tokenizer import EOS, PAD, UNK
from mt_cli.errors import MtError
from mt_cli.interop.hf_export import write_folder, write_json
from mt_cli.model.checkpoint import Checkpoint


def to_marian_id(token: int, vocab_size: int) -> int:
    """mt id -> Marian id: everything moves down one and <pad> (0) becomes the last id."""
    return (token - 1) % vocab_size


def from_marian_id(token: int, vocab_size: int) -> int:
    """Marian id -> mt id: the inverse of `to_marian_id`."""
    return (token + 1) % vocab_size


def to_marian_rows(weight: torch.Tensor) -> torch.Tensor:
    """Rows in mt id order -> rows in Marian id order."""
    return torch.roll(weight, shifts=-1, dims=0).contiguous()


def from_marian_rows(weight: torch.Tensor) -> torch.Tensor:
    """Rows in Marian id order -> rows in mt id order."""
    return torch.roll(weight, shifts=1, dims=0).contiguous()


def marian_ids(ckpt: Checkpoint) -> tuple[list[int], list[int]]:
    """For the source and the target side: the Marian id of each mt id. An imported model goes
    back to the ids it came with; one of mt's rotates by one (<pad> last)."""
    tok = ckpt.tokenizer
    if isinstance(tok, MarianVocab):
        return mt_order(tok.src_vocab, tok.specials), mt_order(tok.tgt_vocab, tok.specials)
    v = ckpt.config.model.tgt_vocab_size
    ids = [to_marian_id(i, v) for i in range(v)]
    return ids, ids


def to_marian_order(weight: torch.Tensor, ids: list[int]) -> torch.Tensor:
    """Rows in mt id order -> rows in Marian id order, row i going to Marian id ids[i]."""
    out = torch.empty_like(weight)
    out[torch.tensor(ids)] = weight
    return out


def check_exportable(ckpt: Checkpoint) -> None:
    m = ckpt.config.model
    fix = "train a new model with mt to export it"
    if m.pre_norm:
        raise MtError(
            f"not exportable: model.pre_norm is true, and MarianMTModel is post-norm only; {fix}"
        )
    if m.decoder_start != "pad":
        raise MtError(
            "not exportable: this checkpoint (format 1) decodes from BOS, while Marian and "
            "CTranslate2 start "
            f"from a zero vector; {fix}"
        )
    if not (m.shared_vocab and m.tie_embeddings) and not isinstance(ckpt.tokenizer, MarianVocab):
        raise MtError(
            "not exportable yet: only models with one joint vocabulary and tied embeddings export "
            "(CTranslate2's Marian converter reads a single vocabulary)"
        )


def marian_config(ckpt: Checkpoint) -> tuple[dict, dict]:
    """config.json and generation_config.json, in Marian's field names."""
    m, d = ckpt.config.model, ckpt.config.decode
    tgt_ids = marian_ids(ckpt)[1]
    pad, eos = tgt_ids[PAD], tgt_ids[EOS]
    config = {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": m.src_vocab_size,
        "decoder_vocab_size": m.tgt_vocab_size,
        "share_encoder_decoder_embeddings": m.shared_vocab,
        "tie_word_embeddings": m.tie_embeddings,
        "d_model": m.d_model,
        "encoder_layers": m.enc_layers,
        "decoder_layers": m.dec_layers,
        "encoder_attention_heads": m.n_heads,
        "decoder_attention_heads": m.n_heads,
        "encoder_ffn_dim": m.ffn_dim,
        "decoder_ffn_dim": m.ffn_dim,
        "activation_function": m.activation,
        "max_position_embeddings": m.max_positions,
        "scale_embedding": m.scale_embedding,
        "dropout": m.dropout,
        "attention_dropout": m.attention_dropout,
        "activation_dropout": m.activation_dropout,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "decoder_start_token_id": pad,  # PAD's embedding is the zero start vector
        "forced_eos_token_id": eos,
        "is_encoder_decoder": True,
    }
    generation = {
        "decoder_start_token_id": pad,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "forced_eos_token_id": eos,
        "bad_words_ids": [[pad]],  # mt never outputs <pad> either
        "num_beams": d.beam,
        "length_penalty": d.length_penalty,
        "max_length": m.max_positions - 1,
    }
    return config, generation


# mt's names for the parts of a layer -> Marian's (encoder layers have one attention sublayer).
_ENCODER_NAMES = {
    "attn_sublayer.norm": "self_attn_layer_norm",
    "ffn_sublayer.norm": "final_layer_norm",
    "feed_forward.": "",
}
_DECODER_NAMES = {
    "self_sublayer.norm": "self_attn_layer_norm",
    "cross_sublayer.norm": "encoder_attn_layer_norm",
    "ffn_sublayer.norm": "final_layer_norm",
    "cross_attn.": "encoder_attn.",
    "feed_forward.": "",
}
_LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(.+)$")


def to_marian_name(name: str) -> str:
    """An mt weight name of a layer -> MarianMTModel's, e.g.
    decoder.layers.0.cross_attn.q_proj.weight -> model.decoder.layers.0.encoder_attn.q_proj.weight.
    Embeddings are mapped by `marian_state_dict`."""
    m = _LAYER.match(name)
    if m is None:
        raise ValueError(f"{name}: not a layer weight")
    side, layer, rest = m.groups()
    for ours, theirs in (_ENCODER_NAMES if side == "encoder" else _DECODER_NAMES).items():
        if rest.startswith(ours):
            rest = theirs + rest[len(ours) :]
            break
    return f"model.{side}.layers.{layer}.{rest}"


def from_marian_name(name: str) -> str:
    """A MarianMTModel layer weight name -> mt's: the inverse of `to_marian_name`."""
    m = _LAYER.match(name.removeprefix("model.")) if name.startswith("model.") else None
    if m is None:
        raise ValueError(f"{name}: not a Marian layer weight")
    side, layer, rest = m.groups()
    if rest.startswith(("fc1.", "fc2.")):
        return f"{side}.layers.{layer}.feed_forward.{rest}"
    for ours, theirs in (_ENCODER_NAMES if side == "encoder" else _DECODER_NAMES).items():
        if theirs and rest.startswith(theirs):
            return f"{side}.layers.{layer}.{ours}{rest[len(theirs) :]}"
    return f"{side}.layers.{layer}.{rest}"


def marian_state_dict(ckpt: Checkpoint) -> dict[str, torch.Tensor]:
    """mt weight names -> MarianMTModel's; tied embeddings are written once, as model.shared."""
    m, state = ckpt.config.model, ckpt.model_state
    src_ids, tgt_ids = marian_ids(ckpt)
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if name.endswith("embeddings.token.weight") or name.startswith("output_projection."):
            continue
        out[to_marian_name(name)] = tensor.contiguous()

    def rows(name: str, ids: list[int]) -> torch.Tensor:
        embed = state[name].clone()
        # mt embeds PAD as zeros; Marian reads the row (its decoder starts from it)
        embed[PAD] = 0.0
        return to_marian_order(embed, ids)

    if m.shared_vocab:
        out["model.shared.weight"] = rows("decoder.embeddings.token.weight", tgt_ids)
    else:
        out["model.encoder.embed_tokens.weight"] = rows("encoder.embeddings.token.weight", src_ids)
        out["model.decoder.embed_tokens.weight"] = rows("decoder.embeddings.token.weight", tgt_ids)
    if not m.tie_embeddings:
        out["lm_head.weight"] = to_marian_order(state["output_projection.weight"], tgt_ids)
    bias = state.get("output_projection.bias", torch.zeros(m.tgt_vocab_size)).clone()
    # mt leaves PAD out of the softmax; -inf keeps it out in transformers too (CTranslate2 drops the
    # row).
    bias[PAD] = float("-inf")
    out["final_logits_bias"] = to_marian_order(bias, tgt_ids)[None, :]
    return out


def marian_vocab(ckpt: Checkpoint) -> dict[str, int]:
    sp = ckpt.tokenizer.tgt
    v = sp.get_piece_size()
    return {sp.id_to_piece(i): to_marian_id(i, v) for i in range(v)}


def write_tokenizer(ckpt: Checkpoint, out: Path) -> None:
    """source.spm, target.spm, vocab.json (and target_vocab.json) and tokenizer_config.json."""
    tok = ckpt.tokenizer
    if isinstance(tok, MarianVocab):  # back as it was imported
        (out / "source.spm").write_bytes(tok.state["source_spm"])
        (out / "target.spm").write_bytes(tok.state["target_spm"])
        write_json(out / "vocab.json", {p: i for i, p in enumerate(tok.state["vocab"])})
        if tok.separate:
            write_json(
                out / "target_vocab.json", {p: i for i, p in enumerate(tok.state["target_vocab"])}
            )
        specials = {f"{k}_token": v for k, v in tok.specials.items()}
        separate = tok.separate
    else:
        spm_bytes = tok.to_state()["joint"]
        (out / "source.spm").write_bytes(spm_bytes)
        (out / "target.spm").write_bytes(spm_bytes)
        write_json(out / "vocab.json", marian_vocab(ckpt))
        sp = tok.tgt
        specials = {
            "unk_token": sp.id_to_piece(UNK),
            "eos_token": sp.id_to_piece(EOS),
            "pad_token": sp.id_to_piece(PAD),
        }
        separate = False
    write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "MarianTokenizer",
            **specials,
            "model_max_length": ckpt.config.model.max_positions,
            "separate_vocabs": separate,
            **({"target_vocab_file": "target_vocab.json"} if separate else {}),
        },
    )


def export_marian(ckpt: Checkpoint, out_dir: Path) -> Path:
    """Write a MarianMTModel folder (config, weights, MarianTokenizer files) to out_dir, atomically
    (hf_export.write_folder)."""
    from safetensors.torch import save_file

    check_exportable(ckpt)

    def write(tmp: Path) -> None:
        config, generation = marian_config(ckpt)
        write_json(tmp / "config.json", config)
        write_json(tmp / "generation_config.json", generation)
        save_file(
            marian_state_dict(ckpt), str(tmp / "model.safetensors"), metadata={"format": "pt"}
        )
        write_tokenizer(ckpt, tmp)

    return write_folder(out_dir, write)
