"""`mt import`: a Hugging Face MarianMTModel folder (OPUS-MT's layout, as `save_pretrained` writes
it) -> an ordinary mt checkpoint, which every command and the Translator take unchanged. M2M100
and NLLB-200 folders go to interop/m2m100.py.

The folder holds config.json, model.safetensors (or pytorch_model.bin, read with
weights_only=True: no code is unpickled), source.spm, target.spm, vocab.json (target_vocab.json
too when the sides have separate vocabularies) and tokenizer_config.json. Weight names map back
through interop/marian.py; vocabulary rows are permuted to mt's fixed special ids
(data/marian_vocab.py). What transformers' MarianMTModel cannot hold either (pre-norm, a
layer norm on the embeddings, learned positions) is refused in one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from mt_cli.config import IMPORTED_BEAM, Config, DecodeConfig, ModelConfig, TokenizerConfig
from mt_cli.data.languages import language_code
from mt_cli.data.marian_vocab import MarianVocab, mt_order
from mt_cli.data.tokenizer import PAD
from mt_cli.errors import MtError
from mt_cli.interop.marian import from_marian_name
from mt_cli.model import checkpoint

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}


def import_hf(folder: Path, out: Path) -> Path:
    """Read a MarianMTModel or M2M100ForConditionalGeneration (M2M100, NLLB-200) folder and write
    it as an mt checkpoint at `out`."""
    name = str(folder)
    folder = resolve_folder(name)
    hf = read_json(folder / "config.json")
    kind = hf.get("model_type")
    if kind in ("nllb-moe", "nllb_moe"):
        raise MtError(
            f"{folder / 'config.json'}: {kind} is a mixture-of-experts model, "
            "which mt does not run; import a dense NLLB-200 (nllb-200-distilled-600M, -1.3B, -3.3B)"
        )
    if kind == "m2m_100":
        from mt_cli.interop.m2m100 import import_m2m100

        checkpoint.save(out, import_m2m100(folder, hf, load_weights(folder), out))
        return out
    if kind != "marian":
        raise MtError(
            f"{folder / 'config.json'}: model_type is {kind!r}; "
            "mt imports marian and m2m_100 models"
        )
    tokenizer = read_tokenizer(folder, hf)
    src, tgt = languages(name, hf, folder, tokenizer)
    model_cfg = replace(
        model_config(hf, tokenizer, folder / "config.json"), source_langs=src, target_langs=tgt
    )
    beam = imported_beam(folder, hf)
    cfg = Config(
        model=model_cfg,
        tokenizer=TokenizerConfig(vocab_size=model_cfg.tgt_vocab_size, joint=tokenizer.joint),
        # fp32 until int8 is checked on data (mt import --dev-src, mt tune-precision): these
        # weights were trained and are judged in fp32, and nothing has shown int8 keeps them so.
        decode=DecodeConfig(beam=beam, precision="fp32"),
    )
    state = mt_state_dict(load_weights(folder), hf, tokenizer, model_cfg)
    checkpoint.save(out, checkpoint.Checkpoint(cfg, tokenizer, state, None))
    return out


HUB_FILES = [
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "pytorch_model.bin",
    "*.spm",
    "*.json",
]


def resolve_folder(name: str) -> Path:
    """A local folder as it is; an id such as Helsinki-NLP/opus-mt-de-en fetched from the Hugging
    Face hub (huggingface_hub's cache) when the machine is online."""
    if Path(name).is_dir():
        return Path(name)
    if name.count("/") != 1 or Path(name).exists():
        raise MtError(
            f"{name}: not a folder; "
            "give a folder written by save_pretrained (config.json, ...) or a hub id"
        )
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise MtError(
            f"{name}: fetching a hub id needs huggingface_hub (pip install huggingface_hub)"
        ) from None
    try:
        return Path(snapshot_download(name, allow_patterns=HUB_FILES))
    except Exception as e:  # offline, unknown id, no permission: the hub's own message, on one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MtError(
            f"{name}: could not fetch it from the Hugging Face hub ({first}); on a machine that is "
            "online, save it with save_pretrained and give that folder"
        ) from None


