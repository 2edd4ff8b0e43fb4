"""The data a run trains on: where it comes from, its tokenizer, the tokenized training cache
and the validation pairs. Under torchrun rank 0 makes each of them and the others wait."""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from mt_cli import __version__
from mt_cli import distributed as ddp
from mt_cli.cache import TokenCorpus, build_cache, wait_for_cache
from mt_cli.config import Config, TrainConfig
from mt_cli.corpus import Source, read_pairs, sample_texts
from mt_cli.data import Pairs
from mt_cli.doctor import preflight
from mt_cli.errors import MtError
from mt_cli.files import atomic_write_text, temp_dir
from mt_cli.tokenizer import Tokenizer, train_tokenizer

TOKENIZER_SAMPLE = 1_000_000  # pairs; SentencePiece reads at most 2 million sentences anyway
DOCTOR_MAX_BYTES = 200 << 20  # larger text corpora skip the check before training (mt doctor still runs)


@dataclass
class TrainPaths:
    """Where the data comes from and where the run goes. Text files (train_src ...) or `train`/
    `valid` sources (a table file or a dataset) for each split."""

    train_src: Path | None
    train_tgt: Path | None
    valid_src: Path | None
    valid_tgt: Path | None
    out: Path
    tokenizer: Path | None = None
    train: Source | None = None
    valid: Source | None = None
    cache: Path | None = None  # tokenized caches; default $MT_CACHE or ~/.cache/mt

    def sources(self) -> dict[str, Source]:
        train = self.train or Source(self.train_src, self.train_tgt)
        valid = self.valid or Source(self.valid_src, self.valid_tgt)
        return {"train": train, "valid": valid}

    def cache_root(self) -> Path:
        default = Path(os.environ.get("MT_CACHE", Path.home() / ".cache" / "mt"))
        return Path(self.cache) if self.cache is not None else default


def wait_for_path(path: Path, what: str, d: ddp.Dist) -> None:
    """Ranks past 0 wait for what rank 0 writes (a file wait has no collective timeout to outlast)."""
    deadline = time.monotonic() + d.timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise MtError(f"rank {d.rank}: {path}: rank 0 did not write the {what} within {d.timeout_s:.0f} s")
        time.sleep(0.5)


def get_tokenizer(paths: TrainPaths, source: Source, cfg: Config, log, d: ddp.Dist) -> Tokenizer:
    """The given tokenizer, the run's own (when resuming), or a new one trained into RUN/tokenizer."""
    if paths.tokenizer is not None:
        return Tokenizer.load(paths.tokenizer)
    own = paths.out / "tokenizer"
    if not d.main:
        wait_for_path(own, "tokenizer", d)
    if own.is_dir():
        return Tokenizer.load(own)
    log(f"training a {cfg.tokenizer.vocab_size}-piece tokenizer into {own}")
    src, tgt = sample_texts(source, TOKENIZER_SAMPLE, cfg.train.seed, cfg.train.on_bad_utf8)
    tokenizer = train_tokenizer(src, tgt, cfg.tokenizer)
    # Whole or not at all: a kill between the src and tgt models must not leave half a tokenizer.
    tmp = temp_dir(paths.out, ".tokenizer.")
    tokenizer.save(tmp)
    os.replace(tmp, own)
    return tokenizer


def load_train_data(
    source: Source, fp: str, tokenizer: Tokenizer, paths: TrainPaths, t: TrainConfig, log, d
) -> TokenCorpus:
    """The training split (fingerprint `fp`) from its tokenized cache, which rank 0 builds when missing."""
    if d.main:
        cache = build_cache(source, tokenizer, paths.cache_root(), t.workers, log, fp)
    else:
        cache = wait_for_cache(fp, tokenizer, paths.cache_root(), d.timeout_s)
    data = TokenCorpus(cache, t.max_len, t.long_pairs, t.on_bad_utf8, source.describe())
    c = data.counts
    said = f"dropped {c['empty']} with an empty side"
    if c["bad_utf8"]:
        done = "dropped" if t.on_bad_utf8 == "skip" else "repaired (U+FFFD)"
        said += f", {done} {c['bad_utf8']} with bytes that are not UTF-8"
    said += f", {'truncated' if t.long_pairs == 'truncate' else 'dropped'} {c['long']} longer than {t.max_len} tokens"
    log(f"{source.describe()}: {len(data)} pairs ({said}); cache {cache}")
    return data


