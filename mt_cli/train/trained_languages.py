"""The languages a run trains: what the model records it reads and writes, and for a model told its
languages by tokens (M2M100, NLLB; target tags), the tokens its pairs are encoded with."""

from __future__ import annotations

from dataclasses import replace

from mt_cli.config import Config, ModelConfig
from mt_cli.data.language_tokens import LanguageTokens
from mt_cli.data.languages import language_code, suffix_language
from mt_cli.data.sources import HubDataset, Source, Table, TextPair
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.errors import MtError
from mt_cli.model.checkpoint import Checkpoint
from mt_cli.train.inputs import DataSpec


def model_config(
    cfg: Config, init: Checkpoint | None, tokenizer: Tokenizer, data: DataSpec
) -> ModelConfig:
    """The model a run builds: train.init's, as it was built; else the config's, sized to the
    tokenizer, with the training data's languages where the config names none (a run of several
    directions: all of theirs)."""
    if init is not None:
        return init.config.model
    if len(data.pairs) > 1:
        src = tuple(dict.fromkeys(p.source_lang for p in data.pairs if p.source_lang))
        tgt = tuple(dict.fromkeys(p.target_lang for p in data.pairs if p.target_lang))
    else:
        src, tgt = _languages(data.train)
    return replace(
        cfg.model,
        src_vocab_size=tokenizer.src_vocab_size,
        tgt_vocab_size=tokenizer.tgt_vocab_size,
        shared_vocab=tokenizer.joint,
        source_langs=cfg.model.source_langs or src,
        target_langs=cfg.model.target_langs or tgt,
    )


def _languages(train: Source) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the training data says its languages are, each side (), when it says nothing: a table's
    or dataset's --src-lang/--tgt-lang when they are language codes (not column names such as
    source), text files' suffixes (train.de, train.en.gz)."""
    src = tgt = None
    if isinstance(train, TextPair):
        src, tgt = suffix_language(train.src), suffix_language(train.tgt)
    elif isinstance(train, (Table, HubDataset)):
        src, tgt = (language_code(c) if c else None for c in (train.src_lang, train.tgt_lang))
    return (src,) if src else (), (tgt,) if tgt else ()


def direction(tokenizer: Tokenizer, given: ModelConfig, train: Source) -> LanguageTokens:
    """The language tokens each training pair is encoded with: none for a model not told its
    languages; for one that is, those of the languages model.source_langs/target_langs name (one
    each), else the data's (train.de / train.en), which an M2M100 or NLLB model must be given."""
    told_sources, tags = tokenizer.languages()
    if not told_sources and not tags:
        return LanguageTokens()
    src, tgt = _languages(train)
    src, tgt = given.source_langs or src, given.target_langs or tgt
    if len(src) > 1 or len(tgt) > 1:
        named = f"model.source_langs {src} / target_langs {tgt}"
        raise MtError(f"{named}: name one of each for the direction trained")
    if told_sources and not (src and tgt):
        raise MtError(
            "the model is told its languages (M2M100, NLLB): name the data's with files named by "
            "language (train.de, train.en) or set model.source_langs=de and model.target_langs=en"
        )
    return tokenizer.language_tokens(src[0] if src else "", tgt[0] if tgt else "")
