"""Translating text: lines in, one detokenized line out for every line in, streamed in chunks."""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import torch

from mt_cli import checkpoint
from mt_cli.config import DecodeConfig
from mt_cli.errors import MtError
from mt_cli.files import atomic_open
from mt_cli.model import Transformer
from mt_cli.runtime import autocast, quantize_int8, resolve_device
from mt_cli.search import translate_ids
from mt_cli.text import iter_text_lines
from mt_cli.tokenizer import EOS, Tokenizer

CHUNK_LINES = 10_000  # memory stays flat however long the input is


def translate_lines(model: Transformer, tokenizer: Tokenizer, lines: list[str], cfg: DecodeConfig) -> list[str]:
    """Empty or blank lines give empty lines; over-long lines are cut to what the model can read."""
    limit = model.cfg.max_positions - 1
    todo = [i for i, line in enumerate(lines) if line.strip()]
    src_ids = tokenizer.encode_src([lines[i] for i in todo])
    src_ids = [ids if len(ids) <= limit else ids[: limit - 1] + [EOS] for ids in src_ids]
    with autocast(cfg.precision == "bf16", next(model.parameters()).device):
        hyps = tokenizer.decode_tgt(translate_ids(model, src_ids, cfg)) if todo else []
    out = [""] * len(lines)
    for i, hyp in zip(todo, hyps):
        out[i] = " ".join(hyp.split())  # no stray newline or tab may break line alignment
    return out


def translate_stream(
    model: Transformer, tokenizer: Tokenizer, lines: Iterable[str], cfg: DecodeConfig, out: TextIO
) -> int:
    count = 0
    it = iter(lines)
    while chunk := list(itertools.islice(it, CHUNK_LINES)):
        for hyp in translate_lines(model, tokenizer, chunk, cfg):
            out.write(hyp + "\n")
        count += len(chunk)
    return count


def load_for_decoding(
    checkpoint_path: Path, device: str, overrides: dict[str, Any]
) -> tuple[Transformer, Tokenizer, DecodeConfig]:
    """Model, tokenizer and decoding settings: the checkpoint's, with any given overrides on top."""
    ckpt = checkpoint.load(checkpoint_path)
    dev = resolve_device(device)
    given = {k: v for k, v in overrides.items() if v is not None}
    cfg = dataclasses.replace(ckpt.config.decode, **given)
    model = ckpt.build_model(dev)
    if cfg.precision == "int8":
        if dev.type != "cpu":
            raise MtError(f"--precision int8 runs on the CPU only; use --device cpu or --precision bf16 on {dev}")
        model = quantize_int8(model)
    return model, ckpt.tokenizer, cfg


def _input_lines(input_path: Path | None) -> Iterator[str]:
    if input_path is None:
        yield from iter_text_lines(sys.stdin.buffer, "<stdin>")
        return
    if not input_path.is_file():
        raise MtError(f"{input_path}: input file not found")
    with open(input_path, "rb") as f:
        yield from iter_text_lines(f, str(input_path))


@torch.inference_mode()
def translate_file(
    checkpoint_path: Path,
    input_path: Path | None,
    output_path: Path | None,
    device: str = "auto",
    **overrides: Any,
) -> int:
    """Translate INPUT (stdin when None) to OUTPUT (stdout when None); returns the number of lines.

    A file output appears only when complete, so an interrupted run never leaves half a file.
    """
    model, tokenizer, cfg = load_for_decoding(checkpoint_path, device, overrides)
    lines = _input_lines(input_path)
    if output_path is None:
        return translate_stream(model, tokenizer, lines, cfg, sys.stdout)
    with atomic_open(output_path, "w") as out:
        return translate_stream(model, tokenizer, lines, cfg, out)
