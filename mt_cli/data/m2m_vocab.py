"""The tokenizer of an imported M2M100 or NLLB-200 model: one SentencePiece model, fairseq's
dictionary of ids, and a token per language.

Both split a line with their SentencePiece model and map each piece to the id fairseq's
dictionary gives it (<s> 0, <pad> 1, </s> 2, <unk> 3, then the pieces; a piece that is not there
is <unk>). The languages are tokens after the pieces: M2M100 spells them __de__, NLLB-200 names
them by ISO 639-3 code and script, deu_Latn. A source line is [source language] pieces </s>
(NLLB's legacy layout: pieces </s> [source language]); the decoder starts from </s> and reads the
target language next, so the translation follows it.

The ids are permuted to mt's fixed special ids as MarianVocab does (data/marian_vocab.py), and
the state keeps the vocabulary in the model's own order and the tokenizer files as they came, so
that export writes back exactly what was imported.
"""

from __future__ import annotations

from typing import Any

from mt_cli.data.language_tokens import LanguageTokens
from mt_cli.data.languages import resolve_language
from mt_cli.data.marian_vocab import MarianVocab
from mt_cli.data.tokenizer import UNK
from mt_cli.errors import MtError


class M2MVocab(MarianVocab):
    """state: {"spm": bytes, "vocab": [piece by model id], "specials": {"pad", "unk", "eos"},
    "languages": {code: piece}, "hidden": [pieces never shown: <s>, <mask>, unused rows],
    "legacy": NLLB's legacy source layout, "flavour": "m2m100" | "nllb", "files": {name: bytes}}."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.m2m = state
        super().__init__(
            {
                "source_spm": state["spm"],
                "target_spm": state["spm"],
                "specials": state["specials"],
                "vocab": state["vocab"],
                "target_vocab": None,
            }
        )
        ids = self._src[0]
        missing = [p for p in state["languages"].values() if p not in ids]
        if missing:
            raise MtError(f"the vocabulary lacks the language token(s) {', '.join(missing[:5])}")
        self.codes: dict[str, int] = {
            code: ids[piece] for code, piece in state["languages"].items()
        }
        # Never text: the language tokens (a random or confused model may write one anywhere), <s>,
        # <mask>, and rows past the tokenizer's pieces, as transformers' decode skips them.
        self._special_pieces |= set(state["languages"].values()) | set(state["hidden"])
        self.legacy = bool(state.get("legacy", False))

    def __reduce__(self) -> tuple[type, tuple[dict[str, Any]]]:  # type: ignore[override]
        return (M2MVocab, (self.m2m,))

    def _encode(self, line: str, sp: Any, side: tuple[dict[str, int], list[str]]) -> list[int]:
        ids = side[0]  # no >>xx<< on these models: a line is all text
        return [ids.get(p, UNK) for p in sp.encode(line, out_type=str)]

    def target_tags(self) -> dict[str, int]:
        return {}  # the target language is read by the decoder, not tagged on the source

    def languages(self) -> tuple[list[str], list[str]]:
        return list(self.codes), list(self.codes)

    def language_tokens(self, source: str = "", target: str = "") -> LanguageTokens:
        """The source language before the line (after it, legacy) and the target language after
        the decoder's start: both must be named, as the model's codes or ISO 639-1 (de)."""
        for given, side in ((source, "source"), (target, "target")):
            if not given:
                shown = ", ".join(list(self.codes)[:12])
                langs = f"{len(self.codes)} languages ({shown}, ...)"
                raise MtError(
                    f"the model translates between {langs}; name the {side} language ({side}_lang)"
                )
        src = self.codes[resolve_language(source, list(self.codes), "source language")]
        tgt = self.codes[resolve_language(target, list(self.codes), "target language")]
        if self.legacy:
            return LanguageTokens(source_end=(src,), start=(tgt,))
        return LanguageTokens(source=(src,), start=(tgt,))

    def to_state(self) -> dict[str, Any]:
        return {"kind": "m2m100", **self.m2m}
