"""Dynamic batching: requests queue as jobs, and a batching thread merges those that can share a
search.

Requests enter a queue as jobs. The thread takes the oldest job, then every later job with the same
key (the same search: beam, constraints, ...) until the batch holds `max_batch_tokens` source tokens
or it is time to start (max_wait_s, gap_s: see _take), and hands the batch to `run`, which decodes
the jobs' lines as one length-sorted batch and returns each job's own result (in a server, on its
one decoding thread: decoding_thread.py). Decoding never runs on the event loop.

A large request comes as a group of slices (submit_group): the queue holds requests in turn, and
each batch takes at most one slice of each, after which a request with slices left goes to the
back. So a request that arrives while a 1,000-line request is being decoded waits for one slice
of it, not for all of it. A large request that has had the queue to itself for two batches takes
as many of its slices as the batch budget holds: slicing costs it little while nobody waits.
Nobody: `quiet` also tells whether the express lane decoded meanwhile, whose requests wait for
one step of this lane's search (decoding_thread.py), a long step in a full batch.

A batch's search may go on while new jobs with its key come (a running batch:
decode/running_batch.py): between two of its steps it takes them (`Feed.more`, within the token
budget the sentences still running leave) and answers each job as soon as its lines have ended
(`Feed.answer`). It takes none while `busy()` says another batch waits for the decoding thread,
so that it ends and lets that one run, nor while the express lane decodes between its steps, nor
while a request that cannot join it (another key: another beam, terms, ...) waits for its turn.

A job whose client has gone (its future cancelled while it waited) is dropped before decoding.
An exception in `run` fails only that batch's jobs; an exception `run` returns as a job's result
fails only that job. When more lines wait than `max_queue_lines`,
`submit` refuses at once with the seconds the queue needs to drain, instead of letting requests
time out.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any


class Overloaded(Exception):
    """The queue is full; `retry_after` is the whole seconds it needs to drain at the recent
    rate."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the server is at capacity; retry in {retry_after} s")
        self.retry_after = retry_after


@dataclass
class Job:
    key: Hashable  # jobs with equal keys may share one search
    lines: int  # how many lines the job holds (what the queue limit counts)
    tokens: int  # source tokens (what the batch budget counts)
    payload: Any  # what `run` reads: the lines and their options
    future: Future = field(default_factory=Future)
    queued: float = field(default_factory=time.monotonic)
    turn: int = 0  # the request it is a slice of: the queue takes requests in turn
    feed: Feed | None = None  # while it is decoded: its batch's way to more jobs (Feed)
    started: float = 0.0  # when its decoding began


class Feed:
    """What a runner may do between two steps of a batch's search: take the jobs with the batch's
    key queued since (`more`), and answer a job as soon as it is done (`answer`)."""

    def __init__(self, batcher: Batcher, key: Hashable) -> None:
        self.batcher, self.key = batcher, key
        self.taken: list[Job] = []  # the jobs `more` gave

    def more(self, tokens: int) -> list[Job]:
        """Jobs with the batch's key queued now, in turn, of at most `tokens` source tokens in all
        (none while another batch waits to run)."""
        jobs = self.batcher.more(self.key, tokens)
        for job in jobs:
            job.feed = self
        self.taken += jobs
        return jobs

    def answer(self, job: Job, result: Any) -> None:
        """`job`'s result (an Exception fails that job alone), sent now."""
        _settle(job, result)


# run(key, jobs) -> one result per job, in order
Runner = Callable[[Hashable, list[Job]], list[Any]]
# observe(jobs, seconds waited by each, seconds decoding took)
Observer = Callable[[list[Job], list[float], float], None]


