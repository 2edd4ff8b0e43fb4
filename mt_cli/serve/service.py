"""What the server decodes: each request checked and turned into a batcher job, and each batch of
jobs into one Translator call, so that the server translates exactly as `mt translate` does.

A request's lines become search requests once, when it arrives (Translator.requests: tokenized,
and everything it could get wrong checked: n-best above the beam, terms without beam search, a
prefix the model cannot read, a term the vocabulary cannot spell), so a bad request fails alone,
with 422, and never takes the batch it would join down. The batcher then cuts batches by the
same source-token budget as search (decode.batch_tokens = serve.max_batch_tokens): each batch is
one search, and no line is tokenized twice.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from mt_cli.config import OutputConfig
from mt_cli.decode.attention_maps import record_attention
from mt_cli.decode.glossary import Glossary
from mt_cli.decode.hypothesis import Hypothesis, Request, as_object, score_object
from mt_cli.decode.request import check_nbest
from mt_cli.decode.running_batch import RunningBatch
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.serve.batcher import Feed, Job
from mt_cli.serve.running import Prepared, Running
from mt_cli.serve.telemetry import Telemetry


@dataclass(frozen=True)
class Translation:
    beam: int
    requests: list[Request | None]  # one per line, None for a blank one
    # format "text" or "jsonl" (the API's "full"), n-best, token scores, alignment
    output: OutputConfig


@dataclass(frozen=True)
class Scoring:
    sources: list[str]
    targets: list[str]
    normalize: bool
    full: bool


@dataclass(frozen=True)
class Attention:
    text: str
    target: str | None


@dataclass(frozen=True)
class Work:
    """A checked request, ready to queue: the batcher's key and the request's slices, each its line
    and token counts and payload (one slice unless the request is larger than serve.slice_cost)."""

    key: Hashable
    # a Translation, Scoring, Attention or documents.Documents
    parts: Sequence[tuple[int, int, Any]]
    # source tokens x beam of the whole request: what tells a light request (models.Model.lane)
    cost: int = 0

    @property
    def lines(self) -> int:
        return sum(n for n, _, _ in self.parts)


class Service:
    def __init__(
        self,
        translator: Translator,
        telemetry: Telemetry | None = None,
        batch_tokens: int = 0,
        slice_cost: int = 0,
        running: bool = False,
        join_every: int = 1,
    ) -> None:
        """`running`: batches of plain lines and texts run as running batches (running.py) where
        the translator allows one, which sentences join every `join_every` steps."""
        if batch_tokens:  # the batcher's budget: a batch it hands over is decoded as one search
            translator = translator.with_options(batch_tokens=batch_tokens, batch_size=1 << 30)
        self.translator, self.telemetry = translator, telemetry
        self.batch_tokens = batch_tokens  # source tokens a batch holds (0: no limit)
        self.running, self.join_every = running, join_every
        # source tokens x beam per slice of a large request (0: no slicing)
        self.slice_cost = slice_cost
        self._beams: dict[int, Translator] = {}
        self._alone = itertools.count()  # keys for jobs that never share a batch

    def with_beam(self, beam: int | None) -> Translator:
        """The translator searching with `beam` (None: the checkpoint's own), made once per beam."""
        if not beam or beam == self.translator.cfg.beam:
            return self.translator
        if beam not in self._beams:
            self._beams[beam] = self.translator.with_options(beam=beam)
        return self._beams[beam]

    def translation(
        self,
        lines: list[str],
        beam: int | None,
        output: OutputConfig,
        glossary: dict[str, str] | None,
        prefixes: list[str | None] | None,
        direction: tuple[str | None, str | None] = (None, None),
    ) -> Work:
        """A translation request checked as `mt translate` checks its options and input;
        `direction`: its (source, target) languages where it names them (the requests carry their
        tokens)."""
        tr = self.with_beam(beam)
        if direction != (None, None):
            tr = tr.for_languages(*direction)
        check_nbest(output.nbest, tr.cfg)
        if prefixes is not None and len(prefixes) != len(lines):
            raise MtError(
                f"prefix: {len(prefixes)} prefixes for {len(lines)} lines; "
                "give one per line (null for none)"
            )
        terms = None
        if glossary:
            entries = [(s.strip(), t.strip()) for s, t in glossary.items()]
            if any(not s or not t for s, t in entries):
                raise MtError(
                    "glossary: an empty source or target term; give both sides of every entry"
                )
            found = Glossary(entries)
            terms = [found.terms_for(line) for line in lines]
        # raises on what this model cannot take, naming the line
        requests = tr.requests(lines, prefixes, terms)
        # Batches that use none of terms, alignment or prefixes run as running batches (run).
        key = (
            "translate",
            tr.cfg.beam,
            bool(terms and any(terms)),
            output.alignment,
            any(r is not None and r.prefix for r in requests),
        )
        parts = [
            (j - i, tokens, Translation(tr.cfg.beam, requests[i:j], output))
            for i, j, tokens in self._slices(requests, tr.cfg.beam)
        ]
        return Work(key, parts, sum(tokens for _, tokens, _ in parts) * tr.cfg.beam)

    def _slices(self, requests: list[Request | None], beam: int) -> list[tuple[int, int, int]]:
        """[start, end) line ranges of at most slice_cost source tokens x beam each (a longer line
        is a slice alone), with their token counts."""
        out, start, tokens = [], 0, 0
        for i, r in enumerate(requests):
            n = len(r.src) if r is not None else 0
            if self.slice_cost and i > start and (tokens + n) * beam > self.slice_cost:
                out.append((start, i, tokens))
                start, tokens = i, 0
            tokens += n
        out.append((start, len(requests), tokens))
        return out

    def scoring(self, sources: list[str], targets: list[str], normalize: bool, full: bool) -> Work:
        if len(sources) != len(targets):
            raise MtError(
                f"source and target: {len(sources)} sources but {len(targets)} targets; "
                "give one per source"
            )
        tokens = sum(len(ids) for ids in self.translator.tokenizer.encode_src(sources))
        job = Scoring(sources, targets, normalize, full)
        return Work(("score", next(self._alone)), [(len(sources), tokens, job)], tokens)

    def attention(self, text: str, target: str | None) -> Work:
        tokens = len(text.split())
        return Work(
            ("attention", next(self._alone)), [(1, tokens, Attention(text, target))], tokens
        )

    def run(self, key: Hashable, jobs: list[Job]) -> list[Any]:
        """One batch from the decoding thread: jobs with one key, one result each."""
        first = jobs[0].payload
        if isinstance(first, Translation):
            tr = self.with_beam(first.beam)
            feed, plain = jobs[0].feed, not any(key[2:])  # type: ignore[index]
            running = tr.running_batch() if self.running and feed and plain else None
            if running is not None and feed is not None:
                return self.run_running(running, feed, self._prepared(tr), jobs)
            return self._translate(tr, [job.payload for job in jobs])
        if isinstance(first, Scoring):
            return [self._score(first)]
        return [self._attention(first)]

    def run_running(
        self, batch: RunningBatch, feed: Feed, prepare: Callable[[Job], Prepared], jobs: list[Job]
    ) -> list[Any]:
        """`jobs` and those that join them decoded as one running batch (running.py), within the
        batch's token budget, joining every `join_every` steps."""
        return Running(
            batch, feed, self.batch_tokens, prepare, self.telemetry, self.join_every
        ).run(jobs)

    def _prepared(self, tr: Translator) -> Callable[[Job], Prepared]:
        """A translation job as a running batch takes it: its requests, and how its answer is made
        from their hypotheses."""

        def prepare(job: Job) -> Prepared:
            t: Translation = job.payload

            def finish(found: list[list[Hypothesis]]) -> list[Any]:
                found = tr.with_text(found, t.output.nbest)
                if self.telemetry is not None:
                    self.telemetry.out_tokens.inc(sum(len(hyps[0].tokens) for hyps in found))
                return answers(tr, t, found)

            return t.requests, finish

        return prepare

    def _translate(self, tr: Translator, jobs: list[Translation]) -> list[list[Any]]:
        requests = [r for job in jobs for r in job.requests]
        alignment = jobs[0].output.alignment  # part of the batch's key: the same for every job
        found = tr.search_requests(requests, max(job.output.nbest for job in jobs), alignment)
        if self.telemetry is not None:
            self.telemetry.out_tokens.inc(sum(len(hyps[0].tokens) for hyps in found))
        out: list[list[Any]] = []
        at = 0
        for job in jobs:
            mine, at = found[at : at + len(job.requests)], at + len(job.requests)
            out.append(answers(tr, job, mine))
        return out

    @functools.cached_property
    def scorer(self) -> Translator:
        """What /score measures with: the translator in decode.score_precision (fp32 unless told),
        loaded a second time at the first /score where it decodes in int8."""
        return self.translator.for_scoring()

    def _score(self, job: Scoring) -> list[Any]:
        found = self.scorer.score(job.sources, job.targets)
        pieces = self.scorer.tokenizer.tgt_pieces
        objects = [score_object(h, job.normalize, pieces) for h in found]
        return objects if job.full else [o["score"] for o in objects]

    def _attention(self, job: Attention) -> dict[str, Any]:
        # an ensemble is refused before translating
        maps = record_attention(self.translator, job.text, job.target)
        cross = maps.maps["decoder-cross"]  # per layer (H, queries, keys)
        # Row i is the decoder position that predicts output piece i (the last one </s>).
        rows = maps.tgt_pieces[1:] + ["</s>"]
        layers = [
            [[round(float(w), 5) for w in row] for row in layer.mean(dim=0)] for layer in cross
        ]
        return {
            "source": maps.src_pieces,
            "target": rows,
            "translation": maps.target,
            "layers": layers,
        }


def answers(tr: Translator, job: Translation, found: list[list[Hypothesis]]) -> list[Any]:
    """A translation job's answer from its lines' hypotheses (with their text): each line's best
    text, or with format "jsonl" its object."""
    if job.output.format == "text":
        return [hyps[0].text for hyps in found]
    pieces = tr.tokenizer.tgt_pieces
    return [
        as_object(h, r is None, job.output, pieces, r.source_lang if r else "")
        for h, r in zip(found, job.requests)
    ]
