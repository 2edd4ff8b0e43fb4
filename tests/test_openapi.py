"""The OpenAPI document tells the truth: Schemathesis, driven by /openapi.json alone, sends each
route of a real server on loopback requests the document calls valid and requests it calls
invalid, and every answer must be one the document allows (status, content type, body, headers),
valid requests accepted and invalid ones refused. And every error has one shape: {"error",
"field"} on the JSON API, {"error"} on LibreTranslate's, parse errors, 404 and 405 included."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mt_cli import Translator
from mt_cli.config import ServeConfig

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import positive_data_acceptance  # noqa: E402

from mt_cli.serve.web_app import create_app  # noqa: E402
from serving import Running  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
# Small limits, so that the fuzzer's largest valid requests (the document states them) stay cheap.
CFG = ServeConfig(
    source_lang="de",
    target_lang="en",
    max_wait_ms=0,
    max_beam=4,
    max_request_lines=8,
    max_chars=200,
)
# Schemathesis' own list, and 413: it refuses a request as surely as 400 or 422 (the document
# states the line and character limits, so the fuzzer sends requests just over them).
REJECTIONS = "400 401 403 404 405 406 409 413 415 422 428 429 5xx".split()
CONFIG = {
    "seed": 1,
    "generation": {"deterministic": True},
    "checks": {"negative_data_rejection": {"expected-statuses": REJECTIONS}},
}

# Valid requests may still be refused (422, LibreTranslate's 400), and only for these rules: each
# depends on the model (its beam, vocabulary, positions), on a document's own syntax or on two
# lists' lengths, which JSON Schema cannot state; the fields' descriptions in the document do.
MODEL_RULES = re.compile(
    "|".join(
        [
            # nbest above the beam (the request's, or the checkpoint's when absent)
            r"is larger than the beam",
            r"\d+ prefixes for \d+ lines",  # a prefix per line of text
            r"need beam search",  # a glossary term that applies to a line, with a beam of 1
            r"vocabulary lacks",  # a glossary term the model cannot spell
            r"the prefix is \d+ pieces",  # a prefix longer than the model's positions
            r"sources but \d+ targets",  # /score: a target per source
            # a LibreTranslate document that does not parse as its format
            r"^line \d+|holds NUL characters",
            # a language the model lacks (the JSON API's, DeepL's)
            r"is not supported: this server translates",
            r"does not support formality",  # DeepL's formality more or less: the models have none
            r"glossary_id: no glossary",  # DeepL's glossary_id names a file of the server's folder
        ]
    )
)


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu")


@pytest.fixture(scope="module")
def server(translator):
    # named by its path, as `mt serve` does
    running = Running(create_app(lambda: translator, str(FIXTURE), CFG))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def api(server):
    return schemathesis.openapi.from_url(
        server.url + "/openapi.json", config=schemathesis.Config.from_dict(CONFIG)
    )


schema = schemathesis.pytest.from_fixture("api")


@schema.parametrize()
# Hypothesis' health checks judge the generator (slow or filtered data), not the server.
@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_is_one_the_openapi_document_allows(case):
    valid = case.meta.generation.mode.is_positive
    if valid:
        _served_pair(case)
    response = case.call(timeout=60)
    by_model = valid and response.status_code in (400, 422) and MODEL_RULES.search(_error(response))
    case.validate_response(response, excluded_checks=[positive_data_acceptance] if by_model else [])


def _served_pair(case) -> None:
    """A valid LibreTranslate request asks for the pair this server translates, so that the fuzzer
    gets past it to the translation (to the document any code is valid: the languages are the
    model's); the source is auto for about half of them."""
    body = case.body
    if (
        isinstance(body, dict)
        and {"source", "target"} <= set(body)
        and case.path in ("/translate", "/translate_file")
    ):
        body["source"] = ("de", "auto")[len(body["source"]) % 2]
        body["target"] = "en"
    if case.path == "/v2/translate" and isinstance(body, dict):
        body["target_lang"] = ("EN-GB", "en", "EN-US")[len(body.get("target_lang") or "") % 3]
        if "source_lang" in body:
            body["source_lang"] = "DE"
    # UTF-8, as documented
    if case.path == "/translate_file" and isinstance(body, dict) and "file" in body:
        data = getattr(body["file"], "data", body["file"])
        body["file"] = data.decode("utf-8", "replace").encode() if isinstance(data, bytes) else data


def _error(response) -> str:
    try:
        body = response.json()
        return str(body.get("error", body.get("message", "")))
    except (ValueError, AttributeError):
        return ""


def request(
    url: str, method: str, path: str, data: bytes = b"", kind: str = "application/json"
) -> tuple:
    """(status, lower-cased headers, parsed JSON body) of one raw request."""
    req = urllib.request.Request(
        url + path, data=data or None, method=method, headers={"Content-Type": kind}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, json.loads(e.read())


@pytest.mark.parametrize(
    ("method", "path", "data", "kind", "status", "field"),
    [
        ("POST", "/translate", b'{"text": ["a", ', "application/json", 400, None),
        ("POST", "/score", b"\xff\xfe", "application/json", 400, None),
        (
            "POST",
            "/attention",
            b"text=a",
            "application/x-www-form-urlencoded",
            400,
            None,
        ),  # not JSON
        ("POST", "/score", b'{"source": "a", "target": 5}', "application/json", 422, "target"),
        ("POST", "/translate", b'{"text": "a", "nbest": 2}', "application/json", 422, "format"),
        ("POST", "/translate", b'{"text": ["a"] , "beam": 5}', "application/json", 422, "beam"),
        (
            "POST",
            "/translate",
            json.dumps({"text": ["a"] * 9}).encode(),
            "application/json",
            413,
            "text",
        ),
        ("GET", "/nothing", b"", "application/json", 404, None),
        ("DELETE", "/translate", b"", "application/json", 405, None),
    ],
)
def test_the_json_apis_errors_are_one_object_naming_the_field(
    server, method, path, data, kind, status, field
):
    got, headers, body = request(server.url, method, path, data, kind)
    assert (got, set(body), body["field"]) == (status, {"error", "field"}, field), body
    assert headers["content-type"] == "application/json"
    if status == 405:
        assert headers["allow"] == "POST"


@pytest.mark.parametrize(
    ("method", "path", "data", "kind", "status"),
    [
        ("POST", "/translate", b"q=&source=de&target=en", "application/x-www-form-urlencoded", 400),
        (
            "POST",
            "/translate",
            b'{"q": "a", "source": "de", "target": "fr"}',
            "application/json",
            400,
        ),
        (
            "POST",
            "/translate",
            b'{"q": "a", "source": "de", "target": "en", "alternatives": true}',
            "application/json",
            400,
        ),
        ("POST", "/detect", b'{"q": ', "application/json", 400),
        ("POST", "/translate_file", b"file=a", "application/x-www-form-urlencoded", 400),
        ("GET", "/download_file/nothing.txt", b"", "application/json", 404),
        ("POST", "/languages", b"", "application/json", 405),
    ],
)
def test_libretranslates_errors_are_its_own_shape(server, method, path, data, kind, status):
    got, headers, body = request(server.url, method, path, data, kind)
    assert (got, list(body)) == (status, ["error"]), body
    assert headers["content-type"] == "application/json"


def test_a_body_over_the_limit_is_refused_in_the_shape_of_its_api(translator):
    running = Running(create_app(lambda: translator, "model.pt", ServeConfig(max_body_bytes=100)))
    big, form = (
        json.dumps({"text": "a" * 200}).encode(),
        b"q=" + b"a" * 200 + b"&source=de&target=en",
    )
    try:
        for path, data, kind, shape in [
            ("/translate", big, "application/json", {"error", "field"}),
            ("/translate", form, "application/x-www-form-urlencoded", {"error"}),
            ("/detect", big, "application/json", {"error"}),
        ]:
            status, _, body = request(running.url, "POST", path, data, kind)
            assert (
                status == 413 and set(body) == shape and "serve.max_body_bytes" in body["error"]
            ), body
            assert body.get("field") is None
    finally:
        running.stop()


def test_health_and_metrics_name_the_model_by_its_file_name_never_its_path(server):
    status, _, body = request(server.url, "GET", "/health")
    assert status == 200 and body["model"] == "model.pt"
    assert body["languages"] == {"source": ["de"], "target": ["en"]}
    metrics = urllib.request.urlopen(server.url + "/metrics", timeout=60).read().decode()
    assert str(FIXTURE.parent) not in json.dumps(body) + metrics


def test_the_document_names_no_shape_the_server_does_not_send(server):
    document = json.dumps(request(server.url, "GET", "/openapi.json")[2])
    assert "HTTPValidationError" not in document and '"detail"' not in document