class Batcher:
    def __init__(
        self,
        run: Runner,
        max_batch_tokens: int,
        max_wait_s: float,
        gap_s: float,
        max_queue_lines: int,
        observe: Observer | None = None,
        quiet: Callable[[], bool] | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        """`quiet`: whether the rest of the server (an express lane) decoded nothing since it was
        last asked; a large request takes full batches only while it is (see _take). `busy`:
        whether another batch waits for the decoding thread (a running batch then takes no more
        jobs)."""
        self.run, self.observe, self.quiet, self.busy = run, observe, quiet, busy
        self.max_batch_tokens, self.max_wait_s, self.gap_s = max_batch_tokens, max_wait_s, gap_s
        self.max_queue_lines = max_queue_lines
        # requests in turn, each its slices still to decode
        self._turns: deque[deque[Job]] = deque()
        self._next_turn = 0
        self._was_alone = False  # the last batch's request had the queue to itself
        self._queued_lines = 0
        self._rate = 0.0  # lines/s of recent batches, for Retry-After
        self._free_since = 0.0  # when the last batch ended
        self._last_jobs = 0  # how many jobs it answered
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="mt-batching", daemon=True)
        self._thread.start()

    @property
    def queued_lines(self) -> int:
        return self._queued_lines

    def submit(self, key: Hashable, lines: int, tokens: int, payload: Any) -> Future:
        """Queue a job; its future gets `run`'s result for it (or the exception its batch
        raised)."""
        return self.submit_group(key, [(lines, tokens, payload)])

    def submit_group(self, key: Hashable, parts: list[tuple[int, int, Any]]) -> Future:
        """Queue one request as slices (lines, tokens, payload), decoded in turn with the other
        requests; its future gets the slices' results (lists) joined, in order. One slice: its
        future, its result as `run` gives it."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the server is shutting down")
            lines = sum(n for n, _, _ in parts)
            if self._queued_lines + lines > self.max_queue_lines:
                raise Overloaded(self._drain_seconds())
            turn, self._next_turn = self._next_turn, self._next_turn + 1
            jobs = deque(Job(key, n, tokens, payload, turn=turn) for n, tokens, payload in parts)
            self._turns.append(jobs)
            self._queued_lines += lines
            self._cond.notify()
        return jobs[0].future if len(jobs) == 1 else _joined(list(jobs))

    def close(self, timeout: float | None = None) -> None:
        """Decode what is queued, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)

    def _drain_seconds(self) -> int:
        return max(1, math.ceil(self._queued_lines / self._rate)) if self._rate > 0 else 1

    def _take(self) -> list[Job]:
        """The next batch: the next slice of the request whose turn it is, and the next slices of
        later requests with its key, within the token budget, once it is time to start (below).
        Empty only when closed."""
        with self._cond:
            while not self._turns:
                if self._closed:
                    return []
                self._cond.wait()
            while True:
                first = self._turns[0][0]
                batch: list[Job] = []
                tokens = 0
                for turn in self._turns:
                    job = turn[0]
                    if job.key == first.key and (
                        not batch or tokens + job.tokens <= self.max_batch_tokens
                    ):
                        batch.append(job)
                        tokens += job.tokens
                # The batch starts when it is full; or max_wait after the oldest job came (or the
                # last batch ended, if later); or, once as many jobs have come since the last
                # batch ended as it answered, `gap` after the newest. The clients a batch answers
                # come back within milliseconds of each other: waiting for them all merges them
                # with the jobs that queued meanwhile into one batch, where otherwise two groups
                # of half the size would take turns.
                opened = max(first.queued, self._free_since)
                came = [job.queued for job in batch if job.queued > self._free_since]
                deadline = opened + self.max_wait_s
                if came and len(came) >= self._last_jobs:
                    deadline = min(deadline, max(came) + self.gap_s)
                left = deadline - time.monotonic()
                if (
                    tokens >= self.max_batch_tokens
                    or left <= 0
                    or self._closed
                    or len(self._turns[0]) > 1
                ):
                    break  # (a request with slices left has waited its turn already)
                self._cond.wait(left)
            # A large request that had the queue to itself last time too: as many of its slices as
            # the budget holds. (Alone once is not enough: clients whose answers just went out come
            # back within milliseconds, and would find the thread busy with a full batch.)
            # A batch taken while light requests are decoded between its steps stays one slice:
            # each of its steps is one they may wait for.
            alone = len(self._turns) == 1 and (self.quiet is None or self.quiet())
            if alone and self._was_alone:
                for job in itertools.islice(self._turns[0], 1, None):
                    if tokens + job.tokens > self.max_batch_tokens:
                        break
                    batch.append(job)
                    tokens += job.tokens
            self._was_alone = alone
            self._advance(batch)
            self._queued_lines -= sum(job.lines for job in batch)
            return batch

    def more(self, key: Hashable, tokens: int) -> list[Job]:
        """The first slice of each queued request with `key`, in turn, of at most `tokens` source
        tokens in all, taken from the queue (Feed.more). A job whose client has gone is dropped."""
        if self.busy is not None and self.busy():
            return []
        # While light requests are decoded between its steps, a batch does not grow: each of its
        # steps is one they may wait for (as _take keeps such a batch to one slice).
        if self.quiet is not None and not self.quiet():
            return []
        with self._cond:
            # A request that cannot join (another key) waits for this batch to end: it takes no
            # more, so that the turn passes (as a batch of whole slices ends after one slice each).
            if any(turn[0].key != key for turn in self._turns):
                return []
            batch: list[Job] = []
            for turn in self._turns:
                job = turn[0]
                if job.key == key and job.tokens <= tokens:
                    batch.append(job)
                    tokens -= job.tokens
            if not batch:
                return []
            self._advance(batch)
            self._queued_lines -= sum(job.lines for job in batch)
        now = time.monotonic()
        live = [job for job in batch if job.future.set_running_or_notify_cancel()]
        for job in live:
            job.started = now
        return live

    def _advance(self, batch: list[Job]) -> None:
        """The batch's slices leave the queue; a request served with slices left goes to the
        back."""
        served = {id(job) for job in batch}
        kept: deque[deque[Job]] = deque()
        back: deque[deque[Job]] = deque()
        for turn in self._turns:
            if id(turn[0]) not in served:
                kept.append(turn)
                continue
            while turn and id(turn[0]) in served:
                turn.popleft()
            if turn:
                back.append(turn)
        self._turns = kept + back

    def _loop(self) -> None:
        while batch := self._take():
            started = time.monotonic()
            # A job whose waiting client went away (its future cancelled) is not decoded.
            live = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if not live:
                continue
            feed = Feed(self, live[0].key)
            for job in live:
                job.feed, job.started = feed, started
            try:
                results = self.run(live[0].key, live)
            except Exception as e:  # noqa: BLE001 - fails this batch's requests, not the server
                for job in live + feed.taken:
                    if not job.future.done():
                        job.future.set_exception(e)
                continue
            seconds = time.monotonic() - started
            for job, result in zip(live, results):
                _settle(job, result)
            for job in live + feed.taken:
                if not job.future.done():  # a runner's mistake, said rather than hung on
                    job.future.set_exception(RuntimeError("the batch ended without this job"))
            # After a running batch, which took every job that came while it ran, the next batch
            # waits for nobody in particular (see _take).
            answered = 0 if feed.taken else len(live)
            live += feed.taken
            lines = sum(job.lines for job in live)
            if seconds > 0:
                self._rate = (
                    lines / seconds if self._rate == 0 else 0.8 * self._rate + 0.2 * lines / seconds
                )
            if self.observe is not None:
                self.observe(live, [job.started - job.queued for job in live], seconds)
            self._free_since, self._last_jobs = time.monotonic(), answered


