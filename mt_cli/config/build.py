"""A whole config: its sections, the presets, and building one in layers (dataclass defaults <-
preset <- YAML file <- command-line options <- `--set a.b=v`), checked as it is built."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mt_cli.config.data import DataConfig
from mt_cli.config.decode import DecodeConfig
from mt_cli.config.fields import check
from mt_cli.config.model import ModelConfig, TokenizerConfig
from mt_cli.config.train import TrainConfig
from mt_cli.config.yaml_files import build_section, load_yaml, merge, parse_set
from mt_cli.errors import MtError


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    data: DataConfig = field(default_factory=DataConfig)

    def __post_init__(self) -> None:
        m = self.model
        check(
            self.train.rdrop == 0 or max(m.dropout, m.attention_dropout, m.activation_dropout) > 0,
            "train.rdrop compares two dropout masks, and the model has no dropout: set "
            "model.dropout (e.g. 0.1) or train.rdrop=0",
        )


# Presets override ModelConfig defaults only; everything else keeps its one default above.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "model": {"d_model": 32, "n_heads": 2, "ffn_dim": 64, "enc_layers": 1, "dec_layers": 1}
    },
    "small": {
        "model": {}
    },  # the dataclass defaults: 256-d, 4 heads, 3+3 layers, for Multi30k on a CPU
    "base": {
        "model": {"d_model": 512, "n_heads": 8, "ffn_dim": 2048, "enc_layers": 6, "dec_layers": 6}
    },
    "big": {
        "model": {
            "d_model": 1024,
            "n_heads": 16,
            "ffn_dim": 4096,
            "enc_layers": 6,
            "dec_layers": 6,
            "dropout": 0.3,
        }
    },
}


def to_dict(cfg: Config) -> dict[str, Any]:
    """Plain dict (lists for tuples) for checkpoints, YAML and JSON."""

    def plain(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, tuple):
            return [plain(v) for v in x]
        return x

    return plain(dataclasses.asdict(cfg))


def to_yaml(cfg: Config) -> str:
    # imported on first use
    return importlib.import_module("yaml").safe_dump(to_dict(cfg), sort_keys=False)


def from_dict(data: dict[str, Any], where: str = "config") -> Config:
    """Build and check a Config from nested dicts; unknown keys are errors, not silently ignored."""
    sections = {}
    for f in dataclasses.fields(Config):
        section_cls = _section_classes()[f.name]
        values = dict(data.get(f.name) or {})
        sections[f.name] = build_section(section_cls, values, f"{where}: {f.name}")
    unknown = set(data) - set(sections) - {"preset"}
    if unknown:
        raise MtError(f"{where}: unknown section(s) {sorted(unknown)}; expected {sorted(sections)}")
    return Config(**sections)


def _section_classes() -> dict[str, type]:
    return {
        "model": ModelConfig,
        "tokenizer": TokenizerConfig,
        "train": TrainConfig,
        "decode": DecodeConfig,
        "data": DataConfig,
    }


def build_config(
    preset: str | None = None,
    yaml_path: Path | None = None,
    options: dict[str, Any] | None = None,
    sets: list[str] | None = None,
) -> Config:
    """Layer preset, YAML, CLI options (nested dict) and --set overrides, then check the result."""
    data: dict[str, Any] = {}
    file_data = load_yaml(yaml_path) if yaml_path else {}
    preset = preset or file_data.get("preset")
    if preset is not None:
        if preset not in PRESETS:
            raise MtError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        data = merge(data, PRESETS[preset])
    data = merge(data, file_data)
    data = merge(data, options or {})
    for item in sets or []:
        data = merge(data, parse_set(item))
    where = str(yaml_path) if yaml_path else "config"
    return from_dict(
        data, where=f"{where} with the command-line options" if options or sets else where
    )
