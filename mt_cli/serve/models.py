"""The models a server holds, and which one answers a request.

Each model is an Entry: known from the start (its languages read from the checkpoint: catalog.py)
and loaded when a request first needs it, in a loading thread of its own, so that requests for the
models already loaded go on meanwhile. A loaded model has its own batchers, which hand their batches
to the server's one decoding thread (decoding_thread.py), where two models' batches take turns.
Under serve.max_loaded and serve.max_memory_mb (the models' sizes on disk) the least recently used
idle model is unloaded first; a model in use is never unloaded under a request.

A request's (source, target) goes to a model that translates it, the one of fewest languages
first (a bilingual model before a multilingual one), else through serve.pivot_lang: two models
chained, the first one's translation the second one's source.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mt_cli.config import ServeConfig
from mt_cli.data.languages import language_name
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.serve.api_request import Names
from mt_cli.serve.batcher import Batcher
from mt_cli.serve.decoding_thread import Decoding
from mt_cli.serve.documents import Tasks
from mt_cli.serve.guard import ApiError
from mt_cli.serve.routes import Hop, direct_hop, own_hop, reach
from mt_cli.serve.served_languages import Languages, public_code
from mt_cli.serve.service import Service
from mt_cli.serve.telemetry import Telemetry

BUSY_WAIT_S = 60.0  # how long a model to load waits for a loaded one to fall idle, under the caps


class Model:
    """A loaded model: the translator's service and its batchers. With serve.express_cost, two:
    requests of at most that many source tokens x beam take the express lane, whose batches run
    between the steps of the bulk lane's (decoding_thread.py), so that a light request never waits
    for a heavy one's slice."""

    def __init__(
        self,
        translator: Translator,
        languages: Languages,
        cfg: ServeConfig,
        telemetry: Telemetry,
        decoding: Decoding,
    ) -> None:
        self.languages, self.express_cost = languages, cfg.express_cost
        # A bulk batch's searches make room for the express batches between their steps.
        self.service = Service(
            translator.yielding(decoding.step),
            telemetry,
            cfg.max_batch_tokens,
            cfg.slice_cost,
            cfg.running_batches,
            cfg.join_every,
        )
        run = Tasks(self.service).run
        wait, gap = cfg.max_wait_ms / 1000, cfg.batch_gap_ms / 1000
        bulk = decoding.runner(run, express=False)
        self.batcher = Batcher(
            bulk,
            cfg.max_batch_tokens,
            wait,
            gap,
            cfg.max_queue_lines,
            telemetry.batch,
            decoding.quiet(),
            decoding.busy(express=False),
        )
        self.express = (
            Batcher(
                decoding.runner(run, express=True),
                cfg.max_batch_tokens,
                wait,
                gap,
                cfg.max_queue_lines,
                telemetry.batch,
                busy=decoding.busy(express=True),
            )
            if cfg.express_cost
            else None
        )

    def lane(self, cost: int) -> Batcher:
        return (
            self.express if self.express is not None and cost <= self.express_cost else self.batcher
        )

    @property
    def queued_lines(self) -> int:
        return self.batcher.queued_lines + (
            self.express.queued_lines if self.express is not None else 0
        )

    def close(self, timeout: float) -> None:
        for batcher in (self.batcher, self.express):
            if batcher is not None:
                batcher.close(timeout=timeout)


@dataclass(eq=False)
class Entry:
    name: str  # its file name(s), as /health and /metrics show it
    load: Callable[[], tuple[Translator, Languages]]
    languages: Languages | None  # None until loaded, for a model known only by its loader
    beam: int  # its own beam (0 until loaded, for one known only by its loader)
    size: int  # bytes on disk: what serve.max_memory_mb counts
    model: Model | None = None
    error: str | None = None  # why it failed to load
    users: int = 0  # requests using it now, or waiting for it to load: never unloaded then
    used: float = 0.0  # when a request last used it (monotonic)
    pending: Future | None = field(default=None, repr=False)


