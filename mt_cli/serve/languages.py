"""The languages a server translates between: the checkpoint's own (model.source_langs and
target_langs, which `mt train` and `mt import` record), else --source-lang and --target-lang; and
for a multi-target model, the >>xx<< tokens that choose its target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mt_cli.config import ServeConfig
from mt_cli.data.languages import language_name
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.serve.guard import ApiError


def _key(code: str) -> str:
    """Codes compare without case and with - or _ alike: pt-BR is pt_BR."""
    return code.lower().replace("_", "-")


@dataclass(frozen=True)
class Languages:
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    tokens: bool  # a multi-target model: each target is chosen by its >>xx<< token

    def source(self, code: str) -> str | None:
        """The model's spelling of a source language code; None when it does not read it."""
        return next((c for c in self.sources if _key(c) == _key(code)), None)

    def target(self, code: str) -> str | None:
        return next((c for c in self.targets if _key(c) == _key(code)), None)

    def describe(self) -> str:
        """What this server translates, for an error message."""
        if not self.sources or not self.targets:
            return ("its model records no languages; start mt serve with --source-lang and --target-lang "
                    "to name them")  # fmt: skip
        return f"this server translates {', '.join(self.sources)} -> {', '.join(self.targets)}"

    def pair(self, source: str, target: str) -> tuple[str, str]:
        """The model's codes for a requested pair (source "auto" is resolved before); 400 naming the
        pair and this server's languages when it does not translate it."""
        found = self.source(source), self.target(target)
        if found[0] is None or found[1] is None:
            raise ApiError(400, f"{source} -> {target} is not supported: {self.describe()}")
        return found[0], found[1]

    def listing(self) -> list[dict[str, Any]]:
        """GET /languages: each language with the targets it translates into (none for a target only)."""
        codes = list(self.sources) + [c for c in self.targets if c not in self.sources]
        return [{"code": c, "name": language_name(c), "targets": list(self.targets) if c in self.sources else []}
                for c in codes]  # fmt: skip


def language_tokens(tr: Translator) -> tuple[str, ...]:
    """The codes of a multi-target model's >>xx<< tokens (none for a model of one target)."""
    vocab = tr.tokenizer.vocabulary("source")
    return tuple(p[2:-2] for p in vocab if p.startswith(">>") and p.endswith("<<") and len(p) > 4)


def resolve(tr: Translator, cfg: ServeConfig) -> tuple[Translator, Languages]:
    """The translator the server decodes with and the languages it offers. serve.target_lang is the
    target language whatever the model: a multi-target model's token goes before each line (as
    `mt translate --target-lang`), and for one that records no languages it is what /languages
    says. Either option must agree with what the checkpoint records."""
    tokens = language_tokens(tr)
    if cfg.target_lang and tokens:
        tr = tr.for_languages(target=cfg.target_lang)  # refuses a language the model has no token for
    recorded = tr.model.cfg
    sources = _agreed(recorded.source_langs, cfg.source_lang, "source_lang", "reads")
    targets = _agreed(recorded.target_langs or tokens, cfg.target_lang, "target_lang", "writes")
    return tr, Languages(sources, targets, bool(tokens))


def _agreed(recorded: tuple[str, ...], given: str, field: str, verb: str) -> tuple[str, ...]:
    if not given:
        return tuple(recorded)
    if recorded and all(_key(c) != _key(given) for c in recorded):
        raise MtError(f"serve.{field} {given}: the checkpoint {verb} {', '.join(recorded)}; name one of those")
    return tuple(recorded) or (given,)
