"""Fairness and limits of `mt serve`: a large request is decoded in slices, in turn with the
others, so a one-line request waits for one slice of it, not for all of it; a large request's
answer is the same as decoded whole."""

from __future__ import annotations

import threading

import pytest

from mt_cli import Translator
from mt_cli.serve.batcher import Batcher, Job

pytest.importorskip("fastapi")
from pathlib import Path  # noqa: E402

from mt_cli.config import ServeConfig  # noqa: E402
from mt_cli.serve.web_app import create_app  # noqa: E402
from serving import Running, call  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode"


class Recording:
    """A runner that records each batch's jobs; the first batch waits until it is let go, so the
    test can queue a small request while a slice of the large one is being decoded."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.started, self.go = threading.Event(), threading.Event()

    def run(self, key: object, jobs: list[Job]) -> list[list[str]]:
        self.batches.append([job.payload for job in jobs])
        self.started.set()
        self.go.wait(10)
        return [[job.payload] for job in jobs]


def test_a_small_request_waits_for_one_slice_of_a_large_one_not_all_of_it():
    runner = Recording()
    batcher = Batcher(runner.run, max_batch_tokens=100, max_wait_s=0, gap_s=0, max_queue_lines=1000)
    # 5 slices, two never fit together
    big = batcher.submit_group("k", [(10, 60, f"big{i}") for i in range(5)])
    assert runner.started.wait(10)  # the first slice is being decoded
    small = batcher.submit("k", 1, 5, "small")
    runner.go.set()
    assert small.result(10) == ["small"]
    assert big.result(10) == [f"big{i}" for i in range(5)]  # slices joined in order
    batcher.close(10)
    assert runner.batches[0] == ["big0"]
    assert runner.batches[1] == ["big1", "small"]  # served with the next slice, not after all five
    assert [b for batch in runner.batches for b in batch if b.startswith("big")] == [
        f"big{i}" for i in range(5)
    ]


def test_two_large_requests_take_turns_slice_by_slice():
    runner = Recording()
    runner.go.set()
    batcher = Batcher(runner.run, max_batch_tokens=100, max_wait_s=0, gap_s=0, max_queue_lines=1000)
    with batcher._cond:  # both queued before the thread takes anything
        a = batcher.submit_group("k", [(1, 60, f"a{i}") for i in range(3)])
        b = batcher.submit_group("k", [(1, 60, f"b{i}") for i in range(3)])
    a.result(10), b.result(10)
    batcher.close(10)
    assert [batch[0][0] for batch in runner.batches] == ["a", "b", "a", "b", "a", "b"]


def test_a_large_request_alone_for_two_batches_takes_as_many_slices_as_the_batch_budget_holds():
    runner = Recording()
    runner.go.set()
    batcher = Batcher(runner.run, max_batch_tokens=100, max_wait_s=0, gap_s=0, max_queue_lines=1000)
    assert batcher.submit_group("k", [(1, 30, f"s{i}") for i in range(7)]).result(10) == [
        f"s{i}" for i in range(7)
    ]
    batcher.close(10)
    # One slice first: clients just answered may be about to come back; then full batches.
    assert runner.batches == [["s0"], ["s1", "s2", "s3"], ["s4", "s5", "s6"]]


def test_a_large_request_takes_one_slice_a_batch_while_the_express_lane_is_busy():
    runner = Recording()
    runner.go.set()
    busy = Batcher(runner.run, 100, 0, 0, 1000, quiet=lambda: False)
    assert busy.submit_group("k", [(1, 30, f"s{i}") for i in range(4)]).result(10) == [
        f"s{i}" for i in range(4)
    ]
    busy.close(10)
    assert runner.batches == [["s0"], ["s1"], ["s2"], ["s3"]]


def test_a_cancelled_request_drops_its_slices_not_yet_decoded():
    runner = Recording()
    batcher = Batcher(runner.run, max_batch_tokens=100, max_wait_s=0, gap_s=0, max_queue_lines=1000)
    big = batcher.submit_group("k", [(1, 60, f"big{i}") for i in range(4)])
    assert runner.started.wait(10)
    big.cancel()
    runner.go.set()
    batcher.close(10)
    assert runner.batches == [["big0"]]


def test_an_exception_returned_for_one_job_fails_that_job_only():
    def run(key: object, jobs: list[Job]) -> list[object]:
        return [ValueError(job.payload) if job.payload == "bad" else job.payload for job in jobs]

    batcher = Batcher(run, max_batch_tokens=100, max_wait_s=0.2, gap_s=0.2, max_queue_lines=100)
    good, bad = batcher.submit("k", 1, 1, "good"), batcher.submit("k", 1, 1, "bad")
    assert good.result(10) == "good"
    with pytest.raises(ValueError, match="bad"):
        bad.result(10)
    batcher.close(10)


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE / "model.pt", device="cpu")


def test_a_request_sliced_small_translates_as_decoded_whole(translator):
    lines = (FIXTURE / "src.txt").read_text(encoding="utf-8").splitlines()
    running = Running(
        create_app(lambda: translator, "model.pt", ServeConfig(slice_cost=40, max_wait_ms=5))
    )
    try:
        status, _, body = call(running.url, "POST", "/translate", {"text": lines, "beam": 2})
    finally:
        running.stop()
    assert status == 200
    assert body["translations"] == translator.with_options(beam=2).translate(lines)


def test_a_client_past_its_requests_per_minute_gets_429_with_retry_after_and_others_go_on(tmp_path):
    from mt_cli.serve.api_request import Caller
    from mt_cli.serve.guard import ApiError
    from mt_cli.serve.limits import Limits, read_keys

    keys = tmp_path / "keys"
    keys.write_text("# keys\nalpha 3\nbeta\n\n", encoding="utf-8")
    limits = Limits(ServeConfig(req_limit=2), read_keys(str(keys)))
    with pytest.raises(ApiError) as refused:  # under keys, none is 403
        limits.admit(Caller("10.0.0.1"))
    assert refused.value.status == 403 and refused.value.field == "api_key"
    limits = Limits(ServeConfig(req_limit=2), None)
    for _ in range(2):
        limits.admit(Caller("10.0.0.1"))
    with pytest.raises(ApiError) as refused:
        limits.admit(Caller("10.0.0.1"))
    assert refused.value.status == 429 and "2 per minute" in refused.value.message
    assert 1 <= int(refused.value.headers["Retry-After"]) <= 60
    limits.admit(Caller("10.0.0.2"))  # another address has its own count
    limits = Limits(ServeConfig(req_limit=2), read_keys(str(keys)))
    for _ in range(3):  # a key with its own limit, whatever address it comes from
        limits.admit(Caller("10.0.0.1", "alpha"))
    with pytest.raises(ApiError):
        limits.admit(Caller("10.0.0.9", "alpha"))
    # a key without its own limit has the server's, counted per key
    limits.admit(Caller("10.0.0.1", "beta"))
    limits.admit(Caller("10.0.0.1", "beta"))
    with pytest.raises(ApiError):
        limits.admit(Caller("10.0.0.1", "beta"))


def test_characters_and_characters_times_beam_over_their_limits_are_413_naming_the_option(tmp_path):
    from mt_cli.errors import MtError
    from mt_cli.serve.guard import ApiError
    from mt_cli.serve.limits import Limits, read_keys

    limits = Limits(ServeConfig(char_limit=100, max_request_cost=400), None)
    limits.check_size(100, 4)
    for chars, beam, option in ((101, 1, "serve.char_limit"), (90, 5, "serve.max_request_cost")):
        with pytest.raises(ApiError) as refused:
            limits.check_size(chars, beam)
        assert refused.value.status == 413 and option in refused.value.message
    bad = tmp_path / "keys"
    bad.write_text("alpha many\n", encoding="utf-8")
    with pytest.raises(MtError, match="line 1: write a key, or a key and its requests per minute"):
        read_keys(str(bad))


def test_a_server_with_limits_answers_429_and_413_in_each_apis_shape_and_counts_them(translator):
    cfg = ServeConfig(req_limit=2, char_limit=40, max_wait_ms=5, source_lang="de", target_lang="en")
    running = Running(create_app(lambda: translator, "model.pt", cfg))
    try:
        assert call(running.url, "POST", "/translate", {"text": "Rot hund."})[0] == 200
        assert (
            call(
                running.url,
                "POST",
                "/translate",
                {"q": "Rot hund.", "source": "de", "target": "en"},
            )[0]
            == 200
        )
        status, headers, body = call(running.url, "POST", "/translate", {"text": "Rot hund."})
        assert (
            status == 429
            and int(headers["retry-after"]) >= 1
            and "serve.req_limit" in body["error"]
        )
        assert set(body) == {"error", "field"}
        status, _, body = call(
            running.url, "POST", "/translate", {"q": "Rot hund.", "source": "de", "target": "en"}
        )
        assert status == 429 and set(body) == {"error"}
        metrics = call(running.url, "GET", "/metrics")[2]
        assert 'mt_limited_total{limit="requests"} 2.0' in metrics
    finally:
        running.stop()
    running = Running(
        create_app(lambda: translator, "model.pt", ServeConfig(char_limit=40, max_wait_ms=5))
    )
    try:
        status, _, body = call(
            running.url, "POST", "/translate", {"text": ["Rot hund läuft schnell."] * 3}
        )
        assert status == 413 and "serve.char_limit" in body["error"]
    finally:
        running.stop()


def test_a_server_with_an_express_lane_translates_as_without(translator):
    lines = (FIXTURE / "src.txt").read_text(encoding="utf-8").splitlines()
    running = Running(
        create_app(lambda: translator, "model.pt", ServeConfig(express_cost=200, max_wait_ms=5))
    )
    try:
        results: dict[str, dict] = {}
        big = threading.Thread(
            target=lambda: results.update(
                big=call(running.url, "POST", "/translate", {"text": lines * 4, "beam": 4})[2]
            )
        )
        big.start()
        status, _, body = call(running.url, "POST", "/translate", {"text": lines[:1]})
        big.join(120)
    finally:
        running.stop()
    assert status == 200 and body["translations"] == translator.translate(lines[:1])
    assert results["big"]["translations"] == translator.with_options(beam=4).translate(lines * 4)
