"""The server's running batches (serve/running.py): a request that comes while a batch is being
decoded joins it between two steps and is answered as soon as its own lines end, each line as
the Translator gives it alone; while another batch waits for the decoding thread, none joins."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mt_cli import Translator
from mt_cli.config import OutputConfig
from mt_cli.decode.running_batch import RunningBatch
from mt_cli.serve.batcher import Batcher
from mt_cli.serve.service import Service
from mt_cli.serve.telemetry import Telemetry

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
LINES = [
    line for line in (FIXTURE.parent / "src.txt").read_text(encoding="utf-8").splitlines() if line
]
LONG = sorted(LINES, key=len)[-12:]
SHORT = min(LINES, key=len)


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu", beam=3)


class Harness:
    """A Service on a Batcher (no HTTP), whose search calls `during` at a chosen step."""

    def __init__(self, tr: Translator, busy: bool = False, join_every: int = 1) -> None:
        self.steps = 0
        self.at: dict[int, list] = {}  # step -> what to do before it
        self.telemetry = Telemetry()
        self.runs = 0

        def before() -> None:
            self.steps += 1
            for act in self.at.pop(self.steps, []):
                act()

        self.service = Service(
            tr.yielding(before), self.telemetry, 2048, running=True, join_every=join_every
        )

        def run(key, jobs):
            self.runs += 1
            return self.service.run(key, jobs)

        self.batcher = Batcher(run, 2048, 0, 0, 1000, busy=lambda: busy)
        self.done: list[str] = []
        self.lock = threading.Lock()

    def submit(self, name: str, lines: list[str]):
        work = self.service.translation(lines, None, OutputConfig("text"), None, None)
        future = self.batcher.submit_group(work.key, list(work.parts))
        future.add_done_callback(lambda _: self._finished(name))
        return future

    def _finished(self, name: str) -> None:
        with self.lock:
            self.done.append(name)


def test_a_request_that_comes_mid_batch_joins_it_and_is_answered_before_the_batch_ends(
    translator,
):
    h = Harness(translator)
    late = []
    h.at[4] = [lambda: late.append(h.submit("short", [SHORT]))]  # before the batch's 4th step
    long = h.submit("long", LONG).result(timeout=120)
    short = late[0].result(timeout=120)
    h.batcher.close()
    assert h.runs == 1  # one batch: the late request joined it
    assert h.done == ["short", "long"]  # answered as soon as its line ended, not with the batch
    assert long == [translator.translate([line])[0] for line in LONG]
    assert short == translator.translate([SHORT])
    metrics = h.telemetry.text().decode()
    steps = next(
        float(x.split()[-1]) for x in metrics.splitlines() if x.startswith("mt_decoder_steps_total")
    )
    assert steps == h.steps - 2  # every step reported (the two encoder calls are not steps)
    assert "mt_rows_in_flight 0.0" in metrics  # the batch ended empty


def test_while_another_batch_waits_a_running_batch_takes_no_more_requests(translator):
    h = Harness(translator, busy=True)
    late = []
    h.at[4] = [lambda: late.append(h.submit("short", [SHORT]))]
    long = h.submit("long", LONG).result(timeout=120)
    short = late[0].result(timeout=120)
    h.batcher.close()
    assert h.runs == 2 and h.done == ["long", "short"]  # the late request waited for its own
    assert long == [translator.translate([line])[0] for line in LONG]
    assert short == translator.translate([SHORT])


def test_requests_with_prefixes_or_terms_are_decoded_as_whole_batches(translator):
    """Prefixes and terms name target ids: search.py decodes them, not a running batch."""
    service = Service(translator, Telemetry(), batch_tokens=2048, running=True)
    batcher = Batcher(service.run, 2048, 0, 0, 1000)
    prefix = LINES[0].split()[0]
    work = service.translation(LINES[:3], None, OutputConfig("text"), None, [prefix, None, None])
    got = batcher.submit_group(work.key, list(work.parts)).result(timeout=120)
    batcher.close()
    assert got == [h[0].text for h in translator.search(LINES[:3], prefixes=[prefix, None, None])]
    assert "mt_decoder_steps_total 0.0" in service.telemetry.text().decode()  # type: ignore[union-attr]


def test_an_error_in_a_running_batch_fails_the_requests_it_had_not_answered_and_no_other(
    translator,
):
    h = Harness(translator)
    late = []
    h.at[4] = [lambda: late.append(h.submit("short", [SHORT]))]

    def boom() -> None:  # at the first step after the short request's answer
        if late and late[0].done() and not h.done.count("boom"):
            h.done.append("boom")
            raise RuntimeError("boom")

    for step in range(5, 200):
        h.at[step] = [boom]
    long = h.submit("long", LONG)
    with pytest.raises(RuntimeError, match="boom"):
        long.result(timeout=120)
    assert late[0].result(timeout=120) == translator.translate([SHORT])
    after = h.submit("after", LINES[:2]).result(timeout=120)  # the batcher goes on
    h.batcher.close()
    assert h.done[:3] == ["short", "boom", "long"]  # the long one failed after the short's answer
    assert after == translator.translate(LINES[:2])


def test_a_waiting_request_of_another_beam_ends_the_running_batch_and_gets_its_turn(translator):
    """A request that cannot join (another beam) stops the batch taking more: the long request's
    next slices wait behind it, rather than the batch running on with them."""
    h = Harness(translator)
    h.service.slice_cost = 30  # the long request in slices of a few lines
    late = []

    def other() -> None:
        work = h.service.translation([SHORT], 2, OutputConfig("text"), None, None)
        late.append(h.batcher.submit_group(work.key, list(work.parts)))
        late[0].add_done_callback(lambda _: h._finished("other beam"))

    h.at[3] = [other]
    long = h.submit("long", LONG).result(timeout=120)
    assert late[0].result(timeout=120) == translator.with_options(beam=2).translate([SHORT])
    h.batcher.close()
    assert long == [translator.translate([line])[0] for line in LONG]
    assert h.runs >= 3  # the long request's first batch, the other beam's, then the rest of it
    assert h.done == ["other beam", "long"]


def test_requests_queued_within_join_every_steps_join_together_in_one_encoder_call(
    translator, monkeypatch
):
    joins = []  # (the batch's steps so far, sentences joining) at each add
    real_add = RunningBatch.add

    def add(self, requests, tags):
        joins.append((self.steps, len(requests)))
        return real_add(self, requests, tags)

    monkeypatch.setattr(RunningBatch, "add", add)
    h = Harness(translator, join_every=4)
    late = []
    other = next(line for line in LINES if line not in (SHORT, *LONG))
    # `before` runs once for the first encoder call, then once per step: queued before the
    # batch's steps 2 and 3
    h.at[3] = [lambda: late.append(h.submit("a", [SHORT]))]
    h.at[4] = [lambda: late.append(h.submit("b", [other]))]
    long = h.submit("long", LONG).result(timeout=120)
    a, b = (future.result(timeout=120) for future in late)
    h.batcher.close()
    assert h.runs == 1
    assert joins == [(0, len(LONG)), (4, 2)]  # both after step 4, in one call
    assert long == [translator.translate([line])[0] for line in LONG]
    assert a == translator.translate([SHORT]) and b == translator.translate([other])
