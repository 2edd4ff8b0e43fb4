"""One sentence per line, as `mt translate` has always read: each line translated alone, never
split or joined, with its protected spans carried through."""

from __future__ import annotations

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.paragraphs import translate_sentences
from mt_cli.documents.protect import Protector


def translate_lines(
    engine: AlignedTranslator,
    text: str,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> str:
    """Line k of the output translates line k of the input; the line endings are the input's."""
    lines = text.splitlines(keepends=True)
    bodies = [line.rstrip("\r\n") for line in lines]
    found = translate_sentences(engine, bodies, protector)
    return "".join(t + line[len(b) :] for t, line, b in zip(found, lines, bodies))
