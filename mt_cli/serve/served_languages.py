"""The languages a server translates between: the checkpoint's own (model.source_langs and
target_langs, which `mt train` and `mt import` record), else --source-lang and --target-lang; and
for a model told its languages by tokens (a multi-target model's >>xx<< or <2xx>; M2M100's and
NLLB's source and target tokens), whether each request's languages reach the model."""

from __future__ import annotations

from dataclasses import dataclass

from mt_cli.config import ServeConfig
from mt_cli.data.languages import resolve_language, short_code
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError


def public_code(code: str) -> str:
    """A code as two models' codes compare: its language alone, without case (deu_Latn, de, DE:
    de)."""
    return short_code(code).lower()


def _key(code: str) -> str:
    """Codes compare without case and with - or _ alike: pt-BR is pt_BR."""
    return code.lower().replace("_", "-")


def _find(code: str, codes: tuple[str, ...]) -> str | None:
    """The model's spelling of `code` among `codes`: the same code, or one it names (de for
    deu_Latn, as LibreTranslate's clients send); None when it names none of them."""
    same = next((c for c in codes if _key(c) == _key(code)), None)
    if same is not None or not codes:
        return same
    try:
        return resolve_language(code, codes, "language")
    except MtError:
        return None


@dataclass(frozen=True)
class Languages:
    sources: tuple[str, ...]  # the model's codes
    targets: tuple[str, ...]
    # the target is told to the model by a token (a tag before each line; M2M100's, NLLB's)
    tokens: bool
    told_source: bool = False  # the source is told too (M2M100, NLLB)

    def source(self, code: str) -> str | None:
        """The model's spelling of a source language code; None when it does not read it."""
        return _find(code, self.sources)

    def target(self, code: str) -> str | None:
        return _find(code, self.targets)

    @staticmethod
    def public(codes: tuple[str, ...]) -> list[str]:
        """The codes as clients send them: ISO 639-1 where it names one of the model's languages
        only (deu_Latn -> de), else the model's own (zho_Hans and zho_Hant)."""
        shorts = [short_code(c) for c in codes]
        return [s if shorts.count(s) == 1 else c for s, c in zip(shorts, codes)]


def resolve(tr: Translator, cfg: ServeConfig) -> tuple[Translator, Languages]:
    """The translator the server decodes with and the languages it offers. serve.target_lang is the
    target language whatever the model: where the model is told its target by a token, that token
    (as `mt translate --target-lang`; with serve.source_lang, the source's too where it is told
    that), and for one that records no languages it is what /languages says. Either option must
    agree with what the checkpoint records."""
    told_sources, told_targets = (tuple(c) for c in tr.tokenizer.languages())
    if cfg.target_lang and told_targets and (cfg.source_lang or not told_sources):
        # refuses a language the model lacks
        tr = tr.for_languages(cfg.source_lang or None, cfg.target_lang)
    recorded = tr.model.cfg
    sources = _agreed(
        recorded.source_langs or told_sources, cfg.source_lang, "source_lang", "reads"
    )
    targets = _agreed(
        recorded.target_langs or told_targets, cfg.target_lang, "target_lang", "writes"
    )
    return tr, Languages(sources, targets, bool(told_targets), bool(told_sources))


def _agreed(recorded: tuple[str, ...], given: str, field: str, verb: str) -> tuple[str, ...]:
    if not given:
        return tuple(recorded)
    if recorded and _find(given, recorded) is None:
        shown = ", ".join(recorded[:20]) + (" ..." if len(recorded) > 20 else "")
        raise MtError(f"serve.{field} {given}: the checkpoint {verb} {shown}; name one of those")
    return tuple(recorded) or (given,)
