"""Protected spans: placeholders, URLs, e-mail addresses and a user's pattern are never translated
and come out exactly once, whatever the model does with the placeholders standing in for them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mt_cli import Translator
from mt_cli.cli import app
from mt_cli.documents.aligned import Aligned
from mt_cli.documents.paragraphs import translate_sentences
from mt_cli.documents.protect import Protector
from mt_cli.errors import MtError

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode"
SPANS = [
    "%s",
    "%(name)s",
    "%1$d",
    "{count}",
    "{0}",
    "https://example.org/a?b=1&c=%20x",
    "www.example.com/docs",
    "anna.schmidt@example.de",
    "%-5.2f",
    "{{user}}",
    "TICKET-4711",
]


def test_each_kind_of_span_is_found_and_a_percent_sign_in_prose_is_not():
    p = Protector(r"TICKET-\d+")
    for span in SPANS:
        assert p.mask(f"Sende {span} jetzt.").spans == (span,), span
    assert p.mask("20% Rabatt und 5 % mehr, 100%ig.").spans == ()
    # the full stop ends the sentence
    assert p.mask("Siehe https://x.org/a.").spans == ("https://x.org/a",)


def test_a_placeholder_dropped_or_repeated_by_the_model_comes_out_exactly_once():
    p = Protector()
    masked = p.mask("Schick %s an {name} heute.")
    a, b = masked.markers
    assert p.restore(f"Send {a} {a} to {b} {a} today.", masked) == "Send %s to {name} today."
    dropped = p.restore("Send it today.", masked)
    assert dropped.count("%s") == 1 and dropped.count("{name}") == 1
    assert dropped.index("%s") < dropped.index("{name}")  # in the order the source had them


def test_a_number_in_the_sentence_never_collides_with_a_placeholder():
    masked = Protector().mask("Zimmer 7001 und %s")
    assert "7001" not in masked.markers
    assert Protector().restore("Room 7001 and " + masked.markers[0], masked) == "Room 7001 and %s"


def _lines(n: int) -> list[str]:
    """n German sentences, each with one to three different protected spans in varied places."""
    rng = random.Random(4)
    sentences = (FIXTURE / "src.txt").read_text(encoding="utf-8").splitlines()
    out = []
    for i in range(n):
        words = sentences[i % len(sentences)].split()
        for span in rng.sample(SPANS, rng.randint(1, 3)):
            words.insert(rng.randint(0, len(words)), span)
        out.append(" ".join(words))
    return out


def test_500_lines_with_mixed_spans_keep_every_span_exactly_once_through_mt_translate(tmp_path):
    lines = _lines(500)
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["translate", "--checkpoint", str(FIXTURE / "model.pt"), str(src), "--output", str(out)]
    result = CliRunner().invoke(app, [*args, "--protect-pattern", r"TICKET-\d+"])
    assert result.exit_code == 0, result.output
    got = out.read_text(encoding="utf-8").splitlines()
    assert len(got) == 500
    for line, translated in zip(lines, got):
        for span in SPANS:
            assert translated.count(span) == line.count(span), (line, translated, span)


def test_paragraphs_keep_their_spans_too_and_the_model_reads_placeholders_not_spans():
    tr = Translator.load(FIXTURE / "model.pt", device="cpu", beam=3)
    text = " ".join(_lines(6))
    out = tr.translate_document(text, "text", protect_pattern=r"TICKET-\d+")
    for span in SPANS:
        assert out.count(span) == text.count(span)

    class Asked:
        lines: list = []

        def translate_aligned(self, lines, alignment=False):
            Asked.lines = lines
            return [Aligned(line) for line in lines]

    assert translate_sentences(Asked(), ["Zu %s und {n}."], Protector()) == ["Zu %s und {n}."]
    assert Asked.lines == ["Zu 7001 und 7002."]


def test_without_protection_the_model_reads_the_spans_as_they_are():
    class Echo:
        seen: list[str] = []

        def translate_aligned(self, lines, alignment=False):
            Echo.seen += lines
            return [Aligned(line) for line in lines]

    from mt_cli.config import DocumentConfig
    from mt_cli.documents import translate_document

    translate_document(Echo(), "Zu %s.\n", "lines", DocumentConfig(protect=False), "de")
    assert Echo.seen == ["Zu %s."]


def test_a_pattern_that_does_not_compile_is_one_clear_error(tmp_path):
    with pytest.raises(MtError, match=r"document.protect_pattern '\(' is not a regular expression"):
        Protector("(")
    src = tmp_path / "in.txt"
    src.write_text("Hallo.\n", encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [
            "translate",
            "--checkpoint",
            str(FIXTURE / "model.pt"),
            str(src),
            "--protect-pattern",
            "(",
        ],
    )
    assert result.exit_code != 0
    assert "--protect-pattern '(' is not a regular expression" in result.output
    assert "Traceback" not in result.output
