"""Parallel corpora: strict reading, cleaning with counts, and length-bucketed token batches."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mt_cli.errors import MtError
from mt_cli.files import atomic_write_text
from mt_cli.text import BAD_UTF8_FIX, check_aligned, read_lines
from mt_cli.tokenizer import EOS, PAD


@dataclass(frozen=True)
class Corpus:
    src: list[str]
    tgt: list[str]
    dropped_empty: int = 0
    bad_utf8: int = 0  # pairs with bytes that are not UTF-8: dropped ("skip") or repaired ("replace")


def read_parallel(src_path: Path, tgt_path: Path, on_bad_utf8: str = "error") -> Corpus:
    """Line-aligned source and target files; pairs with an empty side are dropped and counted.

    `on_bad_utf8`: "error" stops at the first undecodable byte, "skip" drops the pairs that hold
    one (both sides, so the files stay aligned), "replace" keeps them with U+FFFD in its place.
    """
    hint = BAD_UTF8_FIX
    bad_src: list[int] = []
    bad_tgt: list[int] = []
    src = read_lines(src_path, on_bad_utf8, bad_src, hint)
    tgt = read_lines(tgt_path, on_bad_utf8, bad_tgt, hint)
    check_aligned(src_path, src, tgt_path, tgt)
    bad = {n - 1 for n in bad_src + bad_tgt}
    skip = bad if on_bad_utf8 == "skip" else set()
    keep = [i for i, (s, t) in enumerate(zip(src, tgt)) if s.strip() and t.strip() and i not in skip]
    if not keep:
        raise MtError(f"{src_path} / {tgt_path}: no sentence pairs with text on both sides")
    empty = len(src) - len(keep) - len(skip)  # what was left out and not for its bytes
    return Corpus([src[i] for i in keep], [tgt[i] for i in keep], dropped_empty=empty, bad_utf8=len(bad))


@dataclass(frozen=True)
class Pairs:
    """Token ids of a corpus in memory: sources end with EOS; targets carry neither BOS nor EOS.

    Validation sets and tests use it; training reads a `corpus.TokenCorpus`, which answers the
    same `take`, `src_lens` and `tgt_lens`.
    """

    src: list[list[int]]
    tgt: list[list[int]]
    long: int = 0  # pairs over the length limit, dropped or truncated

    def __len__(self) -> int:
        return len(self.src)

    @property
    def src_lens(self) -> np.ndarray:
        return np.array([len(s) for s in self.src], dtype=np.int64)

    @property
    def tgt_lens(self) -> np.ndarray:
        return np.array([len(t) for t in self.tgt], dtype=np.int64)

    def take(self, indices) -> tuple[list[list[int]], list[list[int]]]:
        return [self.src[i] for i in indices], [self.tgt[i] for i in indices]


def limit_length(src: list[list[int]], tgt: list[list[int]], max_len: int, mode: str = "drop") -> Pairs:
    """Pairs with a side over `max_len` tokens (counting the target's EOS) are dropped, or cut to fit.

    Truncating keeps the source's EOS; a cut target still gets EOS in training, so the model sees
    sentences end early. That is the price of keeping the pair, and why "drop" is the default.
    """
    long = [i for i in range(len(src)) if len(src[i]) > max_len or len(tgt[i]) + 1 > max_len]
    if mode == "truncate":
        cut = set(long)
        return Pairs(
            [s[: max_len - 1] + s[-1:] if i in cut and len(s) > max_len else s for i, s in enumerate(src)],
            [t[: max_len - 1] for t in tgt],
            long=len(long),
        )
    skip = set(long)
    keep = [i for i in range(len(src)) if i not in skip]
    return Pairs([src[i] for i in keep], [tgt[i] for i in keep], long=len(long))


def make_batches(src_lens: np.ndarray, tgt_lens: np.ndarray, batch_tokens: int, seed: int) -> list[np.ndarray]:
    """Group similar lengths so little is padding; a batch holds at most `batch_tokens` padded tokens.

    The order is random but fixed by `seed`, so an epoch can be replayed exactly on resume. Only
    the lengths are needed, so this works the same for 50 million pairs (a few numpy arrays).
    """
    rng = np.random.default_rng(seed)
    size = np.maximum(src_lens, tgt_lens + 1)  # the padded length a pair brings to a batch
    order = rng.permutation(len(size))  # random tie-breaking, so batches differ between epochs
    order = order[np.argsort(size[order], kind="stable")]
    sizes = size[order]
    batches: list[np.ndarray] = []
    start, n = 0, len(order)
    while start < n:
        # Sorted by size, the last pair is the longest: the batch can take pairs while
        # size[j] * count <= budget, a condition that only gets harder further on.
        window = sizes[start : start + max(1, batch_tokens // max(int(sizes[start]), 1))]
        fits = window * np.arange(1, len(window) + 1) <= batch_tokens
        count = max(1, int(np.argmin(fits)) if not fits.all() else len(window))
        batches.append(order[start : start + count])
        start += count
    return [batches[i] for i in rng.permutation(len(batches))]


def pad(seqs: list[list[int]]) -> torch.Tensor:
    """Right-pad id lists into a (B, T) tensor."""
    out = torch.full((len(seqs), max(len(s) for s in seqs)), PAD, dtype=torch.long)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def collate(src: list[list[int]], tgt: list[list[int]], start: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher forcing: the decoder reads start + target and predicts target + EOS."""
    return pad(src), pad([[start] + t for t in tgt]), pad([t + [EOS] for t in tgt])


# Multi30k as the quickstart gets it: hub split -> file stem used by the local copy.
MULTI30K_HUB = "bentrevett/multi30k"
MULTI30K_SPLITS = {"train": "train", "validation": "val", "test": "test2016"}


def fetch_multi30k(out_dir: Path, local_dir: Path | None = None, dataset: str = MULTI30K_HUB) -> Path:
    """Return a folder holding {train,val,test2016}.{de,en}.

    With `local_dir` the text files are used where they lie. Otherwise `dataset` (a hub name, or a
    local folder in the same layout) is loaded through `datasets` and written to `out_dir` once.
    """
    wanted = [f"{stem}.{lang}" for stem in MULTI30K_SPLITS.values() for lang in ("de", "en")]
    if local_dir is not None:
        missing = [name for name in wanted if not (Path(local_dir) / name).is_file()]
        if missing:
            raise MtError(f"{local_dir}: missing {', '.join(missing)}; expected Multi30k text files")
        return Path(local_dir)
    if all((out_dir / name).is_file() for name in wanted):
        return out_dir
    import datasets

    try:
        ds = datasets.load_dataset(dataset)
    except Exception as e:  # network and hub errors come in many types; all mean the same here
        raise MtError(
            f"could not load {dataset} through `datasets` ({type(e).__name__}: {str(e)[:200]}); "
            "pass --data DIR with local Multi30k text files instead"
        ) from None
    for split, stem in MULTI30K_SPLITS.items():
        if split not in ds:
            raise MtError(f"{dataset}: has no {split!r} split (found {', '.join(ds)})")
        for lang in ("de", "en"):
            lines = [" ".join(text.split()) for text in ds[split][lang]]
            atomic_write_text(out_dir / f"{stem}.{lang}", "\n".join(lines) + "\n")
    return out_dir
