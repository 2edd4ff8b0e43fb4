"""The Translator: a decoding model held in memory, and the one way from a checkpoint to translations.

`mt translate`, `mt evaluate --checkpoint`, `mt tune-decoding`, `mt attention`, validation during
training (and the server) all decode through it:

    from mt_cli import Translator
    tr = Translator.load("RUN/best.pt", device="cpu", beam=5)   # any DecodeConfig field as a keyword
    tr.translate(["Ein Mann fährt Fahrrad.", ""])               # one string per line, always
    tr.search(["Ein Mann fährt Fahrrad."])[0][0].score          # hypotheses per line, best first
    tr.search(lines, nbest=3, prefixes=[...], constraints=[["Hund"], ...])
    Translator.load(["a.pt", "b.pt"])                           # an ensemble
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, cast

import torch

from mt_cli.config import DEVICE, DecodeConfig, OutputConfig
from mt_cli.data.tokenizer import EOS, UNK, Tokenizer
from mt_cli.decode.ensemble import Ensemble
from mt_cli.decode.hypothesis import Hypothesis, Request, Searchable
from mt_cli.decode.line_files import LineInputs, SideInputs, count_lines, input_lines
from mt_cli.decode.output import check_nbest as _check_nbest
from mt_cli.decode.output import check_output, render, render_score
from mt_cli.decode.precision import quantize_int8
from mt_cli.decode.processors import DEFAULT_PROCESSORS, Processor
from mt_cli.decode.progress import Progress
from mt_cli.decode.scoring import align, force
from mt_cli.decode.search import search_ids
from mt_cli.decode.shortlist import Shortlist
from mt_cli.device import autocast, resolve_device
from mt_cli.errors import MtError
from mt_cli.files import atomic_open
from mt_cli.model import checkpoint
from mt_cli.model.transformer import Transformer

# Options that, given without a method, ask for sampling.
SAMPLING = ("sampling_topk", "sampling_topp", "temperature")
CHUNK_LINES = 10_000  # lines read, decoded and written at a time: memory stays flat however long the input


def decode_options(base: DecodeConfig, overrides: dict[str, Any]) -> DecodeConfig:
    """`base` with the given fields replaced (None means "keep"); unknown names are refused."""
    known = {f.name for f in dataclasses.fields(DecodeConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise MtError(f"unknown decoding option(s) {unknown}; known: {sorted(known)}")
    if any(overrides.get(k) is not None for k in SAMPLING) and overrides.get("method") is None:
        # A sampling option asks for sampling, which has no beam: the checkpoint's beam is not kept.
        overrides = {**overrides, "method": "sample", "beam": overrides.get("beam") or 1}
    return dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})


class Translator:
    """A model (or an ensemble), its tokenizer and decoding settings, loaded once and used for any
    number of calls."""

    def __init__(
        self,
        model: Searchable,
        tokenizer: Tokenizer,
        cfg: DecodeConfig,
        processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
        shortlist: Shortlist | None = None,
    ) -> None:
        self.model, self.tokenizer, self.cfg, self.processors = model, tokenizer, cfg, processors
        self.shortlist = shortlist  # the checkpoint's lexicon (decode/shortlist.py), used when cfg.shortlist
        self.device = next(model.parameters()).device
        self.target_lang = ""  # a multi-target model's >>xx<< token, put before lines that carry none
        self._glue_ids: torch.Tensor | None = None

    @classmethod
    def load(cls, path: Path | str | Sequence[Path | str], device: str = DEVICE, **overrides: Any) -> Translator:
        """From a checkpoint file, with the checkpoint's decoding settings under the given ones; from
        several, an ensemble (the first one's decoding settings)."""
        paths = [Path(path)] if isinstance(path, (str, Path)) else [Path(p) for p in path]
        if len(paths) == 1:
            return cls.from_checkpoint(checkpoint.load(paths[0]), device, **overrides)
        ckpts = [checkpoint.load(p) for p in paths]
        for p, ckpt in zip(paths[1:], ckpts[1:]):
            _check_same_vocabulary(paths[0], ckpts[0].tokenizer, p, ckpt.tokenizer)
        members = [cls.from_checkpoint(ckpt, device, **overrides) for ckpt in ckpts]
        # The first model's shortlist, where every member has one (they share both vocabularies).
        shortlist = members[0].shortlist if all(m.shortlist is not None for m in members) else None
        model = Ensemble([cast(Transformer, m.model) for m in members])
        return cls(model, ckpts[0].tokenizer, members[0].cfg, shortlist=shortlist)

    @classmethod
    def from_checkpoint(cls, ckpt: checkpoint.Checkpoint, device: str = DEVICE, **overrides: Any) -> Translator:
        cfg = decode_options(ckpt.config.decode, overrides)
        dev = resolve_device(device)
        model = ckpt.build_model(dev)
        if cfg.precision == "int8":
            if dev.type != "cpu":
                raise MtError(
                    f"decode.precision int8 runs on the CPU only; use device cpu, or decode.precision bf16 on {dev}"
                )
            model = quantize_int8(model)
        shortlist = None if ckpt.shortlist is None else Shortlist.from_state(ckpt.shortlist, "the checkpoint")
        return cls(model, ckpt.tokenizer, cfg, shortlist=shortlist)

    def with_options(self, **overrides: Any) -> Translator:
        """The same model with other decoding settings (beam, length penalty, ...), nothing reloaded."""
        cfg = decode_options(self.cfg, overrides)
        if (cfg.precision == "int8") != (self.cfg.precision == "int8"):
            raise MtError("int8 decoding quantizes the model when it loads; load a new Translator for it")
        tr = Translator(self.model, self.tokenizer, cfg, self.processors, self.shortlist)
        tr.target_lang = self.target_lang
        return tr

    def for_target(self, lang: str | None) -> Translator:
        """This model translating into `lang`: a multi-target (OPUS-MT) model's >>lang<< token goes
        before every line that does not start with one of its own."""
        if not lang:
            return self
        token, vocab = f">>{lang}<<", self.tokenizer.vocabulary("source")
        if token not in vocab:
            codes = [p for p in vocab if p.startswith(">>") and p.endswith("<<")]
            known = ", ".join(codes[:30]) + (" ..." if len(codes) > 30 else "") if codes else "none: one target only"
            raise MtError(f"target language {lang}: the model has no {token} token (its language tokens: {known})")
        tr = self.with_options()
        tr.target_lang = token
        return tr

    def search_ids(
        self, src_ids: list[list[int]], requests: list[Request] | None = None, samples: int = 1,
        progress: Callable[[int], None] | None = None,
    ) -> list[list[Hypothesis]]:  # fmt: skip
        """Source ids (each ending in EOS) -> hypotheses per sentence, best first, with their text."""
        glue = self._glue() if requests and any(r.constraints for r in requests) else None
        with autocast(self.cfg.precision == "bf16", self.device):
            found = search_ids(
                self.model, src_ids, self.cfg, self.processors, requests, samples, progress, glue, self.shortlist
            )
        texts = iter(self.tokenizer.decode_tgt([h.tokens for hyps in found for h in hyps]))
        # One line per hypothesis: no stray newline or tab may break line alignment.
        return [[dataclasses.replace(h, text=" ".join(next(texts).split())) for h in hyps] for hyps in found]

    def _glue(self) -> torch.Tensor:
        """Target pieces that continue a word: no word-start mark, and a letter or digit first
        (worked out once per tokenizer, not per batch)."""
        if self._glue_ids is None:
            pieces = self.tokenizer.tgt_pieces(list(range(self.tokenizer.tgt_vocab_size)))
            ids = [i for i, p in enumerate(pieces) if p[:1].isalnum()]  # special pieces (<unk>, </s>) start with <
            self._glue_ids = torch.tensor(ids, dtype=torch.long, device=self.device)
        return self._glue_ids

    def source_ids(self, lines: list[str]) -> list[list[int]]:
        """Source ids ending in EOS, an over-long line cut to what the model can read."""
        limit = self.model.cfg.max_positions - 1
        if self.target_lang:
            lines = [line if line.startswith(">>") else f"{self.target_lang} {line}" for line in lines]
        return [ids if len(ids) <= limit else ids[: limit - 1] + [EOS] for ids in self.tokenizer.encode_src(lines)]

    def search(
        self,
        lines: list[str],
        nbest: int | None = None,
        prefixes: Sequence[str | None] | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
        alignment: bool = False,
        first_line: int = 0,
        progress: Callable[[int], None] | None = None,
    ) -> list[list[Hypothesis]]:
        """Hypotheses for each line, best first: all the search finds, or the `nbest` best (with
        sampling, `nbest` draws). Per line, optionally: a target prefix the output starts with, and
        target terms it must contain (beam search only). `alignment` fills each hypothesis's
        alignment. `first_line` is the index of lines[0] in a longer input: sampling seeds by it.
        An empty or blank line gets one empty hypothesis; an over-long line is cut to what the
        model can read."""
        requests = Requests(self, len(lines), prefixes, constraints, first_line)
        todo = [i for i, line in enumerate(lines) if line.strip()]
        src_ids = self.source_ids([lines[i] for i in todo])
        samples = (nbest or 1) if self.cfg.search_method == "sample" else 1
        if nbest is not None:
            _check_nbest(nbest, self.cfg)
        found = self.search_ids(src_ids, [requests.of(i) for i in todo], samples, progress) if todo else []
        if nbest is not None:
            found = [hyps[:nbest] for hyps in found]
        if alignment:
            found = self._aligned(src_ids, found)
        out: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in lines]
        for i, hyps in zip(todo, found):
            out[i] = hyps
        if progress is not None:
            progress(len(lines) - len(todo))  # the blank lines, done without search
        return out

    def _aligned(self, src_ids: list[list[int]], found: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        if not isinstance(self.model, Transformer):
            raise MtError("output.alignment reads one model's attention; it does not combine with an ensemble")
        flat = [(s, h) for s, hyps in zip(src_ids, found) for h in hyps]
        links = iter(align(self.model, [s for s, _ in flat], [h.tokens for _, h in flat], self.cfg.batch_size))
        return [[dataclasses.replace(h, alignment=next(links)) for h in hyps] for hyps in found]

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
            found = force(self.model, self.source_ids(src_lines), tgt_ids, self.cfg.batch_size)
        return [dataclasses.replace(h, text=" ".join(line.split())) for h, line in zip(found, tgt_lines)]

    def translate(self, lines: list[str]) -> list[str]:
        """The best translation of each line: exactly one string per line."""
        return [hyps[0].text for hyps in self.search(lines)]

    def translate_stream(
        self, lines: Iterable[str], out: IO[str], output: OutputConfig = OutputConfig(),
        side: SideInputs | None = None, progress: Progress | None = None,
    ) -> int:  # fmt: skip
        """Translate lines as they come, a chunk at a time, one output line (text or JSON) for each,
        with each line's prefix and terms from `side`; returns how many were written."""
        check_output(output, self.cfg)
        pieces = self.tokenizer.tgt_pieces
        nbest = output.nbest if output.format == "jsonl" else 1
        count = 0
        it = iter(lines)
        while chunk := list(itertools.islice(it, CHUNK_LINES)):
            prefixes, terms = side.for_chunk(chunk) if side is not None else (None, None)
            found = self.search(chunk, nbest, prefixes, terms, output.alignment, count,
                                progress.advance if progress else None)  # fmt: skip
            for line, hyps in zip(chunk, found):
                out.write(render(hyps, not line.strip(), output, pieces) + "\n")
            count += len(chunk)
        if side is not None:
            side.finish(count)
        if progress is not None:
            progress.close()
        return count

    @torch.inference_mode()
    def translate_file(
        self, input_path: Path | None, output_path: Path | None, output: OutputConfig = OutputConfig(),
        inputs: LineInputs = LineInputs(),
    ) -> int:  # fmt: skip
        """INPUT (stdin when None) to OUTPUT (stdout when None), one line for each line; progress on
        stderr when it is a terminal.

        A file output appears only when complete, so an interrupted run never leaves half a file."""
        check_output(output, self.cfg)
        side = SideInputs(inputs, input_path)
        lines = input_lines(input_path)  # read lazily
        progress = Progress.on_terminal(
            lambda: count_lines(input_path) if input_path and input_path.is_file() else None
        )
        if output_path is None:
            return self.translate_stream(lines, sys.stdout, output, side, progress)
        with atomic_open(output_path, "w") as out:
            return self.translate_stream(lines, out, output, side, progress)


class Requests:
    """Per-line prefixes and terms as search requests: encoded, checked, keyed by line."""

    def __init__(self, tr: Translator, n: int, prefixes: Sequence[str | None] | None,
                 constraints: Sequence[Sequence[str]] | None, first_line: int) -> None:  # fmt: skip
        for name, given in (("prefixes", prefixes), ("constraint lists", constraints)):
            if given is not None and len(given) != n:
                raise MtError(f"{len(given)} {name} for {n} lines: give one per line (an empty one for none)")
        if constraints is not None and any(constraints) and tr.cfg.search_method != "beam":
            raise MtError(
                "terms (a glossary or constraints) need beam search: decode.beam 2 or more, not greedy or sampling"
            )
        self.tr, self.prefixes, self.constraints, self.first_line = tr, prefixes, constraints, first_line

    def of(self, i: int) -> Request:
        line, tok = self.first_line + i + 1, self.tr.tokenizer
        prefix = self.prefixes[i] if self.prefixes is not None else None
        ids = tuple(tok.encode_tgt([prefix])[0]) if prefix and prefix.strip() else ()
        limit = self.tr.model.cfg.max_positions - 1
        if len(ids) + 1 > limit:
            raise MtError(f"line {line}: the prefix is {len(ids)} pieces, more than the model's {limit - 1}")
        n = self.tr.cfg.no_repeat_ngram
        if n and len({ids[j : j + n] for j in range(len(ids) - n + 1)}) < len(ids) - n + 1:
            raise MtError(
                f"line {line}: the prefix itself repeats a {n}-gram, which decode.no_repeat_ngram {n} forbids"
            )
        terms = [t for t in (self.constraints[i] if self.constraints is not None else ()) if t.strip()]
        encoded = [tuple(ids) for ids in tok.encode_tgt(terms)] if terms else []
        for term, pieces in zip(terms, encoded):
            if UNK in pieces:  # it would be met as UNK pieces, never as the text asked for
                raise MtError(f"line {line}: the term {term!r} has characters the model's target vocabulary lacks")
        return Request(prefix=ids, constraints=tuple(dict.fromkeys(encoded)), key=self.first_line + i)


def _check_same_vocabulary(first: Path, a: Tokenizer, other: Path, b: Tokenizer) -> None:
    """Ensemble members read and write the same ids: both vocabularies must be the same pieces."""
    for side in ("target", "source"):
        pieces_a, pieces_b = a.vocabulary(side), b.vocabulary(side)
        if pieces_a != pieces_b:
            raise MtError(
                f"{first} and {other} have different {side} vocabularies ({len(pieces_a)} and {len(pieces_b)} "
                "pieces): an ensemble needs models trained with one tokenizer"
            )


def score_file(checkpoint_path: Path, src_path: Path, tgt_path: Path, output_path: Path | None,
               device: str = DEVICE, fmt: str = "text", normalize: bool = False, **overrides: Any) -> int:  # fmt: skip
    """`mt score`: the log-probability of each line of TGT as a translation of the same line of SRC,
    a chunk of lines at a time; OUTPUT (stdout when None) appears only when complete."""
    OutputConfig(format=fmt)  # the one check of --format
    tr = Translator.load(checkpoint_path, device, **overrides)
    pairs = itertools.zip_longest(input_lines(src_path), input_lines(tgt_path))
    pieces, count = tr.tokenizer.tgt_pieces, 0
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


def translate_file(checkpoint_path: Path | Sequence[Path], input_path: Path | None, output_path: Path | None,
                   device: str = DEVICE, output: OutputConfig = OutputConfig(), inputs: LineInputs = LineInputs(),
                   **overrides: Any) -> int:  # fmt: skip
    """`mt translate`: load the checkpoint (several: an ensemble), then translate INPUT to OUTPUT."""
    tr = Translator.load(checkpoint_path, device, **overrides).for_target(inputs.target_lang)
    return tr.translate_file(input_path, output_path, output, inputs)
