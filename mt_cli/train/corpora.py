"""What a run trains and validates on, tokenized: the training corpus (one direction's, or
several mixed by their sampling probabilities) and a validation set per direction, each pair
encoded with its direction's language tokens (a target tag, or an imported M2M100 model's)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from mt_cli.config import Config
from mt_cli.data.cache import TokenCorpus
from mt_cli.data.language_tokens import Directed, Encoder, LanguageTokens
from mt_cli.data.mixture import MixedCorpus, sampling_probs
from mt_cli.data.pairs import Pairs
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.errors import MtError
from mt_cli.train.distributed import Dist
from mt_cli.train.inputs import DataSpec, Log, PairSpec, load_train_data, load_valid_data
from mt_cli.train.trained_languages import direction


@dataclass(frozen=True)
class ValidSet:
    """One direction's validation pairs and references, and the ids its decoder reads after the
    start token; `name` is "" for a run of one direction, else its languages (de-en)."""

    name: str
    pairs: Pairs
    refs: list[str]
    start: tuple[int, ...] = ()


def pair_tokens(tokenizer: Tokenizer, pair: PairSpec) -> LanguageTokens:
    """The language tokens of one of several directions: the target's tag where the model writes
    several languages, and the source's too for a model told it (M2M100, NLLB)."""
    told_sources, tags = tokenizer.languages()
    languages = LanguageTokens()
    if told_sources or tags:
        languages = tokenizer.language_tokens(
            pair.source_lang if told_sources else "", pair.target_lang
        )
    if not pair.tag:
        return languages
    tag = tokenizer.src.piece_to_id(pair.tag)
    if tag == tokenizer.src.unk_id():
        raise MtError(
            f"data.pairs: the tag {pair.tag} of {pair.name} is not a piece of the tokenizer; "
            "train one with the run (give no tokenizer), which learns every pair's tag as a piece"
        )
    return replace(languages, source=(*languages.source, tag))


def load_corpora(
    spec: DataSpec,
    fingerprints: dict[str, str],
    tokenizer: Tokenizer,
    cfg: Config,
    log: Log,
    d: Dist,
) -> tuple[TokenCorpus | MixedCorpus, list[ValidSet]]:
    """The training corpus and the validation sets; `cfg` as given (its model section names the
    languages of a fine-tuning run's one direction)."""
    t, root = cfg.train, spec.cache_root()
    if len(spec.pairs) == 1:
        pair = spec.pairs[0]
        assert pair.valid is not None  # a run's one pair is validated (inputs.named)
        # a model of several languages: its tokens
        languages = direction(tokenizer, cfg.model, pair.train)
        encoder = _encoder(tokenizer, languages)
        train = load_train_data(pair.train, root, fingerprints["train"], encoder, t, log, d)
        pairs, refs = load_valid_data(pair.valid, encoder, t, log)
        return train, [ValidSet("", pairs, refs, languages.start)]
    corpora, sets = [], []
    for pair in spec.pairs:
        languages = pair_tokens(tokenizer, pair)
        encoder = _encoder(tokenizer, languages)
        corpora.append(
            load_train_data(
                pair.train, root, fingerprints[f"train.{pair.name}"], encoder, t, log, d
            )
        )
        if pair.valid is not None:
            pairs, refs = load_valid_data(pair.valid, encoder, t, log)
            sets.append(ValidSet(pair.name, pairs, refs, languages.start))
    probs = sampling_probs(
        [len(c) for c in corpora], [p.weight for p in spec.pairs], cfg.data.temperature
    )
    mixed = MixedCorpus(corpora, probs)
    shares = ", ".join(
        f"{p.name} {100 * q:.1f}% ({n} a pass)" for p, q, n in zip(spec.pairs, probs, mixed.counts)
    )
    log(f"sampling {len(spec.pairs)} pairs at temperature {cfg.data.temperature:g}: {shares}")
    return mixed, sets


def _encoder(tokenizer: Tokenizer, languages: LanguageTokens) -> Encoder:
    return Directed(tokenizer, languages) if languages != LanguageTokens() else tokenizer