def read_json(path: Path, optional: bool = False) -> dict[str, Any]:
    """A JSON file of a save_pretrained folder; an optional one that is missing reads as {}."""
    if not path.is_file():
        if optional:
            return {}
        raise MtError(f"{path}: not found; a save_pretrained folder has it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise MtError(f"{path}: not valid JSON ({e})") from None
    return data


def imported_beam(folder: Path, hf: dict[str, Any]) -> int:
    """The beam the model's authors set (generation_config.json, else config.json), or mt's
    default."""
    generation = read_json(folder / "generation_config.json", optional=True)
    return int(generation.get("num_beams", hf.get("num_beams", IMPORTED_BEAM)) or IMPORTED_BEAM)


def read_tokenizer(folder: Path, hf: dict[str, Any]) -> MarianVocab:
    tc = read_json(folder / "tokenizer_config.json", optional=True)
    specials = {
        k: str(tc.get(f"{k}_token", default))
        for k, default in (("pad", "<pad>"), ("unk", "<unk>"), ("eos", "</s>"))
    }
    separate = bool(tc.get("separate_vocabs", False))
    target_vocab = folder / str(tc.get("target_vocab_file") or "target_vocab.json")
    state: dict[str, Any] = {
        "source_spm": _bytes(folder / "source.spm"),
        "target_spm": _bytes(folder / "target.spm"),
        "specials": specials,
        "vocab": read_vocab(folder / "vocab.json"),
        "target_vocab": read_vocab(target_vocab) if separate else None,
    }
    tok = MarianVocab(state)
    tgt = state["target_vocab"] or state["vocab"]
    for key, piece in (("pad_token_id", specials["pad"]), ("eos_token_id", specials["eos"])):
        if key in hf and tgt[int(hf[key])] != piece:
            raise MtError(
                f"{folder / 'config.json'}: {key} {hf[key]} is {tgt[int(hf[key])]!r} "
                f"in the vocabulary, not {piece!r} as tokenizer_config.json says"
            )
    return tok


def languages(
    name: str, hf: dict[str, Any], folder: Path, tok: MarianVocab
) -> tuple[tuple[str, ...], ...]:
    """The languages the model reads and writes, best effort, each side () when nothing says:
    tokenizer_config.json's source_lang and target_lang (OPUS-MT's carry them); else the model's
    name (the hub id, config.json's _name_or_path, or the folder's name: opus-mt-de-en, several
    codes joined by _ or +). A multi-target model's >>xx<< tokens are its target languages, as
    they are spelt. Only ISO 639-1 codes are taken: group names (ROMANCE, mul, gem) say nothing."""
    tc = read_json(folder / "tokenizer_config.json", optional=True)
    sides = [language_code(str(tc.get(k) or "")) for k in ("source_lang", "target_lang")]
    found: list[tuple[str, ...]] = [(c,) if c else () for c in sides]
    for candidate in (name, str(hf.get("_name_or_path") or ""), folder.name):
        named = _named(candidate)
        found = [have or more for have, more in zip(found, named)]
    tokens = tuple(
        p[2:-2] for p in tok.src_vocab if p.startswith(">>") and p.endswith("<<") and len(p) > 4
    )
    return found[0], tokens or found[1]


def _named(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The languages an OPUS-MT-style name gives: opus-mt-de-en, opus-mt-tc-big-en-fr,
    opus-mt-fi_sv-en."""
    found = re.search(r"opus-mt-(?:tc-(?:big|base)-|tc-)?([^-/]+)-([^-/]+)$", name.rstrip("/"))
    if not found:
        return (), ()
    codes = [
        tuple(c for c in re.split(r"[_+]", side) if language_code(c)) for side in found.groups()
    ]
    return codes[0], codes[1]


def _bytes(path: Path) -> bytes:
    if not path.is_file():
        raise MtError(f"{path}: not found; a Marian folder has source.spm and target.spm")
    return path.read_bytes()


def read_vocab(path: Path) -> list[str]:
    """vocab.json (piece -> id) as a list in id order; the ids must be 0..n-1."""
    data = read_json(path)
    by_id = {int(i): p for p, i in data.items()}
    if sorted(by_id) != list(range(len(data))):
        raise MtError(f"{path}: ids are not 0..{len(data) - 1}, each once")
    return [by_id[i] for i in range(len(data))]


def model_config(hf: dict[str, Any], tok: MarianVocab, where: Path) -> ModelConfig:
    """MarianConfig's fields -> mt's ModelConfig, refusing what neither model can hold."""
    for key, bad, why in (
        ("normalize_before", True, "pre-norm"),
        ("normalize_embedding", True, "a layer norm on the embeddings"),
        ("static_position_embeddings", False, "learned position embeddings"),
    ):
        if hf.get(key) is bad:
            raise MtError(
                f"{where}: {key} is {bad} ({why}), which MarianMTModel (and mt) do not have"
            )
    same_both_sides(hf, where)
    act = ACTIVATIONS.get(str(hf.get("activation_function", "swish")))
    if act is None:
        raise MtError(
            f"{where}: activation_function {hf.get('activation_function')!r}; "
            "mt has relu, gelu, swish"
        )
    if hf.get("decoder_start_token_id", hf.get("pad_token_id")) != hf.get("pad_token_id"):
        raise MtError(
            f"{where}: decoder_start_token_id is not pad_token_id; Marian models start from <pad>"
        )
    v = int(hf["vocab_size"])
    if tok.src_vocab_size != v:
        raise MtError(f"{where}: vocab_size {v}, but vocab.json holds {tok.src_vocab_size} pieces")
    return ModelConfig(
        **shape(hf),
        pre_norm=False,
        src_vocab_size=v,
        tgt_vocab_size=tok.tgt_vocab_size,
        shared_vocab=bool(hf.get("share_encoder_decoder_embeddings", True)),
        decoder_start="pad",
        activation=act,
        output_bias=True,
        scale_embedding=bool(hf.get("scale_embedding", False)),
    )


def shape(hf: dict[str, Any]) -> dict[str, Any]:
    """The ModelConfig fields that MarianConfig and M2M100Config (both BART-shaped) spell alike."""
    return {
        "d_model": hf["d_model"],
        "n_heads": hf["encoder_attention_heads"],
        "ffn_dim": hf["encoder_ffn_dim"],
        "enc_layers": hf["encoder_layers"],
        "dec_layers": hf["decoder_layers"],
        "dropout": float(hf.get("dropout", 0.1)),
        "attention_dropout": float(hf.get("attention_dropout", 0.0)),
        "activation_dropout": float(hf.get("activation_dropout", 0.0)),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)),
        "max_positions": int(hf["max_position_embeddings"]),
    }


def same_both_sides(hf: dict[str, Any], where: Path) -> None:
    """The encoder and decoder share their FFN width and head count, as mt's one field of each
    does."""
    for a, b in (
        ("encoder_ffn_dim", "decoder_ffn_dim"),
        ("encoder_attention_heads", "decoder_attention_heads"),
    ):
        if hf[a] != hf[b]:
            raise MtError(
                f"{where}: {a} {hf[a]} differs from {b} {hf[b]}; mt has one of each for both sides"
            )


def load_weights(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").is_file():
        try:
            return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        except Exception as e:  # an unpickling refusal or a damaged file
            raise MtError(
                f"{folder / 'pytorch_model.bin'}: cannot be read as plain weights ({e})"
            ) from None
    raise MtError(f"{folder}: holds neither model.safetensors nor pytorch_model.bin")


def mt_state_dict(
    w: dict[str, torch.Tensor], hf: dict[str, Any], tok: MarianVocab, cfg: ModelConfig
) -> dict[str, torch.Tensor]:
    """MarianMTModel's weights -> mt's names, vocabulary rows in mt's id order."""
    src_order = torch.tensor(mt_order(tok.src_vocab, tok.specials))
    tgt_order = torch.tensor(mt_order(tok.tgt_vocab, tok.specials))
    shared = w.get("model.shared.weight")
    src = w.get("model.encoder.embed_tokens.weight", shared)
    tgt = w.get("model.decoder.embed_tokens.weight", shared)
    if src is None or tgt is None:
        raise MtError(
            "the weights hold no embeddings (model.shared.weight or model.*.embed_tokens.weight)"
        )
    out = {from_marian_name(k): v for k, v in w.items() if ".layers." in k}
    # Every name of a tied matrix is in the state dict (load_state_dict wants them all), as one
    # tensor.
    out["decoder.embeddings.token.weight"] = tgt[tgt_order].clone()
    tied_src = cfg.tie_embeddings and cfg.shared_vocab
    out["encoder.embeddings.token.weight"] = (
        out["decoder.embeddings.token.weight"] if tied_src else (src[src_order].clone())
    )
    lm_head = w.get("lm_head.weight", tgt)
    out["output_projection.weight"] = (
        out["decoder.embeddings.token.weight"]
        if cfg.tie_embeddings
        else (lm_head[tgt_order].clone())
    )
    bias = w.get("final_logits_bias", torch.zeros(1, cfg.tgt_vocab_size))[0][tgt_order].clone()
    bias[PAD] = (
        # mt never outputs PAD (its logit is -inf in search); an exported model holds -inf there
        0.0
    )
    out["output_projection.bias"] = bias
    return out
