"""`mt serve` as a user runs it, in a process of its own: the URL it prints, SIGTERM with requests
in flight, one-line errors; and the web page in a real headless Chromium."""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from serving import Running, call  # noqa: E402


def start(ckpt: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    cmd = [
        sys.executable,
        "-m",
        "mt_cli",
        "serve",
        "--checkpoint",
        str(ckpt),
        "--port",
        "0",
        "--device",
        "cpu",
        *extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # type: ignore[union-attr]
    found = re.search(r"http://127\.0\.0\.1:\d+", first)
    assert found, first + proc.stderr.read()  # type: ignore[union-attr]
    url, deadline = found.group(0), time.monotonic() + 60
    while call(url, "GET", "/health")[0] != 200:
        assert time.monotonic() < deadline and proc.poll() is None, "the model did not load"
        time.sleep(0.1)
    return proc, url


def queued_lines(url: str) -> float:
    """The server's mt_queued_lines gauge, read from /metrics."""
    text = call(url, "GET", "/metrics")[2]
    return float(re.search(r"^mt_queued_lines (\S+)$", text, re.M).group(1))  # type: ignore[union-attr]


def test_sigterm_finishes_the_requests_in_flight_and_exits_0(trained, corpus):
    # A grace period no machine's decoding of these requests reaches: the test is about finishing
    # them, not about how fast this CPU is.
    proc, url = start(trained[1] / "run" / "best.pt", "--shutdown-s", "120")
    lines = (corpus[0] * 10)[:500]  # four requests of 500 lines: seconds of decoding in all
    done_at: list[float] = []

    def send(_: int) -> tuple:
        got = call(url, "POST", "/translate", {"text": lines, "beam": 5}, timeout=180)
        done_at.append(time.monotonic())
        return got

    try:
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(send, i) for i in range(4)]
            deadline = time.monotonic() + 60
            # More than three requests' lines waiting: all four are in (a slice is a few dozen).
            while queued_lines(url) <= 1500:
                assert time.monotonic() < deadline, "the four requests were never queued together"
                time.sleep(0.01)
            stopped = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            answers = [f.result() for f in futures]
        rc = proc.wait(timeout=150)
    finally:
        proc.kill()
    assert rc == 0
    assert [status for status, _, _ in answers] == [200] * 4, answers
    assert [len(body["translations"]) for _, _, body in answers] == [500] * 4
    # they were still in flight when the signal came, and were answered
    assert min(done_at) > stopped
    with pytest.raises(OSError):  # and it no longer listens
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=2)


def test_threads_sets_how_many_cpu_threads_the_server_decodes_with(trained):
    proc, url = start(trained[1] / "run" / "best.pt", "--threads", "1")
    try:
        status, _, body = call(url, "GET", "/health")
        assert status == 200 and body["threads"] == 1
        assert call(url, "POST", "/translate", {"text": ["Ein Hund."]})[0] == 200
    finally:
        proc.terminate()
        proc.wait(15)


def test_serve_errors_are_one_line(tmp_path, trained):
    missing = subprocess.run(
        [sys.executable, "-m", "mt_cli", "serve", "--checkpoint", str(tmp_path / "no.pt")],
        capture_output=True,
        text=True,
    )
    assert (
        missing.returncode == 1
        and missing.stderr.strip().count("\n") == 0
        and "no.pt" in missing.stderr
    )
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        ckpt = str(trained[1] / "run" / "best.pt")
        taken = subprocess.run(
            [sys.executable, "-m", "mt_cli", "serve", "--checkpoint", ckpt, "--port", port],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert taken.returncode == 1 and "cannot listen on 127.0.0.1:" + port in taken.stderr
    assert "Traceback" not in taken.stderr


CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
NO_BROWSER = "needs Debian's chromium and chromium-driver (.ci/run installs them)"


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason=NO_BROWSER)
def test_the_web_page_translates_a_typed_sentence_as_the_api_does(trained, corpus):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from mt_cli import Translator
    from mt_cli.serve.web_app import create_app

    translator = Translator.load(trained[1] / "run" / "best.pt", device="cpu")
    running = Running(create_app(lambda: translator, "best.pt"))
    browser = _chrome(webdriver, Service)
    try:
        browser.get(running.url + "/")
        sentence = corpus[0][0]
        browser.find_element(By.ID, "text").send_keys(sentence)
        browser.find_element(By.ID, "translate").click()
        shown = WebDriverWait(browser, 30).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, "#results .translation")
        )
        api = call(running.url, "POST", "/translate", {"text": [sentence]})[2]["translations"][0]
        assert shown[0].text == api == translator.translate([sentence])[0]
        browser.find_element(By.CSS_SELECTOR, "#results .attn").click()
        canvas = browser.find_element(By.ID, "heatmap")
        rows = WebDriverWait(browser, 30).until(lambda b: canvas.get_attribute("data-rows"))
        drawn = call(running.url, "POST", "/attention", {"text": sentence, "target": api})[2]
        assert int(rows) == len(drawn["target"]) and int(
            canvas.get_attribute("data-columns")
        ) == len(drawn["source"])
        # the README's picture: MT_SCREENSHOT=docs/serve-page.png pytest ...
        if os.environ.get("MT_SCREENSHOT"):
            browser.save_screenshot(os.environ["MT_SCREENSHOT"])
    finally:
        browser.quit()
        running.stop()


