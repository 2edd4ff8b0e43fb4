"""LibreTranslate's API on `mt serve`, spoken by real clients to a real server on loopback:
libretranslatepy unchanged, forms and JSON as Weblate sends them, every refusal with
LibreTranslate's status and a message naming the field, the limit or the pair. The model is the
German->English fixture, which records no languages: the server is told de and en. And the
languages a checkpoint records: `mt train` from the files' suffixes, `mt import` from the name."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mt_cli import Translator
from mt_cli.config import ServeConfig
from mt_cli.errors import MtError

pytest.importorskip("fastapi")
requests = pytest.importorskip("requests")
from mt_cli.serve.served_languages import resolve  # noqa: E402
from mt_cli.serve.web_app import create_app  # noqa: E402
from serving import Running, call  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
DE = ["Ein hund läuft.", "Der mann sieht ein rot haus.", "Rot hund."]


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu")


def start(translator: Translator, **options) -> Running:
    given = {"max_wait_ms": 5, "max_chars": 300, "max_request_lines": 20, **options}
    cfg = ServeConfig(source_lang="de", target_lang="en", **given)
    return Running(create_app(lambda: translator, "model.pt", cfg))


@pytest.fixture(scope="module")
def server(translator):
    running = start(translator)
    yield running
    running.stop()


def document(translator: Translator, text: str, kind: str = "text") -> str:
    return translator.translate_document(text, kind, source_lang="de")


def test_libretranslatepy_translates_lists_languages_and_detects_unchanged(server, translator):
    from libretranslatepy import LibreTranslateAPI

    lt = LibreTranslateAPI(server.url)
    paragraph = " ".join(DE)
    assert lt.translate(paragraph, "de", "en") == document(translator, paragraph)
    assert lt.languages() == [
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": []},
    ]
    assert lt.detect("Der Mann sieht ein rotes Haus.") == [{"confidence": 100.0, "language": "de"}]
    # One source language: lingua still checks that the text can be it.
    assert lt.detect("Привет, как дела?") == [{"confidence": 0.0, "language": "de"}]


def batches_and_requests(url: str, answered: int) -> tuple[float, ...]:
    """Batches and requests /metrics counts once `answered` requests are in them: a batch is
    counted when it ends, and a running batch answers each request as it finishes, before that."""
    deadline = time.monotonic() + 30
    while True:
        metrics = requests.get(f"{url}/metrics", timeout=30).text.splitlines()
        counted = tuple(
            next(float(x.split()[-1]) for x in metrics if x.startswith(name))
            for name in ("mt_batch_requests_count", "mt_batch_requests_sum")
        )
        if counted[1] >= answered or time.monotonic() > deadline:
            return counted
        time.sleep(0.05)


@pytest.mark.parametrize("running", [False, True], ids=["whole-batches", "running-batches"])
@pytest.mark.parametrize("kind", ["text", "html"])
def test_concurrent_libretranslate_texts_share_batches_and_translate_as_each_alone(
    translator, kind, running
):
    from concurrent.futures import ThreadPoolExecutor

    paragraphs = [" ".join(DE[i % 3 :] + DE[: i % 3]) for i in range(16)]
    if kind == "html":
        paragraphs = [f"<p>{p.replace('hund', '<b>hund</b>')}</p>" for p in paragraphs]
    server = start(translator, max_wait_ms=300, batch_gap_ms=200, running_batches=running)
    try:
        with ThreadPoolExecutor(16) as pool:
            answers = list(
                pool.map(
                    lambda q: requests.post(
                        f"{server.url}/translate",
                        json={"q": q, "source": "de", "target": "en", "format": kind},
                        timeout=60,
                    ),
                    paragraphs,
                )
            )
        batches, jobs = batches_and_requests(server.url, 16)
        # the same 16 clients through the JSON API, one line each
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda q: call(server.url, "POST", "/translate", {"text": q}), (DE * 6)[:16]
                )
            )
        native = batches_and_requests(server.url, 32)[0] - batches
    finally:
        server.stop()
    assert [a.json()["translatedText"] for a in answers] == [
        document(translator, p, kind) for p in paragraphs
    ]
    assert jobs == 16 and batches < 16  # 16 requests went through fewer searches than 16
    assert batches <= native


def test_weblate_requests_a_form_and_a_json_list_and_gets_translated_text(server, translator):
    # Weblate before 5.x: requests' form, the key None when unset (requests leaves it out).
    form = {"api_key": None, "q": DE[0], "source": "de", "target": "en"}
    answer = requests.post(server.url + "/translate", data=form, timeout=60)
    assert answer.status_code == 200 and answer.json() == {
        "translatedText": document(translator, DE[0])
    }
    # curl -d: a form whose non-ASCII bytes are not escaped (browsers and requests escape them).
    raw = f"q={DE[0]}&source=de&target=en".encode()
    answer = requests.post(
        server.url + "/translate",
        data=raw,
        timeout=60,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.json() == {"translatedText": document(translator, DE[0])}
    # Weblate now: JSON, a list of texts, the key null.
    body = {"api_key": None, "q": DE, "source": "de", "target": "en"}
    answer = requests.post(server.url + "/translate", json=body, timeout=60)
    assert answer.json() == {"translatedText": [document(translator, t) for t in DE]}


def test_alternatives_are_the_next_best_hypotheses_and_auto_says_what_it_detected(
    server, translator
):
    status, _, body = call(
        server.url,
        "POST",
        "/translate",
        {"q": DE[:2], "source": "auto", "target": "en", "alternatives": 2},
    )
    assert status == 200, body
    for text, best, others in zip(DE[:2], body["translatedText"], body["alternatives"]):
        hyps = [h.text for h in translator.search([text], nbest=3)[0]]
        assert best == hyps[0] and others == [h for h in hyps[1:] if h != best]
    assert body["detectedLanguage"] == [{"confidence": 100.0, "language": "de"}] * 2


def test_html_keeps_its_markup(server, translator):
    html = "<p>Ein <b>hund</b> läuft.</p>"
    status, _, body = call(
        server.url,
        "POST",
        "/translate",
        {"q": html, "source": "de", "target": "en", "format": "html"},
    )
    assert status == 200 and body["translatedText"] == document(translator, html, "html")


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ({"source": "de", "target": "en"}, "missing q parameter"),
        ({"q": "Ein hund.", "target": "en"}, "missing source parameter"),
        (
            {"q": "Ein hund.", "source": "de", "target": "fr"},
            "de -> fr is not supported: this server translates de -> en",
        ),
        ({"q": "Ein hund.", "source": "xx", "target": "en"}, "xx -> en"),
        (
            {"q": "ein " * 80, "source": "de", "target": "en"},
            "q: a text of 320 characters, more than the server's limit of 300 (serve.max_chars)",
        ),
        ({"q": ["Ein hund."] * 21, "source": "de", "target": "en"}, "serve.max_request_lines"),
        (
            {"q": "Ein hund.", "source": "de", "target": "en", "alternatives": "many"},
            "alternatives",
        ),
        ({"q": "Ein hund.", "source": "de", "target": "en", "alternatives": 64}, "serve.max_beam"),
        (
            {"q": "Ein hund.", "source": "de", "target": "en", "format": "pdf"},
            "pdf format is not supported",
        ),
        (
            {"q": "Ein hund.", "source": "de", "target": "en", "format": "docx"},
            "through /translate_file",
        ),
        ({"q": 'msgid "a"\nmsgstr', "source": "de", "target": "en", "format": "po"}, "line"),
    ],
)
def test_bad_requests_get_400_naming_the_field_the_limit_or_the_pair(server, body, names):
    answer = requests.post(server.url + "/translate", json=body, timeout=60)
    assert answer.status_code == 400 and names in answer.json()["error"], answer.text
    assert list(answer.json()) == ["error"]


def test_api_keys_are_required_when_given_and_ignored_otherwise(server, translator, tmp_path):
    from libretranslatepy import LibreTranslateAPI

    (tmp_path / "keys").write_text("# one key a line\nsecret-1\n\nsecret-2\n", encoding="utf-8")
    running = start(translator, api_keys=str(tmp_path / "keys"))
    try:
        form = {"q": DE[0], "source": "de", "target": "en"}
        for key in (None, "wrong"):
            answer = requests.post(
                running.url + "/translate", data={**form, "api_key": key}, timeout=60
            )
            assert answer.status_code == 403 and answer.json()["error"].startswith(
                "Invalid API key"
            )
        assert (
            requests.post(running.url + "/detect", data={"q": DE[0]}, timeout=60).status_code == 403
        )
        assert LibreTranslateAPI(running.url, api_key="secret-2").translate(DE[0], "de", "en")
        settings = call(running.url, "GET", "/frontend/settings")[2]
        assert settings["apiKeys"] is True and settings["keyRequired"] is True
        assert call(running.url, "GET", "/languages")[0] == 200  # as LibreTranslate: no key needed
    finally:
        running.stop()
    without = requests.post(server.url + "/translate", data={**form, "api_key": "any"}, timeout=60)
    assert without.status_code == 200  # without --api-keys a key is accepted and ignored


def test_translate_file_round_trips_a_text_document_through_its_download_url(server, translator):
    text = f"{DE[0]} {DE[1]}\n\n   {DE[2]}\n"
    answer = requests.post(
        server.url + "/translate_file",
        files={"file": ("brief.txt", text.encode())},
        data={"source": "de", "target": "en"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    assert url.startswith(server.url + "/download_file/") and url.endswith(".brief.txt")
    download = requests.get(url, timeout=60)
    assert download.text == document(translator, text)
    assert 'filename="brief.txt"' in download.headers["content-disposition"]
    refused = requests.post(
        server.url + "/translate_file",
        files={"file": ("a.pdf", b"%PDF")},
        data={"source": "de", "target": "en"},
        timeout=60,
    )
    assert refused.status_code == 400 and "file format not supported" in refused.json()["error"]
    assert requests.get(server.url + "/download_file/nothing.txt", timeout=60).status_code == 404


def test_frontend_settings_have_libretranslates_shape(server):
    status, _, body = call(server.url, "GET", "/frontend/settings")
    assert status == 200
    assert set(body) == {
        "charLimit",
        "frontendTimeout",
        "apiKeys",
        "keyRequired",
        "suggestions",
        "filesTranslation",
        "supportedFilesFormat",
        "language",
    }
    assert (
        body["charLimit"] == 300
        and body["suggestions"] is False
        and body["filesTranslation"] is True
    )
    assert ".txt" in body["supportedFilesFormat"] and ".html" in body["supportedFilesFormat"]
    assert body["language"] == {
        "source": {"code": "auto", "name": "Auto Detect"},
        "target": {"code": "en", "name": "English"},
    }


def test_the_json_api_still_answers_on_translate(server, translator):
    status, _, body = call(server.url, "POST", "/translate", {"text": DE})
    assert status == 200 and body == {"translations": translator.translate(DE)}
    status, _, body = call(server.url, "POST", "/translate", {"beam": 2})
    assert status == 422 and body["field"] == "text"


def test_mt_train_records_the_languages_of_the_files_suffixes_and_serve_checks_against_them(
    tmp_path, corpus_files
):
    from mt_cli.cli import app
    from mt_cli.model import checkpoint

    f = corpus_files  # train.de, train.en, valid.de, valid.en
    args = [
        "train",
        "--train-src",
        f["train_src"],
        "--train-tgt",
        f["train_tgt"],
        "--valid-src",
        f["valid_src"],
        "--valid-tgt",
        f["valid_tgt"],
        "--out",
        tmp_path / "run",
        "--preset",
        "tiny",
        "--max-steps",
        1,
        "--set",
        "tokenizer.vocab_size=90",
        "--set",
        "train.doctor=false",
    ]
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    model = checkpoint.load(tmp_path / "run" / "best.pt").config.model
    assert (model.source_langs, model.target_langs) == (("de",), ("en",))
    tr = Translator.load(tmp_path / "run" / "best.pt", device="cpu")
    assert resolve(tr, ServeConfig())[1].sources == ("de",)
    with pytest.raises(MtError, match=r"serve.target_lang fr: the checkpoint writes en"):
        resolve(tr, ServeConfig(target_lang="fr"))


def test_imported_models_languages_come_from_their_config_name_and_target_tokens(tmp_path):
    import json
    from types import SimpleNamespace

    from mt_cli.interop.hf_import import _named, languages

    plain = SimpleNamespace(src_vocab=["</s>", "<unk>", "▁Hund", "<pad>"])
    tokens = SimpleNamespace(src_vocab=["</s>", ">>fra<<", ">>por<<", "▁dog", "<pad>"])
    assert languages("Helsinki-NLP/opus-mt-de-en", {}, tmp_path, plain) == (("de",), ("en",))
    assert languages("x", {"_name_or_path": "opus-mt-en-ROMANCE"}, tmp_path, tokens) == (
        ("en",),
        ("fra", "por"),
    )
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"source_lang": "nl", "target_lang": "en"})
    )
    assert languages("Helsinki-NLP/opus-mt-de-en", {}, tmp_path, plain) == (("nl",), ("en",))

    assert _named("Helsinki-NLP/opus-mt-de-en") == (("de",), ("en",))
    assert _named("/models/opus-mt-tc-big-en-fr/") == (("en",), ("fr",))
    assert _named("opus-mt-fi_sv-en") == (("fi", "sv"), ("en",))
    assert _named("Helsinki-NLP/opus-mt-en-ROMANCE") == (("en",), ())  # a group, not a language
    assert _named("my-model") == ((), ())


def test_suffixes_name_languages_and_other_suffixes_do_not():
    from mt_cli.data.languages import language_name, suffix_language

    names = ("a/train.de", "train.en.gz", "train.pt_BR", "train.src", "train.txt", "train")
    assert [suffix_language(Path(p)) for p in names] == ["de", "en", "pt_BR", None, None, None]
    assert language_name("zh-Hant") == "Chinese (Hant)" and language_name("cmn_Hans") == "cmn_Hans"


def test_browser_pages_on_other_origins_may_call_only_when_the_server_allows_their_origin(
    server, translator
):
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    closed = requests.options(server.url + "/translate", headers=preflight, timeout=60)
    assert "access-control-allow-origin" not in {k.lower() for k in closed.headers}
    running = start(translator, cors_origins=("https://app.example",))
    try:
        opened = requests.options(running.url + "/translate", headers=preflight, timeout=60)
        assert opened.status_code == 200
        assert opened.headers["access-control-allow-origin"] == "https://app.example"
        answer = requests.post(
            running.url + "/translate",
            json={"q": DE[0], "source": "de", "target": "en"},
            headers={"Origin": "https://app.example"},
            timeout=60,
        )
        assert answer.headers["access-control-allow-origin"] == "https://app.example"
        other = requests.options(
            running.url + "/translate",
            headers={**preflight, "Origin": "https://evil.example"},
            timeout=60,
        )
        assert other.headers.get("access-control-allow-origin") != "https://evil.example"
    finally:
        running.stop()
