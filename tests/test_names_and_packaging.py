"""Small contracts: the Marian weight-name mapping runs both ways, GPU peaks match whole device
names, and every package mt imports is declared."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import tomllib
import torch

from conftest import tiny_config
from mt_cli.interop.marian import (
    from_marian_id,
    from_marian_name,
    from_marian_rows,
    to_marian_id,
    to_marian_name,
    to_marian_rows,
)
from mt_cli.model.transformer import build_model
from mt_cli.train.throughput import datasheet_peak

ROOT = Path(__file__).resolve().parents[1]


def test_marian_names_and_ids_map_both_ways_and_match_a_real_marian_model(tokenizer):
    transformers = pytest.importorskip("transformers")
    model = build_model(tiny_config(tokenizer))
    layer_names = [n for n in model.state_dict() if ".layers." in n]
    theirs = [to_marian_name(n) for n in layer_names]
    assert [from_marian_name(n) for n in theirs] == layer_names
    cfg = tiny_config(tokenizer)
    shape = transformers.MarianConfig(
        vocab_size=cfg.tgt_vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.enc_layers,
        decoder_layers=cfg.dec_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.ffn_dim,
        decoder_ffn_dim=cfg.ffn_dim,
        max_position_embeddings=cfg.max_positions,
        pad_token_id=cfg.tgt_vocab_size - 1,
        decoder_start_token_id=cfg.tgt_vocab_size - 1,
        eos_token_id=0,
    )
    marian = transformers.MarianMTModel(shape)
    marian_layers = {n for n in marian.state_dict() if ".layers." in n}
    assert set(theirs) == marian_layers
    v = cfg.tgt_vocab_size
    assert [from_marian_id(to_marian_id(i, v), v) for i in range(v)] == list(range(v))
    rows = torch.arange(v * 2.0).view(v, 2)
    assert torch.equal(from_marian_rows(to_marian_rows(rows)), rows)
    assert torch.equal(to_marian_rows(rows)[to_marian_id(7, v)], rows[7])


def test_gpu_peaks_match_the_whole_device_name_longest_model_first():
    assert datasheet_peak("NVIDIA L40S", half=True) == 362e12
    assert datasheet_peak("NVIDIA L4", half=True) == 121e12
    assert datasheet_peak("NVIDIA A100-SXM4-80GB", half=False) == 19.5e12
    assert datasheet_peak("NVIDIA A10", half=True) == 125e12
    assert datasheet_peak("NVIDIA H100 80GB HBM3", half=True) == 989e12
    assert datasheet_peak("NVIDIA A10G", half=True) is None  # not in the table: measured instead
    assert datasheet_peak("Tesla T4", half=True) == 65e12


# Import name -> distribution name, where they differ.
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "markdown_it": "markdown-it-py",
    "lingua": "lingua-language-detector",
}


def test_every_package_mt_imports_is_declared_in_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {
        d.split(">")[0].split("=")[0].split("[")[0].strip().lower() for d in project["dependencies"]
    }
    optional = {
        d.split(">")[0].split("=")[0].strip().lower()
        for ds in project["optional-dependencies"].values()
        for d in ds
    }
    imported = set()
    for path in (ROOT / "mt_cli").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "mt_cli"}
    missing = {m for m in third_party if DISTRIBUTIONS.get(m, m) not in declared | optional}
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"