def _document_mode(browser, url: str) -> None:
    """The page at `url` switched to document mode, once its languages are listed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(url + "/")
    browser.find_element(By.ID, "mode-document").click()
    WebDriverWait(browser, 30).until(lambda b: Select(b.find_element(By.ID, "target")).options)


def _chrome(webdriver, service):
    """Headless Chromium; `webdriver` and `service` are selenium's, imported by the test (it may
    skip)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1100,900",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=service(executable_path=DRIVER), options=options)


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason=NO_BROWSER)
def test_the_web_pages_document_mode_translates_a_text_document_keeping_its_paragraphs(
    trained, corpus
):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from mt_cli import Translator
    from mt_cli.serve.web_app import create_app

    # records de -> en (train.de, .en)
    translator = Translator.load(trained[1] / "run" / "best.pt", device="cpu")
    running = Running(create_app(lambda: translator, "best.pt"))
    browser = _chrome(webdriver, Service)
    try:
        _document_mode(browser, running.url)
        document = f"{corpus[0][0]} {corpus[0][1]}\n\n{corpus[0][2]}\n"
        browser.find_element(By.ID, "doc").send_keys(document)
        Select(browser.find_element(By.ID, "doc-type")).select_by_value("text")
        browser.find_element(By.ID, "doc-translate").click()
        shown = WebDriverWait(browser, 30).until(lambda b: b.find_element(By.ID, "doc-output").text)
        expected = translator.translate_document(document, "text", source_lang="de")
        assert shown == expected.strip() and "\n\n" in shown  # the paragraphs stay apart
        # HTML only
        assert browser.find_element(By.ID, "doc-preview").get_attribute("hidden") is not None
        html = f"<p>{corpus[0][0]} <b>{corpus[0][1]}</b></p>"
        # Before the server decodes: alignment reads the model's attention, one caller at a time.
        expected = translator.translate_document(html, "html", source_lang="de")
        browser.find_element(By.ID, "doc").clear()
        browser.find_element(By.ID, "doc").send_keys(html)
        Select(browser.find_element(By.ID, "doc-type")).select_by_value("html")
        browser.find_element(By.ID, "doc-translate").click()
        preview = browser.find_element(By.ID, "doc-preview")
        WebDriverWait(browser, 30).until(lambda b: preview.get_attribute("srcdoc") == expected)
        assert (
            browser.find_element(By.ID, "doc-output").text == expected
            and preview.get_attribute("sandbox") == ""
        )
        if os.environ.get("MT_SCREENSHOT_DOCUMENT"):
            browser.save_screenshot(os.environ["MT_SCREENSHOT_DOCUMENT"])
    finally:
        browser.quit()
        running.stop()


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason=NO_BROWSER)
def test_the_web_pages_document_mode_translates_an_uploaded_word_file_for_download(
    trained, corpus, tmp_path
):
    webdriver = pytest.importorskip("selenium.webdriver")
    docx = pytest.importorskip("docx")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from mt_cli import Translator
    from mt_cli.serve.web_app import create_app

    translator = Translator.load(trained[1] / "run" / "best.pt", device="cpu")
    document = docx.Document()
    paragraph = document.add_paragraph(corpus[0][0] + " ")
    paragraph.add_run(corpus[0][1]).bold = True
    document.save(tmp_path / "brief.docx")
    expected = translator.translate_document(
        (tmp_path / "brief.docx").read_bytes(), "docx", source_lang="de"
    )
    running = Running(create_app(lambda: translator, "best.pt"))
    browser = _chrome(webdriver, Service)
    try:
        _document_mode(browser, running.url)
        assert ".docx" in browser.find_element(By.ID, "doc-file").get_attribute("accept")
        browser.find_element(By.ID, "doc-file").send_keys(str(tmp_path / "brief.docx"))
        browser.find_element(By.ID, "doc-translate").click()
        link = WebDriverWait(browser, 60).until(
            lambda b: b.find_element(By.ID, "doc-download").get_attribute("href")
        )
        with urllib.request.urlopen(link, timeout=60) as answer:
            data = answer.read()
        assert data == expected
        assert any(run.bold for run in docx.Document(io.BytesIO(data)).paragraphs[0].runs)
    finally:
        browser.quit()
        running.stop()
