"""Sentence splitting: a paragraph into the sentences the model was trained on.

sentencex (Wikimedia's splitter, with per-language rules for some 250 languages and no data to
download) does the work; benchmarks/sentence_split.py compares it with pysbd on joined WMT
segments: the same share of boundaries found, 150-500 times faster (its one measured weakness:
French "M. Snowden" is cut after the honorific). Each piece keeps the
whitespace that followed it, so the pieces put together are the paragraph, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import sentencex

from mt_cli.errors import MtError


@dataclass(frozen=True)
class Sentence:
    text: str  # the sentence, without the whitespace around it
    lead: str  # whitespace before it (only the paragraph's first sentence has any)
    trail: str  # whitespace after it, up to the next sentence


def split(paragraph: str, lang: str) -> list[Sentence]:
    """The paragraph's sentences in order; "".join(s.lead + s.text + s.trail) == paragraph."""
    if not lang or not lang.isascii() or not lang.replace("-", "").isalnum():
        raise MtError(f"source language {lang!r}: give a language code such as de, en or zh")
    out: list[Sentence] = []
    pending = ""  # whitespace not yet given to a sentence
    for piece in sentencex.segment(lang, paragraph):
        text = piece.strip()
        if not text:
            pending += piece
            continue
        start = piece.index(text)
        lead, trail = pending + piece[:start], piece[start + len(text) :]
        pending = ""
        if out:  # whitespace between two sentences trails the first of them
            out[-1] = Sentence(out[-1].text, out[-1].lead, out[-1].trail + lead)
            lead = ""
        out.append(Sentence(text, lead, trail))
    if pending:  # whitespace after the last sentence, or a paragraph of whitespace alone
        if out:
            out[-1] = Sentence(out[-1].text, out[-1].lead, out[-1].trail + pending)
        else:
            out.append(Sentence("", pending, ""))
    return out
