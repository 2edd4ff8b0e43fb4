"""DeepL's API v2 on `mt serve`, spoken by the official `deepl` client from PyPI, unchanged,
pointed at a loopback server by its server_url: texts and lists, HTML tag handling, line breaks,
languages, usage against a quota, a wrong key, and DeepL's statuses. The model is the
German->English fixture; the server is told de and en."""

from __future__ import annotations

from pathlib import Path

import pytest

from mt_cli import Translator
from mt_cli.config import ServeConfig

pytest.importorskip("fastapi")
deepl = pytest.importorskip("deepl")
requests = pytest.importorskip("requests")
from mt_cli.serve.deepl import _preserved  # noqa: E402
from mt_cli.serve.web_app import create_app  # noqa: E402
from serving import Running  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
DE = ["Ein hund läuft.", "Der mann sieht ein rot haus.", "Rot hund."]
# a refusal is the answer under test, not a reason to retry
deepl.http_client.max_network_retries = 0


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu")


def start(translator: Translator, **options) -> Running:
    cfg = ServeConfig(source_lang="de", target_lang="en", **{"max_wait_ms": 5, **options})
    return Running(create_app(lambda: translator, "model.pt", cfg))


@pytest.fixture(scope="module")
def server(translator):
    running = start(translator)
    yield running
    running.stop()


def client(running: Running, key: str = "any-key") -> deepl.Translator:
    return deepl.Translator(key, server_url=running.url)


def test_the_official_client_translates_texts_lists_and_html(server, translator):
    dl = client(server)
    one = dl.translate_text(DE[0], target_lang="EN-GB")
    assert (
        one.text == translator.translate_document(DE[0], "text")
        and one.detected_source_lang == "DE"
    )
    assert one.billed_characters == len(DE[0])
    many = dl.translate_text(DE, source_lang="DE", target_lang="EN-US")
    assert [r.text for r in many] == [translator.translate_document(t, "text") for t in DE]
    page = "<p>Ein <b>hund</b> läuft.</p>"
    html = dl.translate_text(page, target_lang="en-us", tag_handling="html")
    assert html.text == translator.translate_document(page, "html") and "<b>" in html.text
    lines = f"{DE[0]}\n{DE[2]}"
    split = dl.translate_text(lines, target_lang="EN-GB")  # "1": each line apart
    assert split.text == "\n".join(translator.translate_document(t, "text") for t in (DE[0], DE[2]))
    whole = dl.translate_text(lines, target_lang="EN-GB", split_sentences="nonewlines")
    assert whole.text == translator.translate_document(lines, "text")
    kept = dl.translate_text("rot hund", target_lang="EN-GB", preserve_formatting=True)
    assert kept.text == _preserved("rot hund", translator.translate_document("rot hund", "text"))


@pytest.mark.parametrize("batches", [False, True], ids=["whole-batches", "running-batches"])
def test_concurrent_clients_texts_share_batches_and_translate_as_each_alone(translator, batches):
    from concurrent.futures import ThreadPoolExecutor

    texts = [" ".join(DE[i % 3 :] + DE[: i % 3]) for i in range(16)]
    running = start(translator, max_wait_ms=300, batch_gap_ms=200, running_batches=batches)
    try:
        dl = client(running)
        with ThreadPoolExecutor(16) as pool:
            found = list(
                pool.map(
                    lambda t: dl.translate_text(t, source_lang="DE", target_lang="EN-GB"), texts
                )
            )
        metrics = requests.get(f"{running.url}/metrics", timeout=30).text.splitlines()
    finally:
        running.stop()
    assert [r.text for r in found] == [translator.translate_document(t, "text") for t in texts]
    batches = next(float(x.split()[-1]) for x in metrics if x.startswith("mt_batch_requests_count"))
    assert batches < 16  # 16 requests went through fewer searches than 16


def test_languages_usage_and_refusals_come_as_deepl_gives_them(server):
    dl = client(server)
    assert [(lang.code, lang.name) for lang in dl.get_source_languages()] == [("DE", "German")]
    targets = dl.get_target_languages()
    assert [lang.code for lang in targets] == ["EN-GB", "EN-US"] and not targets[
        0
    ].supports_formality
    before = dl.get_usage().character.count
    dl.translate_text(DE[1], target_lang="EN-GB")
    assert dl.get_usage().character.count == before + len(DE[1])
    with pytest.raises(deepl.DeepLException, match="target_lang") as refused:
        dl.translate_text(DE[0], target_lang="FR")
    assert refused.value.http_status_code == 400
    with pytest.raises(deepl.DeepLException, match="does not support formality"):
        dl.translate_text(DE[0], target_lang="EN-GB", formality="more")
    assert dl.translate_text(
        DE[0], target_lang="EN-GB", formality="prefer_more"
    ).text  # falls back, as DeepL's
    answer = requests.post(
        server.url + "/v2/translate", data={"text": DE[:2], "target_lang": "EN-GB"}, timeout=60
    )
    # a form, text given twice
    assert answer.status_code == 200 and len(answer.json()["translations"]) == 2
    answer = requests.post(server.url + "/v2/translate", json={"target_lang": "EN-GB"}, timeout=60)
    assert (
        answer.status_code == 400
        and list(answer.json()) == ["message"]
        and "text" in answer.json()["message"]
    )


def test_keys_and_the_quota_are_checked_with_deepls_statuses(translator, tmp_path):
    (tmp_path / "keys").write_text("secret-1\n", encoding="utf-8")
    running = start(translator, api_keys=str(tmp_path / "keys"), char_quota=40)
    try:
        with pytest.raises(deepl.AuthorizationException):
            client(running, "wrong").translate_text(DE[0], target_lang="EN-GB")
        dl = client(running, "secret-1")
        dl.translate_text(DE[1], target_lang="EN-GB")  # 28 characters of 40
        usage = dl.get_usage().character
        assert (usage.count, usage.limit) == (len(DE[1]), 40)
        with pytest.raises(deepl.QuotaExceededException):
            dl.translate_text(DE[1], target_lang="EN-GB")
        # The same key and limits speak every API: the JSON API needs the key too.
        answer = requests.post(running.url + "/translate", json={"text": DE[:1]}, timeout=60)
        assert answer.status_code == 403 and answer.json()["field"] == "api_key"
        answer = requests.post(
            running.url + "/translate", json={"text": ["Rot."], "api_key": "secret-1"}, timeout=60
        )
        assert answer.status_code == 200
    finally:
        running.stop()


def test_a_glossary_id_names_a_glossary_file_whose_terms_the_translation_uses(translator, tmp_path):
    from mt_cli.decode.glossary import Glossary

    (tmp_path / "glossaries").mkdir()
    (tmp_path / "glossaries" / "animals.tsv").write_text(
        "# de -> en\nhund\thound\n", encoding="utf-8"
    )
    running = start(translator, glossaries=str(tmp_path / "glossaries"))
    try:
        dl = client(running)
        found = dl.translate_text(DE[0], source_lang="DE", target_lang="EN-GB", glossary="animals")
        assert found.text == translator.translate_document(
            DE[0], "text", Glossary([("hund", "hound")])
        )
        assert "hound" in found.text and "hound" not in translator.translate_document(DE[0], "text")
        with pytest.raises(deepl.DeepLException, match="no glossary 'plants'"):
            dl.translate_text(DE[0], source_lang="DE", target_lang="EN-GB", glossary="plants")
    finally:
        running.stop()
