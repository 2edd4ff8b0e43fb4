"""A translator's way to documents: each line's best translation with, where asked, the
character spans its pieces cover and the source span each attends to most (documents/aligned.py's
AlignedTranslator), and a whole document through documents/."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mt_cli.config import DecodeConfig, DocumentConfig
from mt_cli.data.languages import short_code
from mt_cli.decode.glossary import Glossary
from mt_cli.decode.hypothesis import Hypothesis, Request
from mt_cli.decode.scoring import Forced, align
from mt_cli.documents.aligned import Aligned, piece_spans
from mt_cli.errors import MtError
from mt_cli.model.transformer import Transformer

if TYPE_CHECKING:  # the Translator calls this module; here it is only a type
    from mt_cli.decode.translator import Translator


def with_alignment(
    model: Forced, cfg: DecodeConfig, src_ids: list[list[int]], found: list[list[Hypothesis]]
) -> list[list[Hypothesis]]:
    """Each hypothesis with its alignment: per output piece, the source piece the last layer
    attends to most."""
    if not isinstance(model, Transformer):
        raise MtError(
            "output.alignment reads one model's attention; it does not combine with an ensemble"
        )
    flat = [(s, h) for s, hyps in zip(src_ids, found) for h in hyps]
    links = iter(align(model, [s for s, _ in flat], [h.tokens for _, h in flat], cfg))
    return [[dataclasses.replace(h, alignment=next(links)) for h in hyps] for hyps in found]


def translate_document(
    tr: Translator,
    text: str | bytes,
    kind: str = "text",
    glossary: Glossary | None = None,
    **options: Any,
) -> str | bytes:
    """Translator.translate_document: the document through documents/, its sentences split by
    the source language's rules (the given one, else the one detected or the checkpoint's)."""
    from mt_cli.documents import translate_document as translate

    cfg = DocumentConfig(**{"input_type": kind, **options})
    given = cfg.source_lang
    if given not in ("", "auto"):
        lang = given
    elif isinstance(text, str):
        lang = tr.direction.document_language(text)
    else:  # an office file: its text is inside the package; the model's language, where it has one
        lang = "" if tr.direction.source == "auto" else tr.source_lang
    engine = tr if glossary is None else _Glossed(tr, glossary)
    return translate(engine, text, kind, cfg, short_code(lang or "en"))


def translate_aligned(
    tr: Translator, lines: Sequence[str], alignment: bool = False, glossary: Glossary | None = None
) -> list[Aligned]:
    """Translator.translate_aligned: the best hypothesis of each line, in character spans."""
    terms = [glossary.terms_for(line) for line in lines] if glossary is not None else None
    requests = tr.requests(lines, None, terms)
    # only the best is aligned
    found = tr.search_requests(requests, nbest=1, alignment=alignment)
    if not alignment:
        return [Aligned(hyps[0].text) for hyps in found]
    return [_spans(tr, line, r, hyps[0]) for line, r, hyps in zip(lines, requests, found)]


def _spans(tr: Translator, line: str, request: Request | None, h: Hypothesis) -> Aligned:
    """A hypothesis's alignment as character spans of the line and of its text."""
    if request is None or not h.tokens:
        return Aligned(h.text)
    # + EOS
    src = piece_spans(tr.tokenizer.src_pieces(line)[:-1], line) + [(len(line), len(line))]
    skip = len(request.src) - len(src)  # a >>xx<< token before the line, read too
    tgt = piece_spans(tr.tokenizer.tgt_pieces(h.tokens), h.text) + [(len(h.text), len(h.text))]
    links = [src[min(max(k - skip, 0), len(src) - 1)] for k in h.alignment]
    return Aligned(h.text, tgt, links)


class _Glossed:
    """An AlignedTranslator (documents/aligned.py) that translates every sentence with the
    glossary's terms it holds."""

    def __init__(self, tr: Translator, glossary: Glossary) -> None:
        self.tr, self.glossary = tr, glossary

    def translate_aligned(self, lines: Sequence[str], alignment: bool = False) -> list[Aligned]:
        return translate_aligned(self.tr, lines, alignment, self.glossary)
