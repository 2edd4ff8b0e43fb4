"""What a run trains on: where its data comes from (`DataSpec`), its tokenizer, the tokenized
training cache and the validation pairs. Under torchrun rank 0 makes each of them and the others
wait."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from mt_cli.config import Config, DataConfig, TrainConfig
from mt_cli.data.cache import TokenCorpus, build_cache, wait_for_cache
from mt_cli.data.doctor import preflight
from mt_cli.data.language_tokens import Encoder
from mt_cli.data.languages import suffix_language
from mt_cli.data.mixture import sample_by_language
from mt_cli.data.pairs import Pairs
from mt_cli.data.sources import HubDataset, Source, Table, TextPair, sample_texts
from mt_cli.data.tokenizer import Tokenizer, train_tokenizer
from mt_cli.errors import MtError
from mt_cli.files import temp_dir
from mt_cli.train.distributed import Dist

TOKENIZER_SAMPLE = 1_000_000  # pairs; SentencePiece reads at most 2 million sentences anyway
# larger text corpora skip the check before training (mt doctor still runs)
DOCTOR_MAX_BYTES = 200 << 20

Log = Callable[[str], None]


@dataclass(frozen=True)
class PairSpec:
    """One direction of a run: its training and validation sources, its languages ("" where the
    data does not say) and its weight in the sampling distribution (data/mixture.py)."""

    train: Source
    valid: Source | None  # None: not validated (a synthetic corpus beside a real one)
    source_lang: str = ""
    target_lang: str = ""
    weight: float = 1.0
    tag: str = ""  # a token before each source line (<BT>)
    label: str = ""  # the name, where two pairs share a direction

    @property
    def name(self) -> str:
        return self.label or f"{self.source_lang}-{self.target_lang}"


@dataclass(frozen=True)
class DataSpec:
    """The directions a run trains (one, or several: a multilingual model), the tokenizer folder
    to use (None: train one into RUN/tokenizer) and where tokenized caches go (None: $MT_CACHE or
    ~/.cache/mt)."""

    pairs: tuple[PairSpec, ...]
    tokenizer: Path | None = None
    cache: Path | None = None

    @classmethod
    def text_files(
        cls,
        train_src: Path,
        train_tgt: Path,
        valid_src: Path,
        valid_tgt: Path,
        tokenizer: Path | None = None,
        cache: Path | None = None,
    ) -> DataSpec:
        return cls(
            (PairSpec(TextPair(train_src, train_tgt), TextPair(valid_src, valid_tgt)),),
            tokenizer,
            cache,
        )

    @classmethod
    def of_pairs(
        cls, data: DataConfig, tokenizer: Path | None = None, cache: Path | None = None
    ) -> DataSpec:
        """data.pairs' text files, each pair's languages given or named by its files' suffixes."""
        pairs = []
        for i, p in enumerate(data.pairs):
            langs = [
                given or suffix_language(Path(f)) or ""
                for given, f in ((p.source_lang, p.src), (p.target_lang, p.tgt))
            ]
            for lang, field in zip(langs, ("source_lang", "target_lang")):
                if not lang:
                    files = f"its files' names ({p.src}, {p.tgt})"
                    raise MtError(f"data.pairs[{i}]: {files} name no language; set {field}")
            train = TextPair(Path(p.src), Path(p.tgt))
            valid = TextPair(Path(p.valid_src), Path(p.valid_tgt)) if p.valid_src else None
            pairs.append(PairSpec(train, valid, langs[0], langs[1], p.weight, p.tag))
        return cls(named(pairs), tokenizer, cache)

    @classmethod
    def with_extra(
        cls,
        main: PairSpec,
        extra: list[PairSpec],
        tokenizer: Path | None = None,
        cache: Path | None = None,
    ) -> DataSpec:
        """One direction's corpus and more of the same direction (validated on the first alone)."""
        return cls(named([main, *extra]), tokenizer, cache)

    @property
    def train(self) -> Source:
        """The training source of a run of one direction."""
        return self.pairs[0].train

    def sources(self) -> dict[str, Source]:
        """Every source by its role: train and valid, or for several directions train.de-en, ..."""
        if len(self.pairs) == 1:
            only = self.pairs[0]
            return {"train": only.train, "valid": only.valid}  # type: ignore[dict-item]
        return {
            f"{role}.{p.name}": getattr(p, role)
            for p in self.pairs
            for role in ("train", "valid")
            if getattr(p, role) is not None
        }

    def cache_root(self) -> Path:
        default = Path(os.environ.get("MT_CACHE", Path.home() / ".cache" / "mt"))
        return Path(self.cache) if self.cache is not None else default