def _settle(job: Job, result: Any) -> None:
    """`job`'s future gets `result`, or fails with it where it is an Exception (that job's own
    failure: one bad document)."""
    if job.future.done():
        return
    if isinstance(result, Exception):
        job.future.set_exception(result)
    else:
        job.future.set_result(result)


def _joined(jobs: list[Job]) -> Future:
    """One future for a request's slices: their results joined, or the first exception; cancelling
    it (the client went away) cancels the slices not yet decoded."""
    whole: Future = Future()
    results: list[Any] = [None] * len(jobs)
    left = [len(jobs)]
    lock = threading.Lock()

    def done(k: int, part: Future) -> None:
        if whole.done():
            return
        failed = RuntimeError("a slice was cancelled") if part.cancelled() else part.exception()
        if failed is not None:
            with lock:
                if not whole.done():
                    whole.set_exception(failed)
            return
        with lock:
            results[k] = part.result()
            left[0] -= 1
            if left[0] == 0 and not whole.done():
                whole.set_result([x for r in results for x in r])

    for k, job in enumerate(jobs):
        job.future.add_done_callback(functools.partial(done, k))

    def cancel_slices(f: Future) -> None:
        if f.cancelled():
            for job in jobs:
                job.future.cancel()

    whole.add_done_callback(cancel_slices)
    return whole
