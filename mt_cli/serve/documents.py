"""LibreTranslate's texts and files, translated as documents (Translator.translate_document) in the
decoding thread, and the translated files kept for download.

Each request is one batcher job that never shares a batch: a document is split into sentences as
it is translated, and all of its sentences go to the model as one search there. Queued with the
JSON API's jobs, it waits its turn like them, and the model is only ever used by that one thread.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from mt_cli.config import DocumentConfig
from mt_cli.data.languages import short_code
from mt_cli.decode.glossary import Glossary
from mt_cli.decode.hypothesis import Hypothesis
from mt_cli.decode.translator import Translator
from mt_cli.documents import translate_document
from mt_cli.documents.aligned import Aligned
from mt_cli.serve.batcher import Job
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
        return [self._translate(job.payload) for job in jobs]

    def _translate(self, job: Documents) -> list[Translated]:
        tr = self.service.translator
        direction = (job.source if job.source_told else None, job.target or None)
        if direction != (None, None):
            if direction not in self._directions:
                self._directions[direction] = tr.for_languages(*direction)
            tr = self._directions[direction]
        lang = short_code(job.source)  # the sentence splitter's rules are by language only
        if not job.alternatives:
            return [
                (tr.translate_document(text, job.kind, job.glossary, source_lang=lang), [])
                for text in job.texts
            ]
        return [_alternatives(tr, text, job, lang) for text in job.texts]


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
