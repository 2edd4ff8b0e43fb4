"""The server's one decoding thread: every batch runs on it, and an express batch runs between two
steps of a bulk one (a search steps aside through Translator.yielding)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mt_cli import Translator
from mt_cli.config import ServeConfig
from mt_cli.serve.batcher import Job
from mt_cli.serve.decoding_thread import Decoding

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode"
DE = ["Ein hund läuft.", "Der mann sieht ein rot haus.", "Rot hund."]


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE / "model.pt", device="cpu")


def test_a_yielding_translator_calls_its_function_before_each_model_call_and_translates_the_same(
    translator,
):
    calls: list[int] = []
    greedy = translator.with_options(method="greedy")
    stepping = greedy.yielding(lambda: calls.append(1))
    found = stepping.search(DE)
    assert [hyps[0].text for hyps in found] == greedy.translate(DE)
    longest = max(len(hyps[0].tokens) for hyps in found)
    # One encoder call for the batch, then one decoder step per output token (and EOS).
    assert 1 + longest <= len(calls) <= 2 + longest
    assert stepping.with_options(beam=3).translate(DE) == translator.with_options(beam=3).translate(
        DE
    )


def test_an_express_batch_runs_between_the_steps_of_a_bulk_batch_on_the_same_thread():
    decoding = Decoding()
    events: list[str] = []
    threads: set[str] = set()
    started, express_done = threading.Event(), threading.Event()

    def bulk(key: object, jobs: list[Job]) -> list[str]:
        threads.add(threading.current_thread().name)
        started.set()
        for step in range(500):  # a search's steps, each letting the express lane in first
            decoding.step()
            events.append(f"bulk {step}")
            if express_done.is_set() and events[-2] == "express":
                break
            time.sleep(0.005)
        return ["bulk"]

    def express(key: object, jobs: list[Job]) -> list[str]:
        threads.add(threading.current_thread().name)
        decoding.step()  # an express search's own steps make no room for anything
        events.append("express")
        return ["express"]

    results: list[list[str]] = []
    batching = threading.Thread(
        target=lambda: results.append(decoding.runner(bulk, express=False)("k", []))
    )
    batching.start()
    assert started.wait(10)
    assert decoding.runner(express, express=True)("k", []) == ["express"]
    express_done.set()
    batching.join(10)
    decoding.close(10)
    assert results == [["bulk"]]
    at = events.index("express")
    assert 0 < at < len(events) - 1 and events[at + 1] == f"bulk {at}"  # between two steps
    assert threads == {"mt-decoding"}


def test_every_model_of_a_server_decodes_on_its_one_decoding_thread(
    tmp_path, monkeypatch, translator
):
    pytest.importorskip("fastapi")
    import shutil

    from mt_cli.decode import search
    from mt_cli.decode.running_batch import RunningBatch
    from mt_cli.serve.server import _entries
    from mt_cli.serve.web_app import create_server
    from serving import Running, call

    shutil.copy(FIXTURE / "model.pt", tmp_path / "de-en.pt")
    shutil.copy(FIXTURE / "model.pt", tmp_path / "en-fr.pt")
    threads: set[tuple[str, int]] = set()
    beam_search = search.beam_search

    def recorded(*args, **kwargs):
        threads.add((threading.current_thread().name, threading.get_ident()))
        return beam_search(*args, **kwargs)

    monkeypatch.setattr(search, "beam_search", recorded)
    running_step = RunningBatch.step

    def recorded_step(self):
        threads.add((threading.current_thread().name, threading.get_ident()))
        return running_step(self)

    # plain lines and texts decode in running batches; the rest through beam_search
    monkeypatch.setattr(RunningBatch, "step", recorded_step)
    cfg = ServeConfig(models=str(tmp_path), max_wait_ms=5)
    running = Running(
        create_server(
            lambda: _entries([], cfg, lambda p: Translator.load(list(p), device="cpu")), cfg
        )
    )
    try:
        # de -> fr: both, through en
        for source, target in (
            ("de", "en"),
            ("en", "fr"),
            ("de", "fr"),
        ):
            status, _, body = call(
                running.url, "POST", "/translate", {"q": DE[0], "source": source, "target": target}
            )
            assert status == 200, body
        big = call(
            running.url,
            "POST",
            "/translate",
            {"text": DE * 40, "beam": 4, "source_lang": "de", "target_lang": "en"},
        )
        assert big[0] == 200
    finally:
        running.stop()
    assert len(threads) == 1 and next(iter(threads))[0] == "mt-decoding"
