"""The Translator: a decoding model held in memory, and the one way from a checkpoint to
translations.

`mt translate`, `mt evaluate --checkpoint`, `mt tune-decoding`, `mt attention`, validation during
training (and the server) all decode through it:

    from mt_cli import Translator
    tr = Translator.load("RUN/best.pt", device="cpu", beam=5)   # any DecodeConfig field as keyword
    tr.translate(["Ein Mann fährt Fahrrad.", ""])               # one string per line, always
    tr.search(["Ein Mann fährt Fahrrad."])[0][0].score          # hypotheses per line, best first
    tr.search(lines, nbest=3, prefixes=[...], constraints=[["Hund"], ...])
    tr.translate_document(html, "html")                         # a document, its structure kept
    Translator.load(["a.pt", "b.pt"])                           # an ensemble
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import torch

from mt_cli.config import DEVICE, DecodeConfig
from mt_cli.config.decode import decode_options
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.decode.alignment import translate_aligned, translate_document, with_alignment
from mt_cli.decode.direction import Direction
from mt_cli.decode.ensemble import Ensemble, ForcedEnsemble
from mt_cli.decode.glossary import Glossary
from mt_cli.decode.hypothesis import Hypothesis, Request, Searchable
from mt_cli.decode.plan import resolve
from mt_cli.decode.precision import quantize_int8
from mt_cli.decode.processors import DEFAULT_PROCESSORS, Processor
from mt_cli.decode.request import Requests, check_nbest, source_ids
from mt_cli.decode.running_batch import RunningBatch, running_batch
from mt_cli.decode.scoring import Forced, force
from mt_cli.decode.search import Search
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.yielding import Yielding
from mt_cli.device import autocast, decode_precision, keep_freed_memory, resolve_device
from mt_cli.documents.aligned import Aligned
from mt_cli.errors import MtError
from mt_cli.model import checkpoint
from mt_cli.model.transformer import Transformer


class Translator:
    """A model (or an ensemble), its tokenizer and decoding settings, loaded once and used for any
    number of calls."""

    def __init__(
        self,
        model: Forced,
        tokenizer: Tokenizer,
        cfg: DecodeConfig,
        processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
        shortlist: Shortlist | None = None,
        sources: Sequence[Path | None] | None = None,
        quantize: bool = False,
    ) -> None:
        """`shortlist`: the checkpoint's lexicon (decode/shortlist.py), used where cfg.shortlist;
        `sources`: the checkpoint file of each model, beside which compiled steps are kept (None:
        models in memory only); `quantize`: with int8 decoding, quantize the model's own layers
        too, in place (a model loaded for this translator only: it then encodes and scores in int8
        and holds no fp32 copy)."""
        self.model, self.tokenizer, self.processors, self.lexicon = (
            model,
            tokenizer,
            processors,
            shortlist,
        )
        self.device = next(model.parameters()).device
        self.sources = tuple(sources) if sources is not None else (None,) * len(_members(model))
        self.plan = resolve(cfg, self.device, list(self.sources), shortlist)
        self.cfg = dataclasses.replace(cfg, precision=self.plan.precision)
        # What search runs: each model's decoder step, built once from its fp32 weights
        # (decode/engine.py).
        engines = [self.plan.engine(m, s) for m, s in zip(_members(model), self.sources)]
        self.engine: Searchable = (
            engines[0] if isinstance(model, Transformer) else Ensemble(engines)
        )
        self.quantized = quantize and self.plan.precision == "int8"
        if self.quantized:
            for m in _members(model):
                quantize_int8(m)
        # the languages given (for_languages) and their tokens
        self.direction = Direction(tokenizer, model.cfg)
        self._glue_ids: torch.Tensor | None = None

    @classmethod
    def load(
        cls,
        path: Path | str | Sequence[Path | str],
        device: str = DEVICE,
        *,
        scoring: bool = False,
        **overrides: Any,
    ) -> Translator:
        """From a checkpoint file, with the checkpoint's decoding settings under the given ones;
        from several, an ensemble (the first one's decoding settings). `scoring`: loaded to measure
        forced scores (score), in decode.score_precision rather than decode.precision."""
        paths = [Path(path)] if isinstance(path, (str, Path)) else [Path(p) for p in path]
        keep_freed_memory()  # a process that loads a model to decode: large buffers are reused
        ckpts = [checkpoint.load(p) for p in paths]
        for p, ckpt in zip(paths[1:], ckpts[1:]):
            _check_same_vocabulary(paths[0], ckpts[0].tokenizer, p, ckpt.tokenizer)
        if len(paths) == 1:
            return cls.from_checkpoint(ckpts[0], device, paths[0], scoring=scoring, **overrides)
        dev = resolve_device(device)
        models = [ckpt.build_model(dev) for ckpt in ckpts]
        # The first model's shortlist, where every member has one (they share both vocabularies).
        lexicon = _lexicon(ckpts[0]) if all(c.shortlist is not None for c in ckpts) else None
        cfg = decode_options(ckpts[0].config.decode, overrides, scoring)
        return cls(
            ForcedEnsemble(models),
            ckpts[0].tokenizer,
            cfg,
            shortlist=lexicon,
            sources=paths,
            quantize=True,
        )

    @classmethod
    def from_checkpoint(
        cls,
        ckpt: checkpoint.Checkpoint,
        device: str = DEVICE,
        source: Path | None = None,
        *,
        scoring: bool = False,
        **overrides: Any,
    ) -> Translator:
        """`source`: the file `ckpt` came from, where compiled decoder steps are kept beside it;
        `scoring`: as load's."""
        model = ckpt.build_model(resolve_device(device))
        cfg = decode_options(ckpt.config.decode, overrides, scoring)
        return cls(
            model, ckpt.tokenizer, cfg, shortlist=_lexicon(ckpt), sources=[source], quantize=True
        )

    def with_options(self, **overrides: Any) -> Translator:
        """The same model with other decoding settings (beam, length penalty, ...), nothing
        reloaded."""
        cfg = decode_options(self.cfg, overrides)
        planned = ("precision", "engine", "shortlist")  # what the plan is made of
        if all(getattr(cfg, name) == getattr(self.cfg, name) for name in planned):
            tr = copy.copy(self)  # the engine and everything else shared; only the settings differ
            tr.cfg = cfg
            tr.__dict__.pop("_search", None)
            return tr
        if self.quantized and decode_precision(cfg.precision, self.device) != "int8":
            raise MtError(
                "int8 decoding quantized the model as it loaded; "
                "load a new Translator for another precision"
            )
        tr = type(self)(
            self.model, self.tokenizer, cfg, self.processors, self.lexicon, self.sources
        )
        tr.quantized, tr.direction = self.quantized, self.direction
        # A new engine steps aside as the old one did.
        return tr.yielding(self.engine.before) if isinstance(self.engine, Yielding) else tr

    def for_languages(self, source: str | None = None, target: str | None = None) -> Translator:
        """This model translating from `source` into `target` (codes: de; NLLB's deu_Latn or de;
        source "auto": identified per line among the model's), as far as the model is told them: a
        target tag (<2de>, OPUS-MT's >>de<<) before each line that carries none; M2M100's and NLLB's
        source and target language tokens. None keeps the current one; a language the model lacks
        is refused here, naming its nearest codes."""
        tr = self.with_options()
        tr.direction = self.direction.but(source, target)
        return tr

    def for_scoring(self) -> Translator:
        """A translator whose forced scores are measured in decode.score_precision (fp32 unless
        told): this one where it decodes in that precision; else its checkpoints loaded again (a
        model quantized to int8 as it loaded holds no fp32 weights), in its direction."""
        wanted = decode_precision(self.cfg.score_precision, self.device)
        if wanted == self.cfg.precision:
            return self
        if not self.quantized:
            return self.with_options(precision=wanted)
        if None in self.sources:
            raise MtError(
                f"decode.score_precision {wanted}: this int8 model was loaded from memory, not "
                "a file; load it with decode.precision fp32 to score it in fp32"
            )
        again = Translator.load(
            [p for p in self.sources if p is not None],
            str(self.device),
            scoring=True,
            score_precision=self.cfg.score_precision,
            batch_size=self.cfg.batch_size,
            batch_tokens=self.cfg.batch_tokens,
        )
        return again.for_languages(self.direction.source or None, self.direction.target or None)

    def yielding(self, before: Callable[[], None]) -> Translator:
        """This translator calling `before()` ahead of each encoder call and decoder step of its
        searches (decode/yielding.py): where a server lets an urgent search run between the steps
        of a long one."""
        tr = self.with_options()
        tr.engine = Yielding(self.engine, before)
        return tr

    @property
    def decoder_start(self) -> tuple[int, ...]:
        """Target ids the decoder reads after its start token in this direction (Request.start)."""
        return self.direction.tokens().start

    @functools.cached_property
    def _search(self) -> Search:
        """The search this translator runs, built once."""
        return Search(self.engine, self.cfg, self.processors, self.plan.shortlist, self._glue)

    def requests(
        self,
        lines: Sequence[str],
        prefixes: Sequence[str | None] | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
        first_line: int = 0,
    ) -> list[Request | None]:
        """Each line as search takes it, built and checked once (None for a blank line): source
        ids, a target prefix the output starts with, target terms it must contain (beam search
        only). `first_line`: the index of lines[0] in a longer input (sampling seeds by it)."""
        languages, detected = self.direction.for_lines(lines)
        requests = Requests(
            self.tokenizer,
            self.cfg,
            self._limit,
            len(lines),
            prefixes,
            constraints,
            first_line,
            languages,
            detected,
        )
        return requests.build(lines)

    def search_requests(
        self,
        requests: Sequence[Request | None],
        nbest: int | None = None,
        alignment: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> list[list[Hypothesis]]:
        """Hypotheses for each request, best first: all the search finds, or the `nbest` best (with
        sampling, `nbest` draws), with their text; a blank line (None) gets one empty hypothesis.
        `alignment` fills each hypothesis's alignment."""
        todo = [i for i, r in enumerate(requests) if r is not None]
        if nbest is not None:
            check_nbest(nbest, self.cfg)
        samples = (nbest or 1) if self.cfg.search_method == "sample" else 1
        live = [cast(Request, requests[i]) for i in todo]
        found = self.with_text(self._search(live, samples, progress) if live else [], nbest)
        if alignment:
            found = with_alignment(self.model, self.cfg, [list(r.src) for r in live], found)
        out: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in requests]
        for i, hyps in zip(todo, found):
            out[i] = hyps
        if progress is not None:
            progress(len(requests) - len(todo))  # the blank lines, done without search
        return out

    def with_text(
        self, found: list[list[Hypothesis]], nbest: int | None = None
    ) -> list[list[Hypothesis]]:
        """Each line's hypotheses with their text, the `nbest` best (None: all)."""
        found = [hyps[:nbest] for hyps in found]
        texts = iter(self.tokenizer.decode_tgt([h.tokens for hyps in found for h in hyps]))
        # One line per hypothesis: no stray newline or tab may break line alignment.
        return [
            [dataclasses.replace(h, text=" ".join(next(texts).split())) for h in hyps]
            for hyps in found
        ]

    def running_batch(self) -> RunningBatch | None:
        """A running batch that searches as this translator does (decode/running_batch.py), where
        its search allows one (beam or greedy, the default processors); else None."""
        return running_batch(self.engine, self.cfg, self.processors, self.plan.shortlist)

    def _glue(self) -> torch.Tensor:
        """Target pieces that continue a word: no word-start mark, and a letter or digit first
        (worked out once per tokenizer, not per batch)."""
        if self._glue_ids is None:
            pieces = self.tokenizer.tgt_pieces(list(range(self.tokenizer.tgt_vocab_size)))
            # special pieces (<unk>, </s>) start with <
            ids = [i for i, p in enumerate(pieces) if p[:1].isalnum()]
            self._glue_ids = torch.tensor(ids, dtype=torch.long, device=self.device)
        return self._glue_ids

    def search(
        self,
        lines: Sequence[str],
        nbest: int | None = None,
        prefixes: Sequence[str | None] | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
        alignment: bool = False,
        first_line: int = 0,
        progress: Callable[[int], None] | None = None,
    ) -> list[list[Hypothesis]]:
        """Hypotheses for each line, best first (`requests` then `search_requests`): all the search
        finds, or the `nbest` best. An empty or blank line gets one empty hypothesis; an over-long
        line is cut to what the model can read."""
        found = self.requests(lines, prefixes, constraints, first_line)
        return self.search_requests(found, nbest, alignment, progress)

    def source_ids(self, lines: Sequence[str]) -> list[list[int]]:
        """Source ids ending in EOS, an over-long line cut to what the model can read."""
        return source_ids(self.tokenizer, lines, self._limit, self.direction.for_lines(lines)[0])

    @property
    def _limit(self) -> int:
        """The most source or target pieces the model reads, EOS included."""
        return self.model.cfg.max_positions - 1

    def score(self, src_lines: list[str], tgt_lines: list[str]) -> list[Hypothesis]:
        """Forced decoding: each target's tokens with their log-probabilities given its source; the
        score is their plain sum, EOS included (decode/scoring.py). In this translator's precision:
        load(scoring=True) or for_scoring() gives one in decode.score_precision."""
        if len(src_lines) != len(tgt_lines):
            raise MtError(
                f"{len(src_lines)} sources but {len(tgt_lines)} targets: give one target per source"
            )
        tgt_ids = self.tokenizer.encode_tgt(tgt_lines)
        limit = self._limit
        long = next((i for i, ids in enumerate(tgt_ids) if len(ids) + 1 > limit), None)
        if long is not None:
            raise MtError(
                f"target line {long + 1}: "
                f"{len(tgt_ids[long])} pieces, more than the model's {limit - 1}"
            )
        with autocast(self.cfg.precision == "bf16", self.device):
            found = force(
                self.model,
                self.source_ids(src_lines),
                tgt_ids,
                self.cfg,
                self.direction.tokens().start,
            )
        return [
            dataclasses.replace(h, text=" ".join(line.split())) for h, line in zip(found, tgt_lines)
        ]

    def translate(self, lines: Sequence[str]) -> list[str]:
        """The best translation of each line: exactly one string per line."""
        return [hyps[0].text for hyps in self.search(lines)]

    @property
    def source_lang(self) -> str:
        """The language the model reads: the one given (for_languages), else the first its
        checkpoint records ("" when none)."""
        return self.direction.source or next(iter(self.model.cfg.source_langs), "")

    def translate_document(
        self,
        text: str | bytes,
        kind: str = "text",
        glossary: Glossary | None = None,
        **options: Any,
    ) -> str | bytes:
        """A document (kind: lines, text, html, markdown, srt, vtt, po; docx, pptx, xlsx, odt, odp
        and epub as bytes) translated with its structure kept; `options` are DocumentConfig's
        fields (protect, protect_pattern, overwrite, source_lang). Sentences are split by the
        source language's rules: source_lang, else the checkpoint's, else generic ones. With a
        glossary, each sentence that holds a source term is translated with its target term."""
        return translate_document(self, text, kind, glossary, **options)

    def translate_aligned(
        self, lines: Sequence[str], alignment: bool = False, glossary: Glossary | None = None
    ) -> list[Aligned]:
        """documents/'s way in (documents/aligned.py): the best translation of each line and, with
        `alignment`, where each of its pieces lies and which source span it attends to most; with
        a glossary, each line's terms as constraints."""
        return translate_aligned(self, lines, alignment, glossary)


def _members(model: Forced) -> list[Transformer]:
    return [model] if isinstance(model, Transformer) else model.models()


def _lexicon(ckpt: checkpoint.Checkpoint) -> Shortlist | None:
    return (
        None if ckpt.shortlist is None else Shortlist.from_state(ckpt.shortlist, "the checkpoint")
    )


def _check_same_vocabulary(first: Path, a: Tokenizer, other: Path, b: Tokenizer) -> None:
    """Ensemble members read and write the same ids: both vocabularies must be the same pieces."""
    for side in ("target", "source"):
        pieces_a, pieces_b = a.vocabulary(side), b.vocabulary(side)
        if pieces_a != pieces_b:
            raise MtError(
                f"{first} and {other} have different {side} vocabularies ({len(pieces_a)} and "
                f"{len(pieces_b)} "
                "pieces): an ensemble needs models trained with one tokenizer"
            )