class Models:
    def __init__(
        self, entries: Callable[[], list[Entry]], cfg: ServeConfig, telemetry: Telemetry
    ) -> None:
        self.cfg, self.telemetry = cfg, telemetry
        self.entries: list[Entry] = []
        self.ready = False  # the catalog read (and a single model loaded)
        self.error: str | None = None  # why the server cannot serve at all
        self.on_error: Callable[[], None] | None = None  # `mt serve` stops when starting fails
        self.started = time.monotonic()
        self._find = entries
        self._pairs: dict[str, list[str]] | None = None  # pairs(), once worked out
        self._cond = threading.Condition()
        self._loading = threading.Lock()  # one load at a time
        self.decoding = Decoding()  # the one thread every model decodes on
        telemetry.queued.set_function(lambda: sum(m.queued_lines for m in self._models()))
        telemetry.loaded.set_function(lambda: len(self._loaded()))

    def start(self) -> None:
        self._in_thread(self._start)

    def _start(self) -> None:
        try:
            self.entries = self._find()
            if len(self.entries) == 1:  # one model: loaded at once, as /health waits for it
                self._load(self.entries[0])
                if self.entries[0].error:
                    raise MtError(self.entries[0].error)
        except Exception as e:  # noqa: BLE001 - reported by /health and by `mt serve`, which exits
            self.error = str(e) if isinstance(e, MtError) else f"{type(e).__name__}: {e}"
            if self.on_error is not None:
                self.on_error()
            return
        self.ready = True

    def _in_thread(self, work: Callable[..., None], *args: Any) -> Future:
        """`work` in a thread of its own that ends with it, one at a time. Not a pool's thread that
        stays: a thread that ran torch keeps an OpenMP team of its own, which slows the decoding
        thread's every operator (decoding_thread.py)."""
        done: Future = Future()

        def run() -> None:
            with self._loading:
                try:
                    work(*args)
                finally:
                    done.set_result(None)

        threading.Thread(target=run, name="mt-load", daemon=True).start()
        return done

    def check_ready(self) -> None:
        if not self.ready:
            raise ApiError(
                503,
                self.error or "the model is still loading",
                {"Retry-After": "1"},
                kind="loading",
            )

    def _loaded(self) -> list[Entry]:
        return [e for e in self.entries if e.model is not None]

    def _models(self) -> list[Model]:
        return [e.model for e in self.entries if e.model is not None]

    # Loading and unloading.

    async def use(self, entry: Entry) -> Model:
        """The entry's model, loaded first if need be; hold it until `release`."""
        with self._cond:
            entry.users += 1
            if entry.model is None and entry.error is None and entry.pending is None:
                entry.pending = self._in_thread(self._load, entry)
            pending = entry.pending
        if entry.model is None and pending is not None:
            await asyncio.wrap_future(pending)
        with self._cond:
            entry.used = time.monotonic()
            if entry.model is None:
                entry.users -= 1
                self._cond.notify_all()
                if entry.error is None:  # no room: every loaded model stayed in use
                    raise ApiError(
                        503,
                        f"every loaded model is in use (serve.max_loaded {self.cfg.max_loaded}, "
                        "serve.max_memory_mb "
                        f"{self.cfg.max_memory_mb}); retry when one is free",
                        {"Retry-After": "5"},
                        kind="overloaded",
                    )
                raise ApiError(
                    500, f"{entry.name}: cannot be loaded: {entry.error}", kind="decoding"
                )
            self.telemetry.model_requests.labels(entry.name).inc()
            return entry.model

    def release(self, entry: Entry) -> None:
        with self._cond:
            entry.users -= 1
            self._cond.notify_all()

    def _load(self, entry: Entry) -> None:
        """In the loading thread: room made under the caps, then the model loaded."""
        try:
            if not self._make_room(entry):
                entry.pending = None
                return
            translator, languages = entry.load()
            model = Model(translator, languages, self.cfg, self.telemetry, self.decoding)
        # Any failure: this model's requests get the reason; the server goes on.
        except Exception as e:  # noqa: BLE001
            entry.error = str(e) if isinstance(e, MtError) else f"{type(e).__name__}: {e}"
            entry.pending, self._pairs = None, None
            return
        with self._cond:
            entry.languages, entry.beam, self._pairs = languages, translator.cfg.beam, None
            entry.model, entry.pending, entry.error = model, None, None
            entry.used = time.monotonic()
        self.telemetry.model_loads.labels(entry.name).inc()

    def _make_room(self, entry: Entry) -> bool:
        """Unload the least recently used idle models until this one fits serve.max_loaded and
        serve.max_memory_mb; wait (bounded) while every loaded model is in use. False: no room."""
        cap, most = self.cfg.max_memory_mb * 2**20, self.cfg.max_loaded
        deadline = time.monotonic() + BUSY_WAIT_S
        with self._cond:
            while True:
                loaded = self._loaded()
                full = bool(most and len(loaded) >= most) or bool(
                    cap and sum(e.size for e in loaded) + entry.size > cap
                )
                if not full:
                    return True
                idle = [e for e in loaded if e.users == 0]
                if idle:
                    self._unload(min(idle, key=lambda e: e.used))
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)

    def _unload(self, entry: Entry) -> None:
        model, entry.model = entry.model, None
        if model is not None:
            model.close(self.cfg.shutdown_s)  # idle: nothing queued, the thread ends at once
            self.telemetry.model_unloads.labels(entry.name).inc()

    def close(self) -> None:
        for model in self._models():
            model.close(self.cfg.shutdown_s)
        self.decoding.close(self.cfg.shutdown_s)

    # Routing.

    def route(self, source: str | None, target: str | None, names: Names, plain: bool) -> list[Hop]:
        """The model(s) for a request's languages (None: the one model's own); 422 (each API its
        own status) naming the field when no model, and no pivot, translates them."""
        self.check_ready()
        if len(self.entries) == 1 and (source is None or target is None):
            return [own_hop(self.entries[0], source, target, names, self.describe)]
        source = source or self._only(self.sources())
        target = target or self._only(self.targets())
        if source is None or target is None:
            field = names.source if source is None else names.target
            raise ApiError(
                422,
                f"{field}: name the language; this server holds {len(self.entries)} models",
                field=field,
            )
        direct = direct_hop(self.entries, source, target)
        if direct is not None:
            return [direct]
        pivot = self.cfg.pivot_lang
        first, second = (
            (direct_hop(self.entries, source, pivot), direct_hop(self.entries, pivot, target))
            if pivot
            else (None, None)
        )
        if first is None or second is None or public_code(source) == public_code(pivot):
            read = any(public_code(source) == public_code(s) for s in self.sources())
            field = names.target if read else names.source
            raise ApiError(
                422,
                f"{field}: {source} -> {target} is not supported: {self.describe()}",
                field=field,
            )
        if not plain:
            raise ApiError(
                422,
                f"{source} -> {target} goes through {pivot} (two models); a prefix, a glossary, "
                "n-best, token "
                "scores or alignment need a model that translates it directly",
                field=names.target,
            )
        return [first, second]

    @staticmethod
    def _only(codes: tuple[str, ...]) -> str | None:
        return codes[0] if len(codes) == 1 else None

    def describe(self) -> str:
        """What this server translates, for an error message."""
        pairs = self.pairs()
        if not pairs:
            return (
                "its models record no languages; name them in serve.source_lang and "
                "serve.target_lang"
            )
        shown = [f"{s} -> {', '.join(ts[:20])}" for s, ts in list(pairs.items())[:20]]
        more = f" (and {len(pairs) - 20} more sources)" if len(pairs) > 20 else ""
        return "this server translates " + "; ".join(shown) + more

    def pairs(self) -> dict[str, list[str]]:
        """Each source language (as clients send it) and the targets it reaches, pivots included;
        kept until a model's languages or failure change it (DeepL's requests read it each time)."""
        if self._pairs is None:
            self._pairs = reach(self.entries, self.cfg.pivot_lang)
        return self._pairs

    def sources(self) -> tuple[str, ...]:
        return tuple(s for s, ts in self.pairs().items() if ts)

    def targets(self) -> tuple[str, ...]:
        return tuple(sorted({t for ts in self.pairs().values() for t in ts}))

    def listing(self) -> list[dict[str, object]]:
        """LibreTranslate's GET /languages: each language, its name and the targets it reaches."""
        pairs = self.pairs()
        codes = sorted(set(pairs) | {t for ts in pairs.values() for t in ts})
        return [{"code": c, "name": language_name(c), "targets": pairs.get(c, [])} for c in codes]

    def health(self) -> list[dict[str, object]]:
        """Each model for GET /health: name, languages, loaded or not, and why it failed."""
        shown = []
        for e in self.entries:
            languages = e.languages or Languages((), (), False)
            shown.append(
                {
                    "name": e.name,
                    "source": Languages.public(languages.sources),
                    "target": Languages.public(languages.targets),
                    "loaded": e.model is not None,
                    "error": e.error,
                }
            )
        return shown
