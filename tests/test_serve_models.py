"""A server of many models (`mt serve --models DIR`): each request routed by its languages to a
bilingual model, else a multilingual one, else through English by two models; the least recently
used model unloaded under serve.max_loaded and serve.max_memory_mb; a model loading never holding
up the loaded ones; the translation cache. The models are the German->English fixture saved under
other names and languages: what is checked is the route, by what each model gives alone."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from mt_cli import Translator
from mt_cli.config import ServeConfig
from mt_cli.errors import MtError
from mt_cli.model import checkpoint

pytest.importorskip("fastapi")
requests = pytest.importorskip("requests")
from mt_cli.serve.catalog import catalog  # noqa: E402
from mt_cli.serve.models import Entry  # noqa: E402
from mt_cli.serve.served_languages import Languages  # noqa: E402
from mt_cli.serve.server import _entries  # noqa: E402
from mt_cli.serve.web_app import create_server  # noqa: E402
from serving import Running, call  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
DE = ["Ein hund läuft.", "Der mann sieht ein rot haus.", "Rot hund."]


def recording(path: Path, sources: tuple[str, ...], targets: tuple[str, ...]) -> Path:
    """The fixture saved as a checkpoint that records these languages."""
    ckpt = checkpoint.load(FIXTURE)
    model = replace(ckpt.config.model, source_langs=sources, target_langs=targets)
    checkpoint.save(path, replace(ckpt, config=replace(ckpt.config, model=model)))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """de-en.pt and en-fr.pt, named for their pairs; multi.pt, recording cs, pl -> en, uk."""
    d = tmp_path_factory.mktemp("models")
    shutil.copy(FIXTURE, d / "de-en.pt")
    (d / "en-fr").mkdir()
    shutil.copy(FIXTURE, d / "en-fr" / "best.pt")  # a run folder: its best.pt
    recording(d / "multi.pt", ("cs", "pl"), ("en", "uk"))
    return d


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu")


def start(folder: Path, **options) -> Running:
    cfg = ServeConfig(models=str(folder), max_wait_ms=5, **options)

    def load(paths):
        return Translator.load(list(paths), device="cpu")

    return Running(create_server(lambda: _entries([], cfg, load), cfg))


def health(running: Running) -> dict[str, dict]:
    return {m["name"]: m for m in call(running.url, "GET", "/health")[2]["models"]}


def test_a_folder_lists_every_model_by_its_languages_and_refuses_two_for_one_pair(folder, tmp_path):
    found = {m.name: m.languages for m in catalog(folder, [])}
    assert found["de-en.pt"].sources == ("de",) and found["de-en.pt"].targets == ("en",)
    assert found["en-fr/best.pt"].sources == ("en",) and found["multi.pt"].targets == ("en", "uk")
    twice = tmp_path / "twice"
    twice.mkdir()
    shutil.copy(FIXTURE, twice / "de-en.pt")
    shutil.copy(FIXTURE, twice / "de_en.pt")
    with pytest.raises(MtError, match="de_en.pt and de-en.pt both translate de -> en; keep one"):
        catalog(twice, [])
    shutil.copy(FIXTURE, tmp_path / "model.pt")
    with pytest.raises(MtError, match="records no languages; name the file"):
        catalog(None, [tmp_path / "model.pt"])


def test_each_pair_goes_to_its_model_or_through_english_and_languages_lists_them_all(
    folder, translator
):
    from libretranslatepy import LibreTranslateAPI

    running = start(folder)
    try:
        assert not any(m["loaded"] for m in health(running).values())  # loaded when first asked for
        lt = LibreTranslateAPI(running.url)
        listed = {entry["code"]: set(entry["targets"]) for entry in lt.languages()}
        assert (
            listed["de"] == {"en", "fr"}
            and listed["cs"] == {"en", "uk", "fr"}
            and listed["en"] == {"fr"}
        )
        assert listed["uk"] == set()
        once = translator.translate_document(DE[0], "text")
        assert lt.translate(DE[0], "de", "en") == once  # direct
        assert lt.translate(DE[0], "cs", "uk") == once  # the multilingual model
        # de -> en -> fr
        assert lt.translate(DE[0], "de", "fr") == translator.translate_document(once, "text")
        status, _, body = call(
            running.url,
            "POST",
            "/translate",
            {"text": DE, "source_lang": "de", "target_lang": "fr"},
        )
        assert status == 200 and body["translations"] == translator.translate(
            translator.translate(DE)
        )
        status, _, body = call(
            running.url,
            "POST",
            "/translate",
            {"text": DE, "source_lang": "de", "target_lang": "uk"},
        )
        assert (
            status == 422
            and "de -> uk is not supported" in body["error"]
            and body["field"] == "target_lang"
        )
        asked = {
            "text": DE,
            "source_lang": "de",
            "target_lang": "fr",
            "format": "full",
            "alignment": True,
        }
        status, _, body = call(running.url, "POST", "/translate", asked)
        assert status == 422 and "goes through en" in body["error"]
        status, _, body = call(running.url, "POST", "/translate", {"text": DE})
        assert (
            status == 422
            and "name the language" in body["error"]
            and body["field"] == "source_lang"
        )
        models = health(running)
        assert all(m["loaded"] for m in models.values()) and models["multi.pt"]["source"] == [
            "cs",
            "pl",
        ]
        metrics = call(running.url, "GET", "/metrics")[2]
        # two pivots and one direct
        assert 'mt_model_requests_total{model="de-en.pt"} 3.0' in metrics
        assert 'mt_model_requests_total{model="en-fr/best.pt"} 2.0' in metrics
        assert "mt_models_loaded 3.0" in metrics
    finally:
        running.stop()


def test_past_max_loaded_or_the_memory_cap_the_least_recently_used_model_is_unloaded(
    folder, translator
):
    # each file is 0.7 MB: two fit in 2 MB
    for options in (
        {"max_loaded": 2},
        {"max_memory_mb": 2},
    ):
        running = start(folder, **options)
        try:
            for source, target in (("de", "en"), ("cs", "uk"), ("de", "en"), ("en", "fr")):
                status, _, body = call(
                    running.url,
                    "POST",
                    "/translate",
                    {"text": DE[:1], "source_lang": source, "target_lang": target},
                )
                assert status == 200 and body["translations"] == translator.translate(DE[:1])
            loaded = {name for name, m in health(running).items() if m["loaded"]}
            # multi.pt was used least recently
            assert loaded == {"de-en.pt", "en-fr/best.pt"}, options
            metrics = call(running.url, "GET", "/metrics")[2]
            assert 'mt_model_unloads_total{model="multi.pt"} 1.0' in metrics
            assert 'mt_model_loads_total{model="de-en.pt"} 1.0' in metrics
        finally:
            running.stop()


def test_a_model_loading_never_holds_up_requests_for_a_loaded_one(translator):
    release, loading = threading.Event(), threading.Event()

    def slow():
        loading.set()
        assert release.wait(60)
        return translator, cs_en

    de_en, cs_en = Languages(("de",), ("en",), False), Languages(("cs",), ("en",), False)

    def catalog_():
        return [
            Entry("fast.pt", lambda: (translator, de_en), de_en, 5, 1),
            Entry("slow.pt", slow, cs_en, 5, 1),
        ]

    running = Running(create_server(catalog_, ServeConfig(max_wait_ms=5)))
    try:
        assert (
            call(
                running.url,
                "POST",
                "/translate",
                {"text": DE, "source_lang": "de", "target_lang": "en"},
            )[0]
            == 200
        )
        waiting: list = []
        slow_request = threading.Thread(
            target=lambda: waiting.append(
                call(
                    running.url,
                    "POST",
                    "/translate",
                    {"text": DE[:1], "source_lang": "cs", "target_lang": "en"},
                )
            )
        )
        slow_request.start()
        assert loading.wait(30)
        started = time.monotonic()
        status, _, body = call(
            running.url,
            "POST",
            "/translate",
            {"text": DE, "source_lang": "de", "target_lang": "en"},
        )
        assert status == 200 and body["translations"] == translator.translate(DE)
        # still loading meanwhile
        assert not waiting and health(running)["slow.pt"]["loaded"] is False
        release.set()
        slow_request.join(60)
        assert waiting[0][0] == 200 and time.monotonic() - started < 60
    finally:
        release.set()
        running.stop()


def test_a_repeated_text_is_answered_from_the_cache_and_counted(folder, translator):
    running = start(folder, cache_size=100)
    try:
        asked = {"text": DE, "source_lang": "de", "target_lang": "en"}
        first = call(running.url, "POST", "/translate", asked)[2]
        again = call(running.url, "POST", "/translate", {**asked, "text": [DE[1], "Ein mann."]})[2]
        assert first["translations"] == translator.translate(DE)
        assert again["translations"] == translator.translate([DE[1], "Ein mann."])
        beam = call(running.url, "POST", "/translate", {**asked, "text": [DE[1]], "beam": 2})[2]
        assert beam["translations"] == translator.with_options(beam=2).translate([DE[1]])
        metrics = call(running.url, "GET", "/metrics")[2]
        assert "mt_cache_hits_total 1.0" in metrics and "mt_cache_misses_total 5.0" in metrics
    finally:
        running.stop()
