"""The Translator: a decoding model held in memory, and the one way from a checkpoint to translations.

`mt translate`, `mt evaluate --checkpoint`, `mt tune-decoding`, `mt attention`, validation during
training (and the server) all decode through it:

    from mt_cli import Translator
    tr = Translator.load("RUN/best.pt", device="cpu", beam=5)   # any DecodeConfig field as a keyword
    tr.translate(["Ein Mann fährt Fahrrad.", ""])               # one string per line, always
    tr.search(["Ein Mann fährt Fahrrad."])[0][0].score          # hypotheses per line, best first
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import torch

from mt_cli.config import DEVICE, DecodeConfig, OutputConfig
from mt_cli.data.text import iter_text_lines
from mt_cli.data.tokenizer import EOS, Tokenizer
from mt_cli.decode.output import check_output, render, render_score
from mt_cli.decode.precision import quantize_int8
from mt_cli.decode.processors import DEFAULT_PROCESSORS, Processor
from mt_cli.decode.scoring import force
from mt_cli.decode.search import Hypothesis, search_ids
from mt_cli.device import autocast, resolve_device
from mt_cli.errors import MtError
from mt_cli.files import atomic_open
from mt_cli.model import checkpoint
from mt_cli.model.transformer import Transformer

CHUNK_LINES = 10_000  # lines read, decoded and written at a time: memory stays flat however long the input


def decode_options(base: DecodeConfig, overrides: dict[str, Any]) -> DecodeConfig:
    """`base` with the given fields replaced (None means "keep"); unknown names are refused."""
    known = {f.name for f in dataclasses.fields(DecodeConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise MtError(f"unknown decoding option(s) {unknown}; known: {sorted(known)}")
    return dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})


class Translator:
    """A model, its tokenizer and decoding settings, loaded once and used for any number of calls."""

    def __init__(
        self,
        model: Transformer,
        tokenizer: Tokenizer,
        cfg: DecodeConfig,
        processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
    ) -> None:
        self.model, self.tokenizer, self.cfg, self.processors = model, tokenizer, cfg, processors
        self.device = next(model.parameters()).device

    @classmethod
    def load(cls, path: Path | str, device: str = DEVICE, **overrides: Any) -> Translator:
        """From a checkpoint file, with the checkpoint's decoding settings under the given ones."""
        return cls.from_checkpoint(checkpoint.load(Path(path)), device, **overrides)

    @classmethod
    def from_checkpoint(cls, ckpt: checkpoint.Checkpoint, device: str = DEVICE, **overrides: Any) -> Translator:
        cfg = decode_options(ckpt.config.decode, overrides)
        dev = resolve_device(device)
        model = ckpt.build_model(dev)
        if cfg.precision == "int8":
            if dev.type != "cpu":
                raise MtError(f"--precision int8 runs on the CPU only; use --device cpu or --precision bf16 on {dev}")
            model = quantize_int8(model)
        return cls(model, ckpt.tokenizer, cfg)

    def with_options(self, **overrides: Any) -> Translator:
        """The same model with other decoding settings (beam, length penalty, ...), nothing reloaded."""
        cfg = decode_options(self.cfg, overrides)
        if (cfg.precision == "int8") != (self.cfg.precision == "int8"):
            raise MtError("int8 decoding quantizes the model when it loads; load a new Translator for it")
        return Translator(self.model, self.tokenizer, cfg, self.processors)

    def search_ids(self, src_ids: list[list[int]]) -> list[list[Hypothesis]]:
        """Source ids (each ending in EOS) -> hypotheses per sentence, best first, with their text."""
        with autocast(self.cfg.precision == "bf16", self.device):
            found = search_ids(self.model, src_ids, self.cfg, self.processors)
        texts = iter(self.tokenizer.decode_tgt([h.tokens for hyps in found for h in hyps]))
        # One line per hypothesis: no stray newline or tab may break line alignment.
        return [[dataclasses.replace(h, text=" ".join(next(texts).split())) for h in hyps] for hyps in found]

    def _source_ids(self, lines: list[str]) -> list[list[int]]:
        """Source ids ending in EOS, an over-long line cut to what the model can read."""
        limit = self.model.cfg.max_positions - 1
        return [ids if len(ids) <= limit else ids[: limit - 1] + [EOS] for ids in self.tokenizer.encode_src(lines)]

    def search(self, lines: list[str]) -> list[list[Hypothesis]]:
        """Hypotheses for each line, best first. An empty or blank line gets one empty hypothesis;
        an over-long line is cut to what the model can read."""
        todo = [i for i, line in enumerate(lines) if line.strip()]
        src_ids = self._source_ids([lines[i] for i in todo])
        out: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in lines]
        for i, hyps in zip(todo, self.search_ids(src_ids) if todo else []):
            out[i] = hyps
        return out

    def score(self, src_lines: list[str], tgt_lines: list[str]) -> list[Hypothesis]:
        """Forced decoding: each target's tokens with their log-probabilities given its source; the
        score is their plain sum, EOS included (decode/scoring.py)."""
        if len(src_lines) != len(tgt_lines):
            raise MtError(f"{len(src_lines)} sources but {len(tgt_lines)} targets: give one target per source")
        limit = self.model.cfg.max_positions - 1
        tgt_ids = self.tokenizer.encode_tgt(tgt_lines)
        long = next((i for i, ids in enumerate(tgt_ids) if len(ids) + 1 > limit), None)
        if long is not None:
            raise MtError(f"target line {long + 1}: {len(tgt_ids[long])} pieces, more than the model's {limit - 1}")
        with autocast(self.cfg.precision == "bf16", self.device):
            found = force(self.model, self._source_ids(src_lines), tgt_ids, self.cfg.batch_size)
        return [dataclasses.replace(h, text=" ".join(line.split())) for h, line in zip(found, tgt_lines)]

    def translate(self, lines: list[str]) -> list[str]:
        """The best translation of each line: exactly one string per line."""
        return [hyps[0].text for hyps in self.search(lines)]

    def translate_stream(self, lines: Iterable[str], out: IO[str], output: OutputConfig = OutputConfig()) -> int:
        """Translate lines as they come, a chunk at a time, one output line (text or JSON) for each;
        returns how many were written."""
        check_output(output, self.cfg)
        pieces = self.tokenizer.tgt.id_to_piece
        count = 0
        it = iter(lines)
        while chunk := list(itertools.islice(it, CHUNK_LINES)):
            for line, hyps in zip(chunk, self.search(chunk)):
                out.write(render(hyps, not line.strip(), output, pieces) + "\n")
            count += len(chunk)
        return count

    @torch.inference_mode()
    def translate_file(
        self, input_path: Path | None, output_path: Path | None, output: OutputConfig = OutputConfig()
    ) -> int:
        """INPUT (stdin when None) to OUTPUT (stdout when None), one line for each line.

        A file output appears only when complete, so an interrupted run never leaves half a file."""
        lines = _input_lines(input_path)  # read lazily: translate_stream checks `output` first
        if output_path is None:
            return self.translate_stream(lines, sys.stdout, output)
        with atomic_open(output_path, "w") as out:
            return self.translate_stream(lines, out, output)