def load_valid_data(source: Source, tokenizer: Tokenizer, paths: TrainPaths, t: TrainConfig, log):
    """The validation split, whole in memory: token ids and the reference texts."""
    corpus = read_pairs(source, t.on_bad_utf8)
    pairs = Pairs(tokenizer.encode_src(corpus.src), tokenizer.encode_tgt(corpus.tgt))
    log(f"{source.describe()}: {len(pairs)} pairs (dropped {corpus.dropped_empty} with an empty side)")
    return pairs, corpus.tgt


def check_first(sources: dict[str, Source], log) -> None:
    """The doctor's warnings about text-file sources that are small enough to read twice."""
    files = {name: (s.src, s.tgt) for name, s in sources.items() if s.src is not None}
    size = sum(Path(p).stat().st_size for pair in files.values() for p in pair)
    if size > DOCTOR_MAX_BYTES:
        log(f"skipped the data checks on {size >> 20} MB of text (run `mt doctor` on it separately)")
    elif "train" in files:
        preflight(files, log)


def make_paths(
    out: Path,
    files: dict[str, Path | None],
    dataset: str | None = None,
    dataset_config: str | None = None,
    splits: tuple[str, str] = ("train", "validation"),
    langs: tuple[str | None, str | None] = (None, None),
    tokenizer: Path | None = None,
    cache: Path | None = None,
) -> TrainPaths:
    """TrainPaths from the command line. `files` maps train_src, train_tgt, valid_src, valid_tgt,
    train (a table) and valid (a table) to paths or None; a split not given as files comes
    from `dataset`."""
    sources: dict[str, Source | None] = {}
    for split, hub_split in zip(("train", "valid"), splits):
        src, tgt, table = files.get(f"{split}_src"), files.get(f"{split}_tgt"), files.get(split)
        given = [flag for flag, value in ((f"--{split}-src/--{split}-tgt", src or tgt), (f"--{split}", table)) if value]
        if len(given) > 1:
            raise MtError(f"give the {split} data one way: {' or '.join(given)}, not both")
        if table is not None:
            sources[split] = Source(table=table, src_lang=langs[0], tgt_lang=langs[1])
        elif src is not None or tgt is not None:
            if src is None or tgt is None:
                raise MtError(f"--{split}-src and --{split}-tgt go together; give both")
            sources[split] = None  # the text files stay in TrainPaths' own fields
        elif dataset is not None:
            sources[split] = Source(dataset=dataset, config=dataset_config, split=hub_split,
                                    src_lang=langs[0], tgt_lang=langs[1])  # fmt: skip
        else:
            raise MtError(f"no {split} data: give --{split}-src and --{split}-tgt, --{split} TABLE, or --dataset NAME")
    return TrainPaths(files.get("train_src"), files.get("train_tgt"), files.get("valid_src"), files.get("valid_tgt"),
                      out, tokenizer, sources["train"], sources["valid"], cache)  # fmt: skip


def write_run_info(
    paths: TrainPaths, sources: dict, fingerprints: dict, train_data, valid_pairs, device, d, amp
) -> None:
    """RUN/run.json: the data and the environment of the run, for `mt report`."""
    data = {
        "train": {"source": sources["train"].describe(), "fingerprint": fingerprints["train"],
                  "pairs": len(train_data), "left_out": {k: v for k, v in train_data.counts.items() if v}},
        "valid": {"source": sources["valid"].describe(), "fingerprint": fingerprints["valid"],
                  "pairs": len(valid_pairs)},
    }  # fmt: skip
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    environment = {
        "mt": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "device": f"{device} ({name})",
        "processes": d.world,
        "threads per process": torch.get_num_threads(),
        "autocast": str(amp) if amp else "off (fp32)",
    }
    atomic_write_text(paths.out / "run.json", json.dumps({"data": data, "environment": environment}, indent=1) + "\n")
