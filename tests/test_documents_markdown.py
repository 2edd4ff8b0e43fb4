"""Markdown documents: the text translated, the block structure (as markdown-it parses it) as it
was, and code, link targets, URLs, HTML and front matter byte for byte."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from mt_cli import Translator
from mt_cli.config import DocumentConfig
from mt_cli.documents import translate_document
from mt_cli.documents.aligned import Aligned

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "decode"
REAL = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


class Reverse:
    """A scripted engine: the source words in reverse order, upper-cased, each aligned to itself."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def translate_aligned(self, lines, alignment=False):
        out = []
        for line in lines:
            self.asked.append(line)
            words = [m.span() for m in re.finditer(r"\S+", line)]
            text, tgt, src = "", [], []
            for a, b in reversed(words):
                text += " " if text else ""
                tgt.append((len(text), len(text) + b - a))
                src.append((a, b))
                text += line[a:b].upper()
            out.append(
                Aligned(text, [*tgt, (len(text), len(text))], [*src, (len(line), len(line))])
            )
        return out


def _markdown(engine, text: str) -> str:
    return translate_document(engine, text, "markdown", DocumentConfig(), "de")


def _blocks(text: str) -> list[tuple]:
    """The block structure: every block token's type, nesting and level (fences and HTML blocks
    with their content)."""
    keep = ("fence", "code_block", "html_block")
    return [
        (t.type, t.nesting, t.level, t.info, t.content if t.type in keep else "")
        for t in MD.parse(text)
    ]


def _untouchable(text: str) -> list[str]:
    """What must come through as it was: inline code, link and image targets, inline HTML."""
    out = []
    for t in MD.parse(text):
        for c in t.children or []:
            if c.type in ("code_inline", "html_inline"):
                out.append(c.content)
            elif c.type in ("link_open", "image"):
                out.append(str(c.attrs.get("href") or c.attrs.get("src")))
    return sorted(out)


@pytest.fixture(scope="module")
def model() -> Translator:
    return Translator.load(FIXTURE / "model.pt", device="cpu")


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_documents_keep_their_block_structure_code_and_link_targets(model, path):
    source = path.read_text(encoding="utf-8")
    out = model.translate_document(source, "markdown")
    assert _blocks(out) == _blocks(source)
    assert _untouchable(out) == _untouchable(source)
    assert out != source  # it did translate


def test_emphasis_links_and_table_cells_go_around_the_words_they_covered():
    source = (
        "# Ein *Hund* bellt\n\n"
        'Ein **großer** Mann fährt [mit dem Rad](https://example.org/a_(b) "T") heim.\n\n'
        "| Spalte | Andere |\n|---|---|\n| Ein Hund | Zwei [Katzen][k] |\n\n"
        "[k]: https://katze.example\n"
    )
    out = _markdown(Reverse(), source)
    assert out == (
        "# BELLT *HUND* EIN\n\n"
        'HEIM. [RAD DEM MIT](https://example.org/a_(b) "T") FÄHRT MANN **GROSSER** EIN\n\n'
        "| SPALTE | ANDERE |\n|---|---|\n| HUND EIN | [KATZEN][k] ZWEI |\n\n"
        "[k]: https://katze.example\n"
    )


def test_code_html_front_matter_and_container_markers_stay_as_they_were():
    source = (
        "---\ntitle: Ein Titel\n---\n"
        "> Führe `ls -l` aus\n> und <b>lies</b> <http://x.org>.\n\n"
        "```python\nprint('nicht übersetzen')\n```\n\n"
        "    eingerückter Code\n\n"
        "<div>\nHTML bleibt.\n</div>\n\n"
        "- Eins\n  weiter\n- Zwei\n"
    )
    engine = Reverse()
    out = _markdown(engine, source)
    assert out.startswith("---\ntitle: Ein Titel\n---\n")
    assert "```python\nprint('nicht übersetzen')\n```" in out and "    eingerückter Code\n" in out
    assert "<div>\nHTML bleibt.\n</div>" in out
    assert "`ls -l`" in out and "<http://x.org>" in out and re.search(r"<b>[A-Z]+</b>", out)
    lines = out.splitlines()
    # the paragraph keeps its two lines
    assert lines[3].startswith("> ") and lines[4].startswith("> ")
    # list item text rewrapped over the same markers:
    assert "- EINS\n  WEITER\n- ZWEI\n" not in out
    assert re.search(r"- WEITER\n  EINS\n- ZWEI\n", out)
    assert not any("Titel" in a or "nicht" in a or "HTML" in a for a in engine.asked)
    assert _blocks(out) == _blocks(source)


def test_a_translation_shorter_than_its_lines_drops_lines_but_stays_one_paragraph():
    class Short:
        def translate_aligned(self, lines, alignment=False):
            return [Aligned("Kurz.") for _ in lines]

    source = "- eins zwei\n  drei vier\n  fünf sechs\n- sieben\n"
    out = _markdown(Short(), source)
    assert out == "- Kurz.\n- Kurz.\n"
    assert _blocks(out)[:3] == _blocks(source)[:3]


def test_markdown_syntax_in_a_translation_is_escaped():
    class Starry:
        def translate_aligned(self, lines, alignment=False):
            return [Aligned("a *b* [c] `d`") for _ in lines]

    out = _markdown(Starry(), "Ein Satz.\n")
    assert out == "a \\*b\\* \\[c\\] \\`d\\`\n"
    assert [c.type for c in MD.parseInline(out.strip())[0].children] == ["text"]


def test_a_protected_url_in_text_comes_out_as_it_was_not_escaped():
    out = _markdown(Reverse(), "Siehe https://x.org/a_b_c und %s jetzt.\n")
    assert out == "JETZT. %s UND https://x.org/a_b_c SIEHE\n"
