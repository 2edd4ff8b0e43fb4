"""Writing systems (Unicode scripts) of text: Chinese, Japanese and Korean text needs a
SentencePiece character coverage below 1.0 and sacreBLEU's zh tokenizer."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable


def is_cjk(ch: str) -> bool:
    """Is this a Chinese, Japanese or Korean character (written without spaces between words)?"""
    return unicodedata.name(ch, "").startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL"))


def is_mostly_cjk(lines: Iterable[str], sample_chars: int = 200_000) -> bool:
    """True when over a third of the letters are CJK; those scripts need coverage below 1.0."""
    cjk = letters = 0
    for line in lines:
        for ch in line:
            if ch.isalpha():
                letters += 1
                cjk += is_cjk(ch)
        if letters >= sample_chars:
            break
    return letters > 0 and cjk / letters > 1 / 3
