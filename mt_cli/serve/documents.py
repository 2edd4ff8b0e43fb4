"""LibreTranslate's texts and files, translated as documents (Translator.translate_document) in the
decoding thread, and the translated files kept for download.

Each request is one batcher job. Texts (text, html, markdown, ...) of one kind, direction and
glossary share a batch: the batch's documents are read once to learn their sentences, the
sentences of all of them go to the model as one search, and each document is put together from
its own (Tasks._together). Without a glossary the batch is a running batch (running.py): a text
that comes while it runs joins it between two steps, and each is answered once its own sentences
have ended. An office file, or a request for alternatives, is a batch alone.
Queued with the JSON API's jobs, a job waits its turn like them, and the model is only ever used
by that one thread.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from mt_cli.config import DocumentConfig
from mt_cli.data.languages import short_code
from mt_cli.decode import alignment as aligning
from mt_cli.decode.glossary import Glossary
from mt_cli.decode.hypothesis import Hypothesis, Request
from mt_cli.decode.translator import Translator
from mt_cli.documents import TEXT_KINDS, translate_document
from mt_cli.documents.aligned import Aligned
from mt_cli.serve.batcher import Job
from mt_cli.serve.running import Prepared
from mt_cli.serve.service import Service


@dataclass(frozen=True)
class Documents:
    """One request's texts, each a document of `kind`."""

    texts: list[Any]  # str; bytes for an office file
    kind: str  # a documents/ type: text, html, markdown, ..., docx
    source: str  # the source language (the model's code), whose rules split sentences
    # the target language, where the model is told it by a token; "" for a model of one target
    target: str
    alternatives: int  # this many more translations of each text, next best first (kind text only)
    source_told: bool = False  # the model is told the source too (M2M100, NLLB)
    glossary: Glossary | None = None  # terms each sentence that holds them is translated with


# a text's translation (bytes for an office file) and its alternatives
Translated = tuple[Any, list[str]]


class Tasks:
    """The batcher's runner: Documents jobs here, every other job as Service.run."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._directions: dict[tuple[str | None, str | None], Translator] = {}

    def run(self, key: Hashable, jobs: list[Job]) -> list[Any]:
        if not isinstance(jobs[0].payload, Documents):
            return self.service.run(key, jobs)
        first: Documents = jobs[0].payload
        if first.alternatives or self._sampled or first.kind not in TEXT_KINDS:
            return [self._translate(job.payload) for job in jobs]
        feed = jobs[0].feed
        together = self.service.running and first.glossary is None
        running = self.service.translator.running_batch() if together else None
        if feed is not None and running is not None:
            return self.service.run_running(running, feed, self._prepared, jobs)
        if len(jobs) == 1:
            return [self._translate(first)]
        return self._together([job.payload for job in jobs])

    def _prepared(self, job: Job) -> Prepared:
        """A document as a running batch takes it: the sentences it asks for, noted by putting it
        together once, and its translation, put together again from their hypotheses."""
        doc: Documents = job.payload
        deferred = Deferred(self._translator(doc))
        noted = self._each(deferred, doc)
        if isinstance(noted, Exception):
            raise noted

        def finish(found: list[list[Hypothesis]]) -> Any:
            deferred.answer(found)
            return self._each(deferred, doc)

        return deferred.recorded, finish

    @staticmethod
    def _each(deferred: Deferred, job: Documents) -> Any:
        """Each of a job's texts through `deferred`, or the job's own error."""
        lang = short_code(job.source)
        try:
            return [
                (deferred.translate_document(text, job.kind, job.glossary, source_lang=lang), [])
                for text in job.texts
            ]
        except Exception as e:  # noqa: BLE001 - this job's document, not the batch
            return e

    @property
    def _sampled(self) -> bool:
        """Sampling draws depend on the batch: sampled documents are translated one by one."""
        return self.service.translator.cfg.search_method == "sample"

    def _translator(self, job: Documents) -> Translator:
        tr = self.service.translator
        direction = (job.source if job.source_told else None, job.target or None)
        if direction != (None, None):
            if direction not in self._directions:
                self._directions[direction] = tr.for_languages(*direction)
            tr = self._directions[direction]
        return tr

    def _translate(self, job: Documents) -> list[Translated]:
        tr = self._translator(job)
        lang = short_code(job.source)  # the sentence splitter's rules are by language only
        if not job.alternatives:
            return [
                (tr.translate_document(text, job.kind, job.glossary, source_lang=lang), [])
                for text in job.texts
            ]
        return [_alternatives(tr, text, job, lang) for text in job.texts]

    def _together(self, jobs: list[Documents]) -> list[Any]:
        """Jobs that share a batch key (one kind, direction and glossary) as one search: each
        document is put together twice, first to learn the sentences it asks for, then from their
        translations, found in one search over all the documents' sentences. A document's
        sentences do not depend on their translations, and a sentence's translation does not
        depend on its batch, so each gets what it would alone. A job whose document fails gets
        its own error (the batcher fails that job only)."""
        deferred = Deferred(self._translator(jobs[0]))

        def each(job: Documents, start: int | None = None) -> Any:
            deferred.replay_from(start)
            return self._each(deferred, job)

        starts, asked = [], []
        for job in jobs:  # the sentences noted, placeholders returned
            starts.append(deferred.noted)
            asked.append(each(job))
        deferred.search()
        return [
            found if isinstance(found, Exception) else each(job, start)
            for job, found, start in zip(jobs, asked, starts)
        ]


class Deferred:
    """A Translator whose searches are put off: while noting, each search is recorded and answered
    with empty hypotheses; `search` then runs the recorded requests as one search (or a running
    batch finds them, and `answer` hands them in), after which the same calls, in the same order,
    get their real answers."""

    def __init__(self, tr: Translator) -> None:
        self.tr = tr
        self._asked: list[tuple[list[Request | None], bool]] = []
        self._answers: list[list[list[Hypothesis]]] | None = None
        self._next = 0

    @property
    def noted(self) -> int:
        """How many searches were recorded so far."""
        return len(self._asked)

    def replay_from(self, start: int | None) -> None:
        """The next search gets the answer of recorded search `start` (None: keep noting, or go
        on in order)."""
        if start is not None:
            self._next = start

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tr, name)  # tokenizer, direction, requests, ...

    def translate_document(
        self, text: Any, kind: str, glossary: Glossary | None, **options: Any
    ) -> Any:
        return aligning.translate_document(self, text, kind, glossary, **options)  # type: ignore[arg-type]

    def translate_aligned(self, lines: Sequence[str], alignment: bool = False) -> list[Aligned]:
        return aligning.translate_aligned(self, lines, alignment)  # type: ignore[arg-type]

    def search_requests(
        self, requests: Sequence[Request | None], nbest: int | None = None, alignment: bool = False
    ) -> list[list[Hypothesis]]:
        if self._answers is None:
            self._asked.append((list(requests), alignment))
            return [[Hypothesis([], 0.0)] for _ in requests]
        k = self._next
        found, asked = (self._answers[k], self._asked[k][0]) if k < len(self._asked) else ([], [])
        if len(found) != len(requests) or asked != list(requests):
            # (never expected: the second reading asked for other sentences, so they are searched)
            found = self.tr.search_requests(requests, nbest=1, alignment=alignment)
        self._next += 1
        return found

    @property
    def recorded(self) -> list[Request | None]:
        """Every recorded search's requests, in order."""
        return [r for asked, _ in self._asked for r in asked]

    def search(self) -> None:
        """The recorded requests searched together, then handed back call by call."""
        self.answer(self.tr.search_requests(self.recorded, nbest=1))

    def answer(self, found: list[list[Hypothesis]]) -> None:
        """The hypotheses found for `recorded` (their text made here, and their alignment where a
        search asked for it), handed back call by call from the first."""
        found = self.tr.with_text(found, 1)
        answers: list[list[list[Hypothesis]]] = []
        for asked, alignment in self._asked:
            mine, found = found[: len(asked)], found[len(asked) :]
            live = [i for i, r in enumerate(asked) if r is not None]
            if alignment and live:
                srcs = [list(cast(Request, asked[i]).src) for i in live]
                aligned = aligning.with_alignment(
                    self.tr.model, self.tr.cfg, srcs, [mine[i] for i in live]
                )
                for i, hyps in zip(live, aligned):
                    mine[i] = hyps
            answers.append(mine)
        self._answers, self._next = answers, 0


