"""Hugging Face M2M100ForConditionalGeneration (M2M100 and NLLB-200, dense): import and export.

The model is mt's Transformer with pre-norm layers, a final layer norm on each side, embeddings
scaled by sqrt(d), fairseq's sinusoid table read from position 2, ReLU, one embedding matrix
for the source, the target and the output, no output bias, and a decoder that starts from </s>
(model.pre_norm, model.positions fairseq, model.decoder_start eos). Layer weights have Marian's
names (interop/marian.py maps them); the final norms are model.encoder.layer_norm and
model.decoder.layer_norm. The tokenizer (data/m2m_vocab.py) is read from the folder's files:
sentencepiece.bpe.model, with M2M100's vocab.json or NLLB's tokenizer.json for the ids.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from mt_cli.config import Config, DecodeConfig, ModelConfig, TokenizerConfig
from mt_cli.data.m2m_vocab import M2MVocab
from mt_cli.data.marian_vocab import mt_order
from mt_cli.errors import MtError
from mt_cli.interop.hf_export import write_folder, write_json
from mt_cli.interop.hf_import import imported_beam, read_json, read_vocab, same_both_sides, shape
from mt_cli.interop.marian import from_marian_name, to_marian_name, to_marian_order
from mt_cli.model.checkpoint import Checkpoint

# fairseq's M2M100 language lists (M2M100Tokenizer's language_codes): the tokens __xx__ follow
# vocab.json's pieces in this order.
M2M100_CODES = (
    "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu "
    "ha he hi hr ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr "
    "ms my ne nl no ns oc or pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr "
    "uk ur uz vi wo xh yi yo zh zu"
).split()
WMT21_CODES = "en ha is ja cs ru zh de".split()
NLLB_CODE = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")  # deu_Latn
TOKENIZER_FILES = (
    "vocab.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
SPM = "sentencepiece.bpe.model"
FINAL_NORMS = {
    "model.encoder.layer_norm.": "encoder.final_norm.",
    "model.decoder.layer_norm.": "decoder.final_norm.",
}


def read_tokenizer(folder: Path, hf: dict[str, Any], tc: dict[str, Any]) -> M2MVocab:
    """The folder's tokenizer: M2M100's (vocab.json) or NLLB-200's (tokenizer.json)."""
    spm = folder / SPM
    if not spm.is_file():
        raise MtError(f"{spm}: not found; an M2M100 or NLLB folder has its SentencePiece model")
    nllb = str(tc.get("tokenizer_class", hf.get("tokenizer_class", ""))).startswith("Nllb")
    pieces, codes = _nllb_vocab(folder) if nllb else _m2m100_vocab(folder, tc)
    size = int(hf["vocab_size"])
    if len(pieces) > size:
        raise MtError(
            f"{folder}: the tokenizer has {len(pieces)} ids, "
            f"more than the model's vocab_size {size}"
        )
    # rows the model has and no piece uses
    filler = [f"<unused{i}>" for i in range(size - len(pieces))]
    hidden = [p for p in ("<s>", "<mask>") if p in pieces] + filler
    files = {n: (folder / n).read_bytes() for n in TOKENIZER_FILES if (folder / n).is_file()}
    state = {
        "spm": spm.read_bytes(),
        "vocab": pieces + filler,
        "specials": {"pad": "<pad>", "unk": "<unk>", "eos": "</s>"},
        "languages": codes,
        "hidden": hidden,
        "legacy": bool(tc.get("legacy_behaviour", False)),
        "flavour": "nllb" if nllb else "m2m100",
        "files": files,
    }
    return M2MVocab(state)


