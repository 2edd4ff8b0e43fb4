"""From a parsed request to its translations, the same for every API: the source language detected
("auto"), the model(s) chosen (models.py: direct, multilingual, or a pivot through a third
language), the limits checked (limits.py), the cache read, and the rest queued with each model's
decoding thread and awaited, so that the event loop stays free while the model works.

A request's lines (the JSON API's) are checked when they arrive (Service.translation tokenizes
them and refuses what the model cannot take) and decoded as `mt translate` decodes; documents
(LibreTranslate's and DeepL's texts) are translated as documents in the decoding thread, those of
one kind, direction and glossary in shared batches (documents.py). Errors are ApiErrors in the
JSON API's statuses, which each API answers in its own.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Hashable
from typing import Any

from mt_cli.config import OutputConfig
from mt_cli.decode.glossary import Glossary
from mt_cli.documents import TEXT_KINDS, text_sample
from mt_cli.errors import MtError
from mt_cli.serve.api_request import LINES, TextRequest
from mt_cli.serve.batcher import Overloaded
from mt_cli.serve.detect import Detection, Detector
from mt_cli.serve.documents import Documents
from mt_cli.serve.guard import ApiError
from mt_cli.serve.limits import Limits
from mt_cli.serve.models import Models
from mt_cli.serve.routes import Hop
from mt_cli.serve.served_languages import Languages
from mt_cli.serve.service import Service, Work
from mt_cli.serve.translation_cache import Cache

# a text's translation (with format full, the JSON API's object) and its alternatives
Result = tuple[Any, list[str]]
PLAIN = OutputConfig("text")


class Pipeline:
    def __init__(self, models: Models, limits: Limits, cache: Cache | None = None) -> None:
        self.models, self.limits, self.cache = models, limits, cache
        self._detector: Detector | None = None
        self._alone = itertools.count()  # batcher keys: a document job never shares a batch

    async def detect(self, texts: list[str]) -> list[Detection]:
        """The servers' source languages the texts may be in, most likely first."""
        self.models.check_ready()
        if self._detector is None:
            self._detector = Detector(Languages(self.models.sources(), (), False))
        # lingua's first call loads its models
        return await asyncio.to_thread(self._detector.detect, texts)

    async def translate(self, req: TextRequest) -> tuple[list[Result], Detection | None]:
        """Each text's translation, and the detection of its source where it asked for "auto"."""
        source, detected = req.source, None
        if source is not None and source.lower() == "auto" and not self._identifies(req):
            detected = (await self.detect([text_sample(t, req.kind) for t in req.texts]))[0]
            source = detected["language"]
        hops = self.models.route(source, req.target, req.names, req.plain and not req.glossary)
        self.limits.check(req, req.beam or hops[0].entry.beam or 1)
        self.limits.charge(req.caller, req.chars)
        key = self._key(hops, req) if self.cache is not None and req.prefixes is None else None
        results: list[Result | None] = [self._cached(key, t) for t in req.texts]
        todo = [i for i, r in enumerate(results) if r is None]
        texts = [req.texts[i] for i in todo]
        found: list[Result] = []
        for n, hop in enumerate(hops):
            if not texts:
                break
            found = await self._translate(hop, req, texts, last=n == len(hops) - 1)
            texts = [text for text, _ in found]
        for i, result in zip(todo, found):
            results[i] = result
            if key is not None and self.cache is not None:
                self.cache.put((key, req.texts[i]), result)
        return [r for r in results if r is not None], detected

    def _identifies(self, req: TextRequest) -> bool:
        """Whether the model identifies "auto" itself, line by line (the JSON API's lines, to the
        one model, an M2M100 or NLLB told its source), rather than the server detecting it per
        request."""
        entries = self.models.entries
        told = (
            len(entries) == 1
            and entries[0].languages is not None
            and entries[0].languages.told_source
        )
        return req.kind == LINES and told

    def _cached(self, key: Hashable | None, text: str) -> Result | None:
        return self.cache.get((key, text)) if key is not None and self.cache is not None else None

    @staticmethod
    def _key(hops: list[Hop], req: TextRequest) -> Hashable:
        """What a translation depends on besides its text: the models, their languages, the
        options."""
        glossary = tuple(sorted(req.glossary.items())) if req.glossary else None
        route = tuple((hop.entry.name, hop.source, hop.target, hop.lang) for hop in hops)
        return route, req.kind, req.beam, req.nbest, req.output, glossary

    async def _translate(
        self, hop: Hop, req: TextRequest, texts: list[Any], last: bool
    ) -> list[Result]:
        """One model's part: the request's options on the last model of a route, plain before it."""
        if req.kind != LINES:
            terms = Glossary(list(req.glossary.items())) if req.glossary and last else None
            job = Documents(
                texts,
                req.kind,
                hop.lang,
                hop.target or "",
                req.nbest - 1 if last else 0,
                hop.source is not None,
                terms,
            )
            # Its size guessed from its characters (about 4 a piece) before the thread tokenizes it.
            pieces = sum(len(t) for t in texts) // 4
            if req.kind in TEXT_KINDS and job.alternatives == 0:
                # Texts of one kind, direction and glossary share a batch (documents.Tasks).
                given = tuple(sorted(req.glossary.items())) if req.glossary and last else None
                key: Hashable = ("texts", req.kind, hop.lang, hop.target, hop.source, given)
                budget = max(1, pieces)
            else:
                # An office file, or alternatives: its own key and a full batch's tokens, so the
                # decoding thread starts it at once instead of waiting for others to join.
                key, budget = ("documents", next(self._alone)), self.models.cfg.max_batch_tokens
            cost = pieces * max(hop.entry.beam, req.nbest)
            found = await self.run(hop, lambda s: Work(key, [(len(texts), budget, job)], cost))
            return list(found)
        output, glossary, prefixes = (
            (req.output, req.glossary, req.prefixes) if last else (PLAIN, None, None)
        )
        direction = (hop.source, hop.target)

        def check(service: Service) -> Work:
            return service.translation(texts, req.beam, output, glossary, prefixes, direction)

        return [(x, []) for x in await self.run(hop, check)]

    async def run(self, hop: Hop, check: Callable[[Service], Work]) -> Any:
        """A job for one model: its model held (loaded first if need be), the request checked by
        `check` off the event loop (it tokenizes), queued, and its result awaited."""
        model = await self.models.use(hop.entry)
        try:
            try:
                work = await asyncio.to_thread(check, model.service)
            except MtError as e:
                raise ApiError(422, str(e), kind="invalid") from None
            try:
                future = model.lane(work.cost).submit_group(work.key, list(work.parts))
            except Overloaded as e:
                raise ApiError(
                    503, str(e), {"Retry-After": str(e.retry_after)}, kind="overloaded"
                ) from None
            try:
                return await asyncio.wrap_future(future)
            # a document that does not parse, a target the model has no token for
            except MtError as e:
                raise ApiError(422, str(e), kind="invalid") from None
            except Exception as e:  # noqa: BLE001 - this batch failed; the server goes on
                raise ApiError(
                    500, f"decoding failed: {type(e).__name__}: {e}", kind="decoding"
                ) from None
        finally:
            self.models.release(hop.entry)
