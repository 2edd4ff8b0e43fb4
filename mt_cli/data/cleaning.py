"""Rules that keep a training pair out of a corpus, each a pure function of one pair (`mt clean`).

The rules follow the filters OpusFilter and Mozilla's translation pipeline run before training:
pairs with an empty side, too long or of very unequal lengths, copies of the source, numbers or
URLs that one side lacks, mostly symbols, the wrong script for the language, and near-exact
duplicates. Language identification and a model's score need a model, so tools/clean.py runs
them; duplicates need the whole corpus, so it finds them too, from `pair_key`.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from mt_cli.config.pipeline import CleanConfig
from mt_cli.data.languages import short_code
from mt_cli.data.text import has_empty_side

# The scripts a language is written in, by the first word of its letters' Unicode names; a
# language not listed here is not checked. Japanese mixes kana and Han; Korean may use Han.
_SCRIPTS = {
    **dict.fromkeys(("ar", "fa", "ur", "ps"), {"ARABIC"}),
    **dict.fromkeys(("ru", "uk", "bg", "sr", "mk", "be", "kk", "ky", "mn", "tg"), {"CYRILLIC"}),
    "el": {"GREEK"},
    "he": {"HEBREW"},
    "yi": {"HEBREW"},
    "hy": {"ARMENIAN"},
    "ka": {"GEORGIAN"},
    **dict.fromkeys(("hi", "mr", "ne"), {"DEVANAGARI"}),
    "bn": {"BENGALI"},
    "ta": {"TAMIL"},
    "te": {"TELUGU"},
    "gu": {"GUJARATI"},
    "kn": {"KANNADA"},
    "ml": {"MALAYALAM"},
    "pa": {"GURMUKHI"},
    "si": {"SINHALA"},
    "th": {"THAI"},
    "lo": {"LAO"},
    "km": {"KHMER"},
    "my": {"MYANMAR"},
    "am": {"ETHIOPIC"},
    "zh": {"CJK"},
    "ja": {"CJK", "HIRAGANA", "KATAKANA"},
    "ko": {"HANGUL", "CJK"},
}
_LATIN = (
    "af az ca cs cy da de en eo es et eu fi fr ga gl hr hu id is it lt lv ms mt nl no nb nn pl "
    "pt ro sk sl sq sv sw tl tr uz vi"
).split()
_SCRIPTS.update(dict.fromkeys(_LATIN, {"LATIN"}))

_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"]+", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
# kana, Han, Hangul
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@functools.lru_cache(maxsize=1 << 16)
def script_of(ch: str) -> str:
    """The script of a letter, as the first word of its Unicode name (LATIN, CYRILLIC, CJK)."""
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else ""


def expected_scripts(lang: str) -> set[str] | None:
    """The scripts `lang` (de, zh, deu_Latn, pt_BR) is written in; None for a language not
    listed."""
    return _SCRIPTS.get(short_code(lang).lower())


def units(text: str) -> int:
    """A side's length for the length and ratio rules: whitespace-separated words, with 3 kana, Han
    or Hangul characters counted as 2 words (Chinese and Japanese put no spaces between words, and
    a Chinese sentence has about 1.5 characters for each English word)."""
    wide = len(_WIDE.findall(text))
    return (2 * wide + 2) // 3 + len(_WIDE.sub(" ", text).split())


def normalise(text: str) -> str:
    """The text two near-exact duplicates share: NFKC, case-folded, letters and digits only."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def pair_key(src: str, tgt: str) -> int:
    """A 64-bit hash of a pair's normalised sides: pairs with one key are duplicates (a false match
    between different pairs is a 1-in-2^64 chance per pair of pairs)."""
    digest = hashlib.blake2b(f"{normalise(src)}\0{normalise(tgt)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True)
class Sides:
    """A pair and its languages ("" where unknown), as the rules read it."""

    src: str
    tgt: str
    src_lang: str = ""
    tgt_lang: str = ""


def _empty(p: Sides, c: CleanConfig) -> bool:
    return has_empty_side(p.src, p.tgt)


def _length(p: Sides, c: CleanConfig) -> bool:
    return max(units(p.src), units(p.tgt)) > c.max_words


def _ratio(p: Sides, c: CleanConfig) -> bool:
    a, b = units(p.src) + 1, units(p.tgt) + 1  # +1: one word against three is no misalignment
    return max(a, b) / min(a, b) > c.max_ratio


def _copy(p: Sides, c: CleanConfig) -> bool:
    src = normalise(p.src)
    return bool(src) and not src.isdigit() and src == normalise(p.tgt)


def _numbers(p: Sides, c: CleanConfig) -> bool:
    """The digit runs differ: 3,5 and 3.5 (or 1 000 and 1,000) agree, 3 and 4 do not."""
    return sorted(_DIGITS.findall(p.src)) != sorted(_DIGITS.findall(p.tgt))


def _urls(p: Sides, c: CleanConfig) -> bool:
    return sorted(_URL.findall(p.src)) != sorted(_URL.findall(p.tgt))


def symbol_ratio(text: str) -> float:
    """The share of a text's characters (spaces aside) that are neither letters nor digits."""
    chars = [ch for ch in text if not ch.isspace()]
    return sum(not ch.isalnum() for ch in chars) / len(chars) if chars else 0.0


def _symbols(p: Sides, c: CleanConfig) -> bool:
    return max(symbol_ratio(p.src), symbol_ratio(p.tgt)) > c.max_symbol_ratio


def script_ratio(text: str, scripts: set[str]) -> float:
    """The share of a text's letter runs written in one of `scripts` (1.0 for a text without
    letters). A run is a word of one script, or one kana, Han or Hangul character: so a name in
    Latin letters weighs in a Chinese sentence as one of its characters does (Tom游泳: 2 of 3)."""
    runs: list[str] = []
    last = ""
    for ch in text:
        script = script_of(ch) if ch.isalpha() else ""
        if script and (script != last or _WIDE.match(ch)):
            runs.append(script)
        last = script
    return sum(r in scripts for r in runs) / len(runs) if runs else 1.0


def _script(p: Sides, c: CleanConfig) -> bool:
    for text, lang in ((p.src, p.src_lang), (p.tgt, p.tgt_lang)):
        scripts = expected_scripts(lang) if lang else None
        if scripts is not None and script_ratio(text, scripts) < c.min_script_ratio:
            return True
    return False


PAIR_RULES: dict[str, Callable[[Sides, CleanConfig], bool]] = {
    "empty": _empty,
    "length": _length,
    "ratio": _ratio,
    "copy": _copy,
    "numbers": _numbers,
    "urls": _urls,
    "symbols": _symbols,
    "script": _script,
}


def first_rule(pair: Sides, cfg: CleanConfig) -> str:
    """The first of the pair rules cfg.rules turns on that removes `pair`, or "" when it stays."""
    if _empty(pair, cfg):  # every other rule reads both sides
        return "empty" if "empty" in cfg.rules else ""
    return next(
        (name for name, rule in PAIR_RULES.items() if name in cfg.rules and rule(pair, cfg)), ""
    )