def named(pairs: list[PairSpec]) -> tuple[PairSpec, ...]:
    """The pairs, each with a name of its own: a second corpus of a direction is de-en.2 (its tag's
    name where it has one: de-en.BT)."""
    out: list[PairSpec] = []
    for p in pairs:
        if p.name in {q.name for q in out}:
            mark = re.sub(r"[^A-Za-z0-9_-]", "", p.tag) or str(
                1 + sum(q.name.startswith(p.name) for q in out)
            )
            p = replace(p, label=f"{p.name}.{mark}")
        if p.name in {q.name for q in out}:
            what = f"data.pairs: two corpora of {p.name} with one tag"
            raise MtError(f"{what}; give them different tags, or join them")
        out.append(p)
    if all(p.valid is None for p in out):
        raise MtError("data.pairs: no pair is validated; give one valid_src and valid_tgt")
    return tuple(out)


def wait_for_path(path: Path, what: str, d: Dist) -> None:
    """Ranks past 0 wait for what rank 0 writes (a file wait has no collective timeout to
    outlast)."""
    deadline = time.monotonic() + d.timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise MtError(
                f"rank {d.rank}: {path}: rank 0 did not write the {what} within {d.timeout_s:.0f} s"
            )
        time.sleep(0.5)


def get_tokenizer(spec: DataSpec, own: Path, cfg: Config, log: Log, d: Dist) -> Tokenizer:
    """The given tokenizer, the run's own `own` folder (when resuming), or a new one trained into
    it."""
    if spec.tokenizer is not None:
        return Tokenizer.load(spec.tokenizer)
    if not d.main:
        wait_for_path(own, "tokenizer", d)
    if own.is_dir():
        return Tokenizer.load(own)
    log(f"training a {cfg.tokenizer.vocab_size}-piece tokenizer into {own}")
    if len(spec.pairs) == 1:
        src, tgt = sample_texts(spec.train, TOKENIZER_SAMPLE, cfg.train.seed, cfg.train.on_bad_utf8)
        tokenizer = train_tokenizer(src, tgt, cfg.tokenizer)
    else:
        tokenizer = _joint_tokenizer(spec, cfg, log)
    # Whole or not at all: a kill between the src and tgt models must not leave half a tokenizer.
    tmp = temp_dir(own.parent, ".tokenizer.")
    tokenizer.save(tmp)
    os.replace(tmp, own)
    return tokenizer


def _joint_tokenizer(spec: DataSpec, cfg: Config, log: Log) -> Tokenizer:
    """One SentencePiece model over every pair's languages, each language sampled by
    data.temperature (as batches draw the pairs), with a target tag (<2de>) per target language
    where the run writes several."""
    if not cfg.tokenizer.joint:
        raise MtError(
            "a run of several pairs trains one joint tokenizer: leave tokenizer.joint true"
        )
    texts: dict[str, list[str]] = {}
    for p in spec.pairs:
        src, tgt = sample_texts(
            p.train, TOKENIZER_SAMPLE // len(spec.pairs), cfg.train.seed, cfg.train.on_bad_utf8
        )
        texts.setdefault(p.source_lang, []).extend(src)
        texts.setdefault(p.target_lang, []).extend(tgt)
    targets = list(dict.fromkeys(p.target_lang for p in spec.pairs))
    tags = [f"<2{lang}>" for lang in targets] if len(targets) > 1 else []
    # pieces of their own, as target tags
    tags += list(dict.fromkeys(p.tag for p in spec.pairs if p.tag))
    lines = sample_by_language(texts, cfg.data.temperature, cfg.train.seed)
    log(
        f"  {len(lines)} lines of {', '.join(sorted(texts))}"
        + (f"; tags {' '.join(tags)}" if tags else "")
    )
    return train_tokenizer(lines, [], cfg.tokenizer, tags)


