"""Jobs decoded in one running batch (decode/running_batch.py): the jobs queued meanwhile with the
batch's key join it between two steps, within the batch's source tokens, and each job is answered
as soon as its last line has ended, while the others go on.

What a job asks for and how its answer is made are the caller's (`prepare`): a translation job's
lines (service.py), or the sentences a document asks for, put together again once they are
translated (documents.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from mt_cli.decode.hypothesis import Hypothesis, Request
from mt_cli.decode.running_batch import RunningBatch
from mt_cli.serve.batcher import Feed, Job
from mt_cli.serve.telemetry import Telemetry

# A job's requests (None: a blank line, answered without search), and its answer from their
# hypotheses (an Exception fails that job alone).
Prepared = tuple[list[Request | None], Callable[[list[list[Hypothesis]]], Any]]


class Running:
    def __init__(
        self,
        batch: RunningBatch,
        feed: Feed,
        budget: int,
        prepare: Callable[[Job], Prepared],
        telemetry: Telemetry | None = None,
        join_every: int = 1,
    ) -> None:
        """`budget`: the source tokens the running sentences may hold (0: no limit); a job that
        joins may take the batch over it. `join_every`: steps between two joins."""
        self.batch, self.feed, self.prepare, self.telemetry = batch, feed, prepare, telemetry
        self.budget = budget or 1 << 62
        self.join_every = join_every
        # by job: the job, how its answer is made, its lines' hypotheses so far, lines left
        self.jobs: dict[int, tuple[Job, Callable[[list[list[Hypothesis]]], Any]]] = {}
        self.found: dict[int, list[list[Hypothesis]]] = {}
        self.left: dict[int, int] = {}

    def run(self, jobs: list[Job]) -> list[Any]:
        """Decode `jobs` and those that join until none is left, each answered through the feed
        (so none is returned)."""
        self._admit(jobs)
        # Steps since sentences last joined. Each join costs an encoder call and a copy of the
        # batch's state, so those queued within a few steps join together; a job that comes
        # after a quiet spell of that many steps joins at the next one.
        since = 0
        while len(self.batch):
            if self.telemetry is not None:
                self.telemetry.step(self.batch.rows)
            for tag, hyps in self.batch.step():
                ident, line = cast("tuple[int, int]", tag)
                self.found[ident][line] = hyps
                self.left[ident] -= 1
                if not self.left[ident]:
                    self._answer(ident)
            since += 1
            room = self.budget - self.batch.source_tokens
            if room > 0 and since >= self.join_every:
                joining = self.feed.more(room)
                if joining:
                    self._admit(joining)
                    since = 0
        if self.telemetry is not None:
            self.telemetry.step(0)
        return []

    def _admit(self, jobs: list[Job]) -> None:
        """The jobs' lines join the batch, encoded in one call."""
        joining: list[Request] = []
        tags: list[tuple[int, int]] = []
        for job in jobs:
            try:
                requests, finish = self.prepare(job)
            except Exception as e:  # noqa: BLE001 - this job's own input, not the batch
                self.feed.answer(job, e)
                continue
            todo = [i for i, r in enumerate(requests) if r is not None]
            ident = id(job)
            self.jobs[ident], self.left[ident] = (job, finish), len(todo)
            self.found[ident] = [[Hypothesis([], 0.0)] for _ in requests]  # a blank line's
            joining += [r for r in requests if r is not None]
            tags += [(ident, i) for i in todo]
            if not todo:
                self._answer(ident)
        self.batch.add(joining, tags)

    def _answer(self, ident: int) -> None:
        (job, finish), found = self.jobs.pop(ident), self.found.pop(ident)
        del self.left[ident]
        try:
            result = finish(found)
        except Exception as e:  # noqa: BLE001 - this job's own failure (a document)
            result = e
        self.feed.answer(job, result)
