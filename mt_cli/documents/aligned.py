"""What documents need of a translator, and alignments in characters.

documents/ knows formats, not models: it takes any `AlignedTranslator`, which `Translator` is. An
alignment comes as character spans, so tags and protected spans can be put back around the words
they cover whatever the tokenizer cut the words into."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

Span = tuple[int, int]  # [start, end) in characters


@dataclass(frozen=True)
class Aligned:
    """One sentence's translation and, when asked for, its alignment: for each target piece (and
    the end of the sentence, last) its span in `text` and the source span it attends to most."""

    text: str
    # target pieces in `text`, then an empty span at its end
    tgt_spans: list[Span] = field(default_factory=list)
    # for each entry of tgt_spans: its source span
    src_spans: list[Span] = field(default_factory=list)


class AlignedTranslator(Protocol):
    def translate_aligned(self, lines: Sequence[str], alignment: bool = False) -> list[Aligned]:
        """One translation per line (blank: ""); with `alignment`, its spans filled."""
        ...


def _visible(piece: str) -> int:
    """How many non-space characters of the text a piece stands for: "<unk>" decodes to one, a
    control piece (</s>, >>de<<) to none."""
    if piece == "<unk>":
        return 1
    if (piece.startswith("<") and piece.endswith(">") and len(piece) > 2) or (
        piece.startswith(">>") and piece.endswith("<<")
    ):
        return 0 if not piece.startswith("<0x") else 1
    return len("".join(piece.replace("\u2581", " ").split()))


def piece_spans(pieces: Sequence[str], text: str) -> list[Span]:
    """Where each piece of `text` lies in it. Pieces mark spaces (SentencePiece's "▁"), not
    characters, so they are laid over the text's non-space characters one by one; where the
    tokenizer normalised the text into more or fewer characters, in proportion."""
    counts = [_visible(p) for p in pieces]
    chars = [i for i, c in enumerate(text) if not c.isspace()]
    total = sum(counts)
    if not chars:
        return [(0, 0)] * len(pieces)
    out, done = [], 0
    for count in counts:
        lo, done = done, done + count
        a, b = (
            (lo, done)
            if total == len(chars)
            else (lo * len(chars) // max(total, 1), done * len(chars) // max(total, 1))
        )
        out.append(
            (chars[a], chars[b - 1] + 1)
            if b > a
            else (chars[min(a, len(chars) - 1)], chars[min(a, len(chars) - 1)])
        )
    return out
