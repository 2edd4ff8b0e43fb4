"""Typed, frozen configuration: the sections a checkpoint saves (model, tokenizer, train, decode)
and the settings of single commands (output, serve, doctor, tuning, quickstart, clean).

Every default and every option's description lives in this package, once: each field carries its
help text in `field(metadata=...)` (through `fields.option`), and both the command-line options
(cli/app.py's `config_options`) and docs/configuration.md (`python -m mt_cli.config.reference`)
are generated from it. Errors name fields (`decode.beam`), not flags: the CLI turns a field into
the flag the user gave when it prints one.
"""

from mt_cli.config.build import PRESETS, Config, build_config, from_dict, to_dict, to_yaml
from mt_cli.config.commands import (
    DoctorConfig,
    DocumentConfig,
    OutputConfig,
    QuickstartConfig,
    ServeConfig,
    TuningConfig,
)
from mt_cli.config.data import DataConfig, PairConfig
from mt_cli.config.decode import DecodeConfig
from mt_cli.config.fields import (
    ACTIVATIONS,
    CORPUS_CHUNK_LINES,
    DEFAULT_METRICS,
    DEVICE,
    IMPORTED_BEAM,
    describe,
    language_help,
    option,
)
from mt_cli.config.model import ModelConfig, TokenizerConfig
from mt_cli.config.pipeline import CleanConfig
from mt_cli.config.train import TrainConfig

# Every section, by the name its fields are spelt with (`decode.beam`).
SECTIONS: dict[str, type] = {
    cls.section: cls
    for cls in (
        ModelConfig,
        TokenizerConfig,
        TrainConfig,
        DecodeConfig,
        DataConfig,
        OutputConfig,
        DocumentConfig,
        ServeConfig,
        DoctorConfig,
        TuningConfig,
        QuickstartConfig,
        CleanConfig,
    )
}

__all__ = [
    "ACTIVATIONS",
    "CORPUS_CHUNK_LINES",
    "DEFAULT_METRICS",
    "DEVICE",
    "IMPORTED_BEAM",
    "PRESETS",
    "SECTIONS",
    "CleanConfig",
    "Config",
    "DataConfig",
    "DecodeConfig",
    "DocumentConfig",
    "DoctorConfig",
    "ModelConfig",
    "OutputConfig",
    "PairConfig",
    "QuickstartConfig",
    "ServeConfig",
    "TokenizerConfig",
    "TrainConfig",
    "TuningConfig",
    "build_config",
    "describe",
    "from_dict",
    "language_help",
    "option",
    "to_dict",
    "to_yaml",
]