def score_file(checkpoint_path: Path, src_path: Path, tgt_path: Path, output_path: Path | None,
               device: str = DEVICE, fmt: str = "text", normalize: bool = False, **overrides: Any) -> int:  # fmt: skip
    """`mt score`: the log-probability of each line of TGT as a translation of the same line of SRC,
    a chunk of lines at a time; OUTPUT (stdout when None) appears only when complete."""
    OutputConfig(format=fmt)  # the one check of --format
    tr = Translator.load(checkpoint_path, device, **overrides)
    pairs = itertools.zip_longest(_input_lines(src_path), _input_lines(tgt_path))
    pieces, count = tr.tokenizer.tgt.id_to_piece, 0
    with contextlib.ExitStack() as stack:
        out = sys.stdout if output_path is None else stack.enter_context(atomic_open(output_path, "w"))
        while chunk := list(itertools.islice(pairs, CHUNK_LINES)):
            if any(src is None or tgt is None for src, tgt in chunk):
                n = count + next(i for i, (src, tgt) in enumerate(chunk) if src is None or tgt is None)
                raise MtError(f"{src_path} and {tgt_path} differ in length: one ends after {n} lines")
            for h in tr.score([src for src, _ in chunk], [tgt for _, tgt in chunk]):
                out.write(render_score(h, fmt, normalize, pieces) + "\n")
            count += len(chunk)
    return count


def _input_lines(input_path: Path | None) -> Iterator[str]:
    if input_path is None:
        yield from iter_text_lines(sys.stdin.buffer, "<stdin>")
        return
    if not input_path.is_file():
        raise MtError(f"{input_path}: input file not found")
    with open(input_path, "rb") as f:
        yield from iter_text_lines(f, str(input_path))


def translate_file(checkpoint_path: Path, input_path: Path | None, output_path: Path | None,
                   device: str = DEVICE, output: OutputConfig = OutputConfig(), **overrides: Any) -> int:  # fmt: skip
    """`mt translate`: load the checkpoint, then translate INPUT to OUTPUT."""
    return Translator.load(checkpoint_path, device, **overrides).translate_file(input_path, output_path, output)