class NBest:
    """An AlignedTranslator (documents/aligned.py) giving each line its k-th best translation (the
    last found where the search found fewer): the document is put together once per k, and one
    search serves them all."""

    def __init__(self, tr: Translator, n: int) -> None:
        self.tr, self.n, self.k = tr, n, 0
        self._found: dict[tuple[Any, ...], list[list[Hypothesis]]] = {}

    def translate_aligned(self, lines: Sequence[str], alignment: bool = False) -> list[Aligned]:
        key = tuple(lines)
        if key not in self._found:
            self._found[key] = self.tr.search(lines, nbest=self.n)
        return [Aligned(hyps[min(self.k, len(hyps) - 1)].text) for hyps in self._found[key]]


def _alternatives(tr: Translator, text: str, job: Documents, lang: str) -> Translated:
    """The text's best translation and the next `job.alternatives` distinct ones, each sentence's
    k-th best hypothesis in the k-th (as LibreTranslate's argos backend puts them together), from
    a beam widened to hold them all."""
    n = job.alternatives + 1
    if tr.cfg.search_method != "sample" and tr.cfg.beam < n:
        tr = tr.with_options(method="beam", beam=n)
    engine, cfg = NBest(tr, n), DocumentConfig(input_type="text", source_lang=lang)
    found: list[str] = []
    for k in range(n):
        engine.k = k
        found.append(str(translate_document(engine, text, "text", cfg, lang)))
    best, others = found[0], []
    for other in found[1:]:
        if other != best and other not in others:
            others.append(other)
    return best, others


class Files:
    """Translated files waiting to be downloaded: in memory, at most `kept` (the oldest dropped
    first), each for `keep_s` seconds; a name is a random id before the file's own name."""

    def __init__(self, kept: int = 32, keep_s: float = 1800.0) -> None:
        self.kept, self.keep_s = kept, keep_s
        self._files: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    def put(self, filename: str, data: bytes) -> str:
        self._expire()
        name = f"{uuid.uuid4().hex}.{safe_name(filename)}"
        self._files[name] = (time.monotonic(), data)
        while len(self._files) > self.kept:
            self._files.popitem(last=False)
        return name

    def get(self, name: str) -> bytes | None:
        self._expire()
        found = self._files.get(name)
        return found[1] if found else None

    def _expire(self) -> None:
        while self._files and next(iter(self._files.values()))[0] < time.monotonic() - self.keep_s:
            self._files.popitem(last=False)


def safe_name(filename: str) -> str:
    """A file's name as a URL and a download may carry it: letters, digits, dot, dash,
    underscore."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", filename.replace("\\", "/").rsplit("/", 1)[-1]).lstrip(
        "._"
    )
    return base[-100:] or "file"