def _m2m100_vocab(folder: Path, tc: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """vocab.json's pieces by id, then a token per language (__de__), as M2M100Tokenizer numbers
    them."""
    pieces = read_vocab(folder / "vocab.json")
    lists = {"m2m100": M2M100_CODES, "wmt21": WMT21_CODES}
    which = str(tc.get("language_codes", "m2m100"))
    if which not in lists:
        where = folder / "tokenizer_config.json"
        raise MtError(f"{where}: language_codes {which!r}; M2M100 has m2m100 or wmt21")
    codes = {c: f"__{c}__" for c in lists[which]}
    return pieces + list(codes.values()), codes


def _nllb_vocab(folder: Path) -> tuple[list[str], dict[str, str]]:
    """tokenizer.json's pieces and added tokens by id; its language codes are the added tokens
    spelt as NLLB's (deu_Latn)."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise MtError(
            f"{path}: not found; "
            "save the NLLB tokenizer with transformers 4.x or later, which writes it"
        )
    data = read_json(path)
    by_id = {int(i): p for p, i in data.get("model", {}).get("vocab", {}).items()}
    by_id.update({int(t["id"]): str(t["content"]) for t in data.get("added_tokens", [])})
    if sorted(by_id) != list(range(len(by_id))):
        raise MtError(f"{path}: ids are not 0..{len(by_id) - 1}, each once")
    pieces = [by_id[i] for i in range(len(by_id))]
    codes = {p: p for p in pieces if NLLB_CODE.fullmatch(p)}
    if not codes:
        raise MtError(f"{path}: no language tokens (such as eng_Latn) among its added tokens")
    return pieces, codes


def model_config(hf: dict[str, Any], where: Path) -> ModelConfig:
    """M2M100Config's fields -> mt's ModelConfig, refusing what mt's Transformer cannot hold."""
    same_both_sides(hf, where)
    act = str(hf.get("activation_function", "relu"))
    if act not in ("relu", "gelu"):
        raise MtError(
            f"{where}: activation_function {act!r}; mt imports relu or gelu M2M100 models"
        )
    if hf.get("decoder_start_token_id", 2) != hf.get("eos_token_id", 2):
        raise MtError(
            f"{where}: decoder_start_token_id is not eos_token_id; M2M100 and NLLB start from </s>"
        )
    return ModelConfig(
        **shape(hf),
        pre_norm=True,
        src_vocab_size=int(hf["vocab_size"]),
        tgt_vocab_size=int(hf["vocab_size"]),
        shared_vocab=True,
        decoder_start="eos",
        activation=act,
        output_bias=False,
        scale_embedding=bool(hf.get("scale_embedding", True)),
        positions="fairseq",
    )


def import_m2m100(
    folder: Path, hf: dict[str, Any], weights: dict[str, torch.Tensor], out: Path
) -> Checkpoint:
    """An M2M100 or NLLB-200 folder's config, weights and tokenizer as an mt checkpoint."""
    tc = read_json(folder / "tokenizer_config.json", optional=True)
    tok = read_tokenizer(folder, hf, tc)
    codes = tuple(tok.codes)
    model_cfg = replace(
        model_config(hf, folder / "config.json"), source_langs=codes, target_langs=codes
    )
    beam = imported_beam(folder, hf)
    cfg = Config(
        model=model_cfg,
        tokenizer=TokenizerConfig(vocab_size=model_cfg.tgt_vocab_size),
        decode=DecodeConfig(beam=beam, precision="fp32"),  # until int8 is checked, as Marian's
    )
    return Checkpoint(cfg, tok, mt_state_dict(weights, tok, model_cfg), None)


def mt_state_dict(
    w: dict[str, torch.Tensor], tok: M2MVocab, cfg: ModelConfig
) -> dict[str, torch.Tensor]:
    """M2M100's weights -> mt's names, vocabulary rows in mt's id order."""
    order = torch.tensor(mt_order(tok.src_vocab, tok.specials))
    shared = w.get("model.shared.weight", w.get("model.decoder.embed_tokens.weight"))
    if shared is None:
        raise MtError("the weights hold no embeddings (model.shared.weight)")
    out = {from_marian_name(k): v for k, v in w.items() if ".layers." in k}
    for k, v in w.items():
        for theirs, ours in FINAL_NORMS.items():
            if k.startswith(theirs):
                out[ours + k[len(theirs) :]] = v
    if cfg.tie_embeddings:  # one matrix, every name of it in the state dict
        embed = shared[order].clone()
        out["decoder.embeddings.token.weight"] = out["encoder.embeddings.token.weight"] = embed
        out["output_projection.weight"] = embed
        return out
    # Untied (tie_word_embeddings false): transformers 5 keeps each embedding and the output layer
    # apart; a folder transformers 4 saved holds the shared one for both embeddings.
    for side in ("encoder", "decoder"):
        out[f"{side}.embeddings.token.weight"] = w.get(f"model.{side}.embed_tokens.weight", shared)[
            order
        ].clone()
    out["output_projection.weight"] = w["lm_head.weight"][order].clone()
    return out


def export_m2m100(ckpt: Checkpoint, out_dir: Path) -> Path:
    """Write the M2M100ForConditionalGeneration folder an imported model came from (config,
    weights, its tokenizer's files), atomically; the weights are the checkpoint's."""
    from safetensors.torch import save_file

    tok = ckpt.tokenizer
    assert isinstance(tok, M2MVocab)

    def write(tmp: Path) -> None:
        write_json(tmp / "config.json", hf_config(ckpt))
        write_json(
            tmp / "generation_config.json",
            {
                "decoder_start_token_id": 2,
                "eos_token_id": 2,
                "pad_token_id": 1,
                "bos_token_id": 0,
                "num_beams": ckpt.config.decode.beam,
                "max_length": 200,
            },
        )
        save_file(hf_state_dict(ckpt), str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / SPM).write_bytes(tok.m2m["spm"])
        for name, data in tok.m2m["files"].items():
            (tmp / name).write_bytes(data)

    return write_folder(out_dir, write)


def hf_config(ckpt: Checkpoint) -> dict[str, Any]:
    m, tok = ckpt.config.model, ckpt.tokenizer
    assert isinstance(tok, M2MVocab)
    config = {
        "architectures": ["M2M100ForConditionalGeneration"],
        "model_type": "m2m_100",
        "vocab_size": m.tgt_vocab_size,
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
        "tie_word_embeddings": m.tie_embeddings,
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "decoder_start_token_id": 2,
        "is_encoder_decoder": True,
    }
    if tok.m2m["flavour"] == "nllb":
        config["tokenizer_class"] = "NllbTokenizer"
    return config


def hf_state_dict(ckpt: Checkpoint) -> dict[str, torch.Tensor]:
    """mt's weights -> M2M100's names, vocabulary rows back in the model's own order."""
    tok, state = ckpt.tokenizer, ckpt.model_state
    assert isinstance(tok, M2MVocab)
    ids = mt_order(tok.src_vocab, tok.specials)
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if ".layers." in name:
            out[to_marian_name(name)] = tensor.contiguous()
        for theirs, ours in FINAL_NORMS.items():
            if name.startswith(ours):
                out[theirs + name[len(ours) :]] = tensor.contiguous()
    out["model.shared.weight"] = to_marian_order(state["decoder.embeddings.token.weight"], ids)
    if not ckpt.config.model.tie_embeddings:
        for side in ("encoder", "decoder"):
            out[f"model.{side}.embed_tokens.weight"] = to_marian_order(
                state[f"{side}.embeddings.token.weight"], ids
            )
        out["lm_head.weight"] = to_marian_order(state["output_projection.weight"], ids)
    return out
