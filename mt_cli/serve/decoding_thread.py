"""The server's one decoding thread: every model's batches run on it, an express batch between two
steps of a bulk one.

Every thread that runs a parallel torch operator keeps a team of OpenMP threads for the rest of its
life. Once a process holds more OpenMP threads than CPUs, libgomp stops spinning while it waits for
work and sleeps instead, and waking costs each operator's threads dearly: beside one idle team
left by another thread, a one-line search runs several times slower (benchmarks/openmp_teams.py).
So the server decodes on one
thread only (models load in threads that end with the load), whatever the number of models and
lanes: their batchers form batches and hand them here.

A bulk batch's searches call `step()` before each encoder call and decoder step
(Translator.yielding); there the express batches waiting run to the end, inline, before the bulk
search takes its next step. A light request thus waits for one step of a heavy one, not for its
slice, and has both cores while it decodes. Bulk batches run one after another in the order they
came, so two models' large requests take turns batch by batch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

from mt_cli.serve.batcher import Job, Runner

Work = tuple[Callable[[], Any], Future]


class Decoding:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._bulk: deque[Work] = deque()
        self._express: deque[Work] = deque()
        self._in_express = False  # an express batch runs now (one never makes room for another)
        self._bulk_running = False  # a bulk batch runs now
        self._express_runs = 0  # express batches run so far
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="mt-decoding", daemon=True)
        self._thread.start()

    def runner(self, run: Runner, express: bool) -> Runner:
        """`run` (a batcher's), called on the decoding thread; `express`: between a bulk batch's
        steps."""

        def decoded(key: Hashable, jobs: list[Job]) -> list[Any]:
            done: Future = Future()
            with self._cond:
                if self._closed:
                    raise RuntimeError("the server is shutting down")
                (self._express if express else self._bulk).append((lambda: run(key, jobs), done))
                self._cond.notify()
            return done.result()

        return decoded

    def quiet(self) -> Callable[[], bool]:
        """For a bulk batcher: whether no express batch ran since it last asked."""
        seen = [-1]

        def asked() -> bool:
            was, seen[0] = seen[0], self._express_runs
            return was == seen[0]

        return asked

    def busy(self, express: bool) -> Callable[[], bool]:
        """For a lane's batcher: whether a running batch of that lane should take no more jobs. A
        bulk batch stops taking them while another bulk batch waits (another model's: they take
        turns); an express batch while a bulk batch waits or is between two of its steps."""
        if express:
            return lambda: bool(self._bulk) or self._bulk_running
        return lambda: bool(self._bulk)

    def step(self) -> None:
        """Before a search's step: on the decoding thread, in a bulk batch, run the express batches
        that wait. Elsewhere nothing (a search outside the server, or an express one)."""
        if not self._express or self._in_express or threading.current_thread() is not self._thread:
            # (a deque's length is read safely without the lock; one appended now waits a step)
            return
        self._run_express()

    def _run_express(self) -> None:
        self._in_express = True
        try:
            while True:
                with self._cond:
                    if not self._express:
                        return
                    work = self._express.popleft()
                    self._express_runs += 1
                _run(work)
        finally:
            self._in_express = False

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._express or self._bulk or self._closed):
                    self._cond.wait()
                if self._express:
                    work = None
                elif self._bulk:
                    work = self._bulk.popleft()
                else:
                    return  # closed, and nothing left
            if work is None:
                self._run_express()
            else:
                self._bulk_running = True
                try:
                    _run(work)
                finally:
                    self._bulk_running = False

    def close(self, timeout: float | None = None) -> None:
        """Run what waits, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)


def _run(work: Work) -> None:
    call, done = work
    if not done.set_running_or_notify_cancel():
        return
    try:
        done.set_result(call())
    except BaseException as e:  # noqa: BLE001 - the batch's batcher raises it for its jobs
        done.set_exception(e)
