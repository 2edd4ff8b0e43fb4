"""Paragraphs: each split into sentences, its protected spans masked, every sentence of every
paragraph translated in one batch, and each paragraph put back together with its own spacing.
Every document type hands its running text to this module."""

from __future__ import annotations

from collections.abc import Sequence

from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.protect import Masked, Protector
from mt_cli.documents.sentences import Sentence, split
from mt_cli.scripts import is_mostly_cjk


def translate_sentences(
    engine: AlignedTranslator, sentences: Sequence[str], protector: Protector | None
) -> list[str]:
    """Sentences translated in one batch, each protected span coming through exactly once."""
    if protector is None:
        return [a.text for a in engine.translate_aligned(sentences)]
    masked = [protector.mask(s) for s in sentences]
    found = engine.translate_aligned([m.text for m in masked])
    return [_restored(protector, a.text, m) for a, m in zip(found, masked)]


def _restored(protector: Protector, translation: str, masked: Masked) -> str:
    return protector.restore(translation, masked) if masked.spans else translation


def translate_paragraphs(
    engine: AlignedTranslator, paragraphs: Sequence[str], lang: str, protector: Protector | None
) -> list[str]:
    """Each paragraph's translation, sentence by sentence; `lang` is the source language, whose
    rules the sentence splitter follows. Whitespace around and between sentences is kept."""
    split_up = [split(p, lang) if p.strip() else [] for p in paragraphs]
    sources = [s.text for sentences in split_up for s in sentences if s.text]
    found = iter(translate_sentences(engine, sources, protector))
    out = []
    for paragraph, sentences in zip(paragraphs, split_up):
        if not sentences:
            out.append(paragraph)  # nothing to translate: whitespace (or nothing) as it was
            continue
        out.append(join([(s, next(found) if s.text else "") for s in sentences]))
    return out


def join(translated: list[tuple[Sentence, str]]) -> str:
    """A paragraph's translations with the source's spacing. Between two sentences written without
    a space (Chinese, Japanese) a space goes in when the translations are not such a script; between
    two translations in such a script, spaces alone (no line break) go."""
    out = []
    for k, (s, target) in enumerate(translated):
        trail = s.trail
        if k + 1 < len(translated) and target and translated[k + 1][1]:
            both_cjk = is_mostly_cjk([target]) and is_mostly_cjk([translated[k + 1][1]])
            if not trail and not both_cjk:
                trail = " "
            elif both_cjk and not trail.strip(" "):
                trail = ""
        out.append(s.lead + target + trail)
    return "".join(out)
