"""Requests: each line, with its prefix and terms, turned once into what search takes (decode
/hypothesis.py's Request: source ids, prefix ids, term ids, a sampling key) and checked once, so
that `mt translate`, the server and the Python API refuse the same things with the same words."""

from __future__ import annotations

from collections.abc import Sequence

from mt_cli.config import DecodeConfig
from mt_cli.data.language_tokens import LanguageTokens
from mt_cli.data.tokenizer import EOS, UNK, Tokenizer
from mt_cli.decode.hypothesis import Request
from mt_cli.errors import MtError


def check_nbest(nbest: int, cfg: DecodeConfig) -> None:
    """Refuse an n-best list longer than the search can find, in one line naming the fix (sampling
    draws as many as asked). The one n-best check, for every caller."""
    if nbest < 1:
        raise MtError(f"output.nbest must be at least 1, not {nbest}")
    found = {"greedy": 1, "beam": cfg.beam}.get(cfg.search_method, nbest)
    if nbest > found:
        raise MtError(
            f"output.nbest {nbest} is larger than the beam ({found}): "
            "beam search finds at most beam hypotheses; "
            f"raise decode.beam to {nbest} or more, or lower output.nbest"
        )


# One direction's language tokens for every line, or each line's own (a source detected per line).
Languages = LanguageTokens | Sequence[LanguageTokens]


def per_line(languages: Languages, n: int) -> Sequence[LanguageTokens]:
    return [languages] * n if isinstance(languages, LanguageTokens) else languages


def source_ids(
    tokenizer: Tokenizer, lines: Sequence[str], limit: int, languages: Languages = LanguageTokens()
) -> list[list[int]]:
    """Source ids ending in EOS (then NLLB's legacy language token), an over-long line cut to
    `limit` (the model's positions less one); the `languages` tokens around each line."""
    out = []
    for ids, lt in zip(tokenizer.encode_src(list(lines)), per_line(languages, len(lines))):
        room = limit - lt.extra
        out.append(lt.wrap(ids if len(ids) <= room else ids[: room - 1] + [EOS]))
    return out


class Requests:
    """Lines with their prefixes and terms as search requests: encoded, checked, keyed by line
    (`first_line` + index: sampling seeds by it, so a line draws the same in any batch)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        cfg: DecodeConfig,
        limit: int,
        n: int,
        prefixes: Sequence[str | None] | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
        first_line: int = 0,
        languages: Languages = LanguageTokens(),
        source_langs: Sequence[str] | None = None,
    ) -> None:
        for name, given in (("prefixes", prefixes), ("constraint lists", constraints)):
            if given is not None and len(given) != n:
                raise MtError(
                    f"{len(given)} {name} for {n} lines: give one per line (an empty one for none)"
                )
        if constraints is not None and any(constraints) and cfg.search_method != "beam":
            raise MtError(
                "terms (a glossary or constraints) need beam search: decode.beam 2 or more, not "
                "greedy or sampling"
            )
        # limit: the model's positions less one
        self.tokenizer, self.cfg, self.limit = (
            tokenizer,
            cfg,
            limit,
        )
        self.prefixes, self.constraints, self.first_line = prefixes, constraints, first_line
        self.languages = per_line(languages, n)  # each line's language tokens
        self.source_langs = source_langs  # each line's detected source language (source "auto")

    def build(self, lines: Sequence[str]) -> list[Request | None]:
        """A request per line; None for a blank line (it gets an empty translation, no search)."""
        todo = [i for i, line in enumerate(lines) if line.strip()]
        src = source_ids(
            self.tokenizer, [lines[i] for i in todo], self.limit, [self.languages[i] for i in todo]
        )
        out: list[Request | None] = [None] * len(lines)
        for i, ids in zip(todo, src):
            out[i] = self.of(i, ids)
        return out

    def of(self, i: int, src: Sequence[int] = ()) -> Request:
        """Line i's request; its prefix and terms checked against the model, naming the line."""
        line, tok = self.first_line + i + 1, self.tokenizer
        prefix = self.prefixes[i] if self.prefixes is not None else None
        ids = tuple(tok.encode_tgt([prefix])[0]) if prefix and prefix.strip() else ()
        start = self.languages[i].start  # the decoder reads these first
        room = self.limit - len(start)
        if len(ids) + 1 > room:
            raise MtError(
                f"line {line}: the prefix is {len(ids)} pieces, more than the model's {room - 1}"
            )
        n = self.cfg.no_repeat_ngram
        if n and len({ids[j : j + n] for j in range(len(ids) - n + 1)}) < len(ids) - n + 1:
            raise MtError(
                f"line {line}: the prefix itself repeats a {n}-gram, "
                f"which decode.no_repeat_ngram {n} forbids"
            )
        terms = [
            t for t in (self.constraints[i] if self.constraints is not None else ()) if t.strip()
        ]
        encoded = [tuple(ids) for ids in tok.encode_tgt(terms)] if terms else []
        for term, pieces in zip(terms, encoded):
            if UNK in pieces:  # it would be met as UNK pieces, never as the text asked for
                raise MtError(
                    f"line {line}: the term {term!r} has characters "
                    "the model's target vocabulary lacks"
                )
        detected = self.source_langs[i] if self.source_langs is not None else ""
        return Request(
            tuple(src), ids, tuple(dict.fromkeys(encoded)), self.first_line + i, start, detected
        )
