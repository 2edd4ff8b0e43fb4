"""The parts every config section is made of: a field with its one description, the check that
names a field when a value is wrong, and the defaults that are module constants."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from mt_cli.errors import MtError

ACTIVATIONS = ("relu", "gelu", "swish")  # swish is SiLU, x * sigmoid(x), as OPUS-MT models use

# Where a command runs when --device is not given: "auto" picks CUDA, then Apple's MPS, then the
# CPU.
DEVICE = "auto"

# What `mt evaluate` scores when --metrics is not given.
DEFAULT_METRICS = ("bleu", "chrf")

# Lines read, tokenized and counted at a time by the corpus readers, the tokenized cache and the
# shortlist builder: large enough that the cached Arrow file has few record batches, small enough
# that memory stays flat however long the corpus.
CORPUS_CHUNK_LINES = 20_000

# An imported Hugging Face model whose generation config names no beam decodes with this one
# (transformers' own default for Marian models).
IMPORTED_BEAM = 4


# What a language field holds, said once; each section that takes languages adds what it does
# with them (config files, options, the server's request fields).
LANGUAGE_CODE = {
    "source": "The source language, as a code (de, zh; NLLB's deu_Latn or de)",
    "target": "The target language, as a code (en; NLLB's eng_Latn or en)",
}
# A pair's languages as a training file's suffix names them.
FROM_SUFFIX = {
    "source": "default: the source file's suffix (train.de).",
    "target": "default: the target file's suffix.",
}


def language_help(side: str, use: str) -> str:
    """A language field's description: the code it holds, then `use`, what it is for here."""
    return f"{LANGUAGE_CODE[side]}: {use}"


def language(side: str, use: str, *, cli: bool = False) -> Any:
    """A source or target language field (`side`), empty by default."""
    return option("", language_help(side, use), cli=cli)


def option(default: Any, help: str, *, cli: bool = False, flag: str = "") -> Any:
    """A config field with its one description. `cli`: commands that take this section offer it as
    an option (`--max-steps` for max_steps, or `flag`); the rest are set with --set or YAML."""
    return field(default=default, metadata={"help": help, "cli": cli, "flag": flag})


def describe(section: type, name: str) -> str:
    """A field's help text."""
    return str(next(f for f in dataclasses.fields(section) if f.name == name).metadata["help"])


def check(ok: bool, message: str) -> None:
    if not ok:
        raise MtError(f"bad config: {message}")
