"""The tokenizer of an imported Hugging Face Marian (OPUS-MT) model: two SentencePiece models
(source.spm, target.spm) and a vocab.json id space of their own, read as MarianTokenizer reads them.

MarianTokenizer splits a leading `>>xx<<` language token off the source line, encodes the rest
with the source SentencePiece model into pieces, maps each piece to its vocab.json id (a piece
that is not there is <unk>) and appends </s>. Decoding maps ids back to pieces, drops the special
ones (<pad>, </s>, <unk>) and joins the rest with SentencePiece (the source model when the two
sides share one vocabulary, as MarianTokenizer does, the target model otherwise).

mt's search and training know PAD, UNK, BOS and EOS by fixed ids (0-3). So the Marian ids are
permuted once: <pad> becomes 0, <unk> 1, </s> 3, the lowest other id 2, the rest keep their order
from 4 on; the import permutes the embedding rows the same way, and export undoes it. The state
keeps the vocabulary in Marian's own order, so export writes back exactly what was imported.
"""

from __future__ import annotations

import re
from typing import Any

from mt_cli.data.language_tokens import LanguageTokens
from mt_cli.data.tokenizer import EOS, PAD, UNK, Tokenizer
from mt_cli.errors import MtError

SPECIALS = ("pad", "unk", "eos")


def mt_order(vocab: list[str], specials: dict[str, str]) -> list[int]:
    """Marian ids in mt id order: position i holds the Marian id of mt id i."""
    ids = {p: i for i, p in enumerate(vocab)}
    missing = [f"{k} {v!r}" for k, v in specials.items() if v not in ids]
    if missing:
        raise MtError(
            f"vocab.json lacks the special token(s) {', '.join(missing)} that "
            "tokenizer_config.json names"
        )
    pad, unk, eos = (ids[specials[k]] for k in SPECIALS)
    rest = [i for i in range(len(vocab)) if i not in (pad, unk, eos)]
    order = [pad, unk, rest[0], eos, *rest[1:]]
    assert (order[PAD], order[UNK], order[EOS]) == (pad, unk, eos)
    return order


class MarianVocab(Tokenizer):
    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__(state["source_spm"], state["target_spm"])
        self.state = state
        self.specials: dict[str, str] = dict(state["specials"])
        self.separate = state.get("target_vocab") is not None
        self.joint = not self.separate  # one id space (and one embedding matrix) for both sides
        self.src_vocab: list[str] = list(state["vocab"])
        self.tgt_vocab: list[str] = list(state["target_vocab"]) if self.separate else self.src_vocab
        self._src = self._side(self.src_vocab)
        self._tgt = self._side(self.tgt_vocab) if self.separate else self._src
        # MarianTokenizer decodes with the source model unless the vocabularies are separate.
        self._decoder = self.tgt if self.separate else self.src
        self._special_pieces = set(self.specials.values())

    def _side(self, vocab: list[str]) -> tuple[dict[str, int], list[str]]:
        """(piece -> mt id, mt id -> piece) for one side's vocabulary."""
        order = mt_order(vocab, self.specials)
        pieces = [vocab[m] for m in order]
        return {p: i for i, p in enumerate(pieces)}, pieces

    def __reduce__(self) -> tuple[type, tuple[dict[str, Any]]]:  # type: ignore[override]
        return (MarianVocab, (self.state,))

    @property
    def src_vocab_size(self) -> int:
        return len(self.src_vocab)

    @property
    def tgt_vocab_size(self) -> int:
        return len(self.tgt_vocab)

    def _encode(self, line: str, sp: Any, side: tuple[dict[str, int], list[str]]) -> list[int]:
        code = []
        if line.startswith(">>") and (end := line.find("<<")) != -1:  # a target-language token
            code, line = [line[: end + 2]], line[end + 2 :]
        ids = side[0]
        return [ids.get(p, UNK) for p in code + sp.encode(line, out_type=str)]

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        return [self._encode(line, self.src, self._src) + [EOS] for line in lines]

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return [self._encode(line, self.tgt, self._tgt) for line in lines]

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        pieces = self._tgt[1]
        out = []
        for row in ids:
            kept = [pieces[i] for i in row if i != PAD and pieces[i] not in self._special_pieces]
            out.append(self._decoder.decode_pieces(kept).replace("\u2581", " ").strip())
        return out

    def src_pieces(self, line: str) -> list[str]:
        return [self._src[1][i] for i in self.encode_src([line])[0]]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self._tgt[1][i] for i in ids]

    def vocabulary(self, side: str) -> list[str]:
        return list((self._src if side == "source" else self._tgt)[1])

    # a multi-target model's target tokens: >>de<<, >>por_BR<<
    TAG = re.compile(r">>([A-Za-z0-9_-]+)<<")

    def language_tokens(self, source: str = "", target: str = "") -> LanguageTokens:
        """As Tokenizer's, but with no target a multi-target model is left to choose (as OPUS-MT's
        own tools do), and a line's own >>xx<< decides for it."""
        return super().language_tokens(source, target) if target else LanguageTokens()

    def to_state(self) -> dict[str, Any]:
        return {"kind": "marian", **self.state}
