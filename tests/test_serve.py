"""`mt serve`: a real uvicorn server on a loopback port, checked against the Translator it serves:
the same answers under concurrent clients, requests merged into batches, every bad input refused
with its status and a message naming the field or the limit, faults that fail only their batch."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mt_cli import Translator
from mt_cli.config import OutputConfig, ServeConfig
from mt_cli.decode.glossary import Glossary
from mt_cli.tools.translate_files import translate_stream

pytest.importorskip("fastapi")
from mt_cli.serve.web_app import create_app  # noqa: E402
from serving import Running, assert_close, call  # noqa: E402


@pytest.fixture(scope="module")
def translator(trained) -> Translator:
    _, d = trained
    return Translator.load(d / "run" / "best.pt", device="cpu")


@pytest.fixture(scope="module")
def server(translator):
    running = Running(
        create_app(lambda: translator, "best.pt", ServeConfig(max_wait_ms=20, max_request_lines=50))
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def lines(corpus) -> list[str]:
    return corpus[0][:48]


def test_answers_equal_the_translators_under_16_concurrent_clients_greedy_and_beam(
    server, translator, lines
):
    jobs = [(lines[i * 3 : i * 3 + 3], beam) for i in range(16) for beam in (1, 4)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(
            pool.map(
                lambda job: call(
                    server.url, "POST", "/translate", {"text": job[0], "beam": job[1]}
                ),
                jobs,
            )
        )
    expected = {beam: translator.with_options(beam=beam).translate(lines) for beam in (1, 4)}
    for (chunk, beam), (status, _, body) in zip(jobs, answers):
        assert status == 200, body
        start = lines.index(chunk[0])
        assert body["translations"] == expected[beam][start : start + len(chunk)]


def test_concurrent_requests_are_merged_into_batches(translator, lines):
    running = Running(
        create_app(lambda: translator, "m", ServeConfig(max_wait_ms=300, batch_gap_ms=200))
    )
    try:
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda line: call(running.url, "POST", "/translate", {"text": line}), lines[:8]
                )
            )
        metrics = call(running.url, "GET", "/metrics")[2]
    finally:
        running.stop()
    batches = next(
        float(x.split()[-1])
        for x in metrics.splitlines()
        if x.startswith("mt_batch_requests_count")
    )
    assert 1 <= batches < 8  # 8 single-line requests went through fewer searches than 8
    assert 'mt_requests_total{endpoint="/translate",status="200"} 8.0' in metrics


def test_a_single_string_is_one_line_and_full_format_is_mt_translates_jsonl(
    server, translator, lines
):
    status, _, body = call(server.url, "POST", "/translate", {"text": lines[0]})
    assert status == 200 and body == {"translations": translator.translate(lines[:1])}
    out = OutputConfig("jsonl", nbest=2, token_scores=True)
    req = {"text": lines[:3] + [""], "beam": 4, "nbest": 2, "format": "full", "token_scores": True}
    status, _, body = call(server.url, "POST", "/translate", req)
    buf = io.StringIO()
    translate_stream(translator.with_options(beam=4), lines[:3] + [""], buf, out)
    assert status == 200
    assert_close(body["translations"], [json.loads(x) for x in buf.getvalue().splitlines()])


def test_odd_text_gets_one_translation_per_line_as_the_translator_gives(server, translator):
    odd = [
        "",
        "   ",
        "a\x00b",
        "\x07\x1b[31m",
        "🙂🙃 👍🏽",
        "مرحبا بالعالم",
        "שלום עולם",
        "x" * 2000,
    ]
    status, _, body = call(server.url, "POST", "/translate", {"text": odd})
    assert status == 200 and body["translations"] == translator.translate(odd)


def test_prefix_glossary_and_score_go_through_as_on_the_command_line(server, translator, lines):
    tr = translator.with_options(beam=4)
    status, _, body = call(
        server.url, "POST", "/translate", {"text": lines[:2], "beam": 4, "prefix": [None, "x"]}
    )
    assert status == 200 and body["translations"] == [
        hyps[0].text for hyps in tr.search(lines[:2], prefixes=[None, "x"])
    ]
    with_terms = lines[:6]
    glossary = {"hund": "tree", "Ein": "big"}
    status, _, body = call(
        server.url, "POST", "/translate", {"text": with_terms, "beam": 4, "glossary": glossary}
    )
    terms = [Glossary(list(glossary.items())).terms_for(line) for line in with_terms]
    assert any(terms) and status == 200
    assert body["translations"] == [h[0].text for h in tr.search(with_terms, constraints=terms)]
    targets = translator.translate(lines[:3])
    status, _, body = call(server.url, "POST", "/score", {"source": lines[:3], "target": targets})
    scorer = translator.for_scoring()  # scores are measured in fp32 (decode.score_precision)
    assert scorer.cfg.precision == "fp32"
    assert status == 200 and body["scores"] == [h.score for h in scorer.score(lines[:3], targets)]


@pytest.mark.parametrize(
    ("raw", "status", "names"),
    [
        (b'{"text": ["a", ', 400, "not valid JSON"),
        (b'{"text": ["a"], "beam": "5"}', 422, "beam"),
        (b'{"text": ["a"], "colour": "red"}', 422, "colour"),
        (b'{"beam": 2}', 422, "text"),
        (b'{"text": [1, 2]}', 422, "text"),
        (b'{"text": ["a"], "nbest": 3, "beam": 2, "format": "full"}', 422, "beam"),
        (b'{"text": ["a"], "nbest": 2}', 422, "format"),
        (b'{"text": ["a"], "beam": 1, "glossary": {"a": "b"}}', 422, "beam search"),
        (b'{"text": ["a", "b"], "prefix": ["x"]}', 422, "prefix"),
        (json.dumps({"text": ["a"] * 51}).encode(), 413, "serve.max_request_lines"),
        (b'{"text": ["a"], "beam": 65}', 422, "serve.max_beam"),
        (b'{"text": ["a"], "nbest": 65, "format": "full"}', 422, "serve.max_beam"),
    ],
)
def test_bad_requests_get_their_status_and_a_message_naming_the_field(server, raw, status, names):
    got, _, body = call(server.url, "POST", "/translate", raw=raw)
    assert got == status and names in body["error"], body


def test_a_body_over_the_limit_is_413(translator):
    running = Running(create_app(lambda: translator, "m", ServeConfig(max_body_bytes=1000)))
    try:
        status, _, body = call(running.url, "POST", "/translate", {"text": ["a" * 2000]})
        assert status == 413 and "serve.max_body_bytes" in body["error"]
        assert call(running.url, "POST", "/translate", {"text": ["a b"]})[0] == 200
    finally:
        running.stop()


def test_a_client_that_disconnects_stalls_nothing(server, translator, lines):
    body = json.dumps({"text": lines[:40], "beam": 4}).encode()
    for _ in range(3):  # send a whole request, then hang up before the answer
        with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as s:
            s.sendall(
                b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
    with ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(lambda line: call(server.url, "POST", "/translate", {"text": line}), lines[:4])
        )
    assert [a[2]["translations"][0] for a in answers] == translator.translate(lines[:4])


class Failing(Translator):
    """Raises inside decoding for any batch holding a line with BOOM; sleeps on lines with SLOW.
    Its batches are decoded whole, through search_requests (tests/test_serve_running.py fails a
    running batch)."""

    def running_batch(self):
        return None

    def search_requests(self, requests, *args, **kwargs):
        def holds(word):  # a request whose source ids hold the word's pieces
            ids = self.source_ids([word])[0][:-1]
            return any(
                any(r.src[i : i + len(ids)] == tuple(ids) for i in range(len(r.src)))
                for r in requests
                if r
            )

        if holds("BOOM"):
            raise RuntimeError("boom")
        if holds("SLOW"):
            time.sleep(0.5)
        return super().search_requests(requests, *args, **kwargs)


def test_an_exception_in_decoding_fails_only_its_batch_and_the_server_goes_on(translator, lines):
    failing = Failing(translator.model, translator.tokenizer, translator.cfg)
    running = Running(create_app(lambda: failing, "m", ServeConfig(max_wait_ms=0)))
    try:
        status, _, body = call(running.url, "POST", "/translate", {"text": ["BOOM"]})
        assert status == 500 and "boom" in body["error"]
        assert call(running.url, "POST", "/translate", {"text": lines[:2]})[2][
            "translations"
        ] == translator.translate(lines[:2])
        assert 'mt_errors_total{kind="decoding"} 1.0' in call(running.url, "GET", "/metrics")[2]
    finally:
        running.stop()


def test_overload_is_refused_at_once_with_503_and_retry_after(translator):
    failing = Failing(translator.model, translator.tokenizer, translator.cfg)
    cfg = ServeConfig(max_request_lines=4, max_queue_lines=8, max_wait_ms=0)
    running = Running(create_app(lambda: failing, "m", cfg))
    try:
        with ThreadPoolExecutor(12) as pool:
            answers = list(
                pool.map(
                    lambda i: call(running.url, "POST", "/translate", {"text": ["SLOW a"] * 4}),
                    range(12),
                )
            )
    finally:
        running.stop()
    refused = [a for a in answers if a[0] == 503]
    assert refused and all(
        int(a[1]["retry-after"]) >= 1 and "capacity" in a[2]["error"] for a in refused
    )
    assert all(a[0] in (200, 503) for a in answers) and any(a[0] == 200 for a in answers)


def test_health_is_503_until_the_model_has_loaded(translator):
    loaded = threading.Event()

    def load() -> Translator:
        loaded.wait(30)
        return translator

    running = Running(create_app(load, "slow.pt"), wait_ready=False)
    try:
        status, _, body = call(running.url, "GET", "/health")
        assert status == 503 and body["status"] == "loading"
        status, headers, _ = call(running.url, "POST", "/translate", {"text": ["a"]})
        assert status == 503 and headers["retry-after"] == "1"
        loaded.set()
        deadline = time.monotonic() + 30
        while (got := call(running.url, "GET", "/health"))[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert got[2]["status"] == "ok" and got[2]["model"] == "slow.pt" and got[2]["uptime_s"] >= 0
    finally:
        loaded.set()
        running.stop()


def test_attention_gives_each_layers_cross_attention_rows_summing_to_one(server, translator, lines):
    status, _, body = call(server.url, "POST", "/attention", {"text": lines[0]})
    assert status == 200 and body["translation"] == translator.translate(lines[:1])[0]
    assert len(body["layers"]) == translator.model.cfg.dec_layers
    for layer in body["layers"]:
        assert len(layer) == len(body["target"]) and all(
            len(row) == len(body["source"]) for row in layer
        )
        assert all(abs(sum(row) - 1) < 1e-3 for row in layer)


def test_a_batch_the_batcher_hands_over_is_decoded_as_one_search(translator, lines, monkeypatch):
    from mt_cli.decode.search import Search
    from mt_cli.serve.batcher import Job
    from mt_cli.serve.service import Service

    service = Service(translator, batch_tokens=2048)
    # 96 lines: more than decode.batch_size (64) sentences, fewer tokens than the budget
    many = lines * 2
    works = [
        service.translation(many[i : i + 32], None, OutputConfig(), None, None) for i in (0, 32, 64)
    ]
    assert all(len(w.parts) == 1 for w in works)  # no slicing here (Service's slice_cost is 0)
    assert sum(w.parts[0][1] for w in works) <= 2048 and translator.cfg.batch_size < 96
    calls = []
    original = Search.batch
    monkeypatch.setattr(
        Search, "batch", lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    )
    results = service.run(works[0].key, [Job(w.key, *w.parts[0]) for w in works])
    assert len(calls) == 1
    assert [t for r in results for t in r] == translator.translate(many)