def load_train_data(
    source: Source, root: Path, fp: str, tokenizer: Encoder, t: TrainConfig, log: Log, d: Dist
) -> TokenCorpus:
    """A training source (fingerprint `fp`) from its tokenized cache under `root`, which rank 0
    builds when missing."""
    if d.main:
        cache = build_cache(source, tokenizer, root, t.workers, log, fp)
    else:
        cache = wait_for_cache(fp, tokenizer, root, d.timeout_s)
    data = TokenCorpus(cache, t.max_len, t.long_pairs, t.on_bad_utf8, source.describe())
    c = data.counts
    said = f"dropped {c['empty']} with an empty side" + _bad_bytes(c["bad_utf8"], t.on_bad_utf8)
    said += (
        f", {'truncated' if t.long_pairs == 'truncate' else 'dropped'} {c['long']} longer "
        f"than {t.max_len} tokens"
    )
    log(f"{source.describe()}: {len(data)} pairs ({said}); cache {cache}")
    return data


def _bad_bytes(count: int, on_bad_utf8: str) -> str:
    if not count:
        return ""
    done = "dropped" if on_bad_utf8 == "skip" else "repaired (U+FFFD)"
    return f", {done} {count} with bytes that are not UTF-8"


def load_valid_data(
    source: Source, tokenizer: Encoder, t: TrainConfig, log: Log
) -> tuple[Pairs, list[str]]:
    """The validation split, whole in memory: token ids and the reference texts."""
    corpus = source.read(t.on_bad_utf8)
    pairs = Pairs(tokenizer.encode_src(corpus.src), tokenizer.encode_tgt(corpus.tgt))
    said = f"dropped {corpus.dropped_empty} with an empty side" + _bad_bytes(
        corpus.bad_utf8, t.on_bad_utf8
    )
    log(f"{source.describe()}: {len(pairs)} pairs ({said})")
    return pairs, corpus.tgt


def check_first(sources: dict[str, Source], log: Log) -> None:
    """The doctor's warnings about text-file sources that are small enough to read twice."""
    files = {name: (s.src, s.tgt) for name, s in sources.items() if isinstance(s, TextPair)}
    size = sum(Path(p).stat().st_size for pair in files.values() for p in pair)
    if size > DOCTOR_MAX_BYTES:
        log(
            f"skipped the data checks on {size >> 20} MB of text (run `mt doctor` on it separately)"
        )
    elif "train" in files:
        preflight(files, log)


def data_spec(
    files: dict[str, Path | None],
    dataset: str | None = None,
    dataset_config: str | None = None,
    splits: tuple[str, str] = ("train", "validation"),
    langs: tuple[str | None, str | None] = (None, None),
    tokenizer: Path | None = None,
    cache: Path | None = None,
) -> DataSpec:
    """A DataSpec from the command line. `files` maps train_src, train_tgt, valid_src, valid_tgt,
    train (a table) and valid (a table) to paths or None; a split not given as files comes
    from `dataset`."""
    sources: dict[str, Source] = {}
    for split, hub_split in zip(("train", "valid"), splits):
        src, tgt, table = files.get(f"{split}_src"), files.get(f"{split}_tgt"), files.get(split)
        given = [
            flag
            for flag, value in ((f"--{split}-src/--{split}-tgt", src or tgt), (f"--{split}", table))
            if value
        ]
        if len(given) > 1:
            raise MtError(f"give the {split} data one way: {' or '.join(given)}, not both")
        if table is not None:
            sources[split] = Table(table, src_lang=langs[0], tgt_lang=langs[1])
        elif src is not None or tgt is not None:
            if src is None or tgt is None:
                raise MtError(f"the {split} source and target files go together; give both")
            sources[split] = TextPair(src, tgt)
        elif dataset is not None:
            sources[split] = HubDataset(dataset, dataset_config, hub_split, langs[0], langs[1])
        else:
            raise MtError(
                f"no {split} data: give its source and target files, a table, or a dataset"
            )
    return DataSpec((PairSpec(sources["train"], sources["valid"]),), tokenizer, cache)
