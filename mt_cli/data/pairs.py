"""Token ids of parallel sentences: pairs in memory, length limits, and length-bucketed batches.

numpy only (no torch): the tokenized cache's worker processes import it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mt_cli.data.ragged import Ragged


@dataclass(frozen=True)
class Pairs:
    """Token ids of a corpus in memory: sources end with EOS; targets carry neither BOS nor EOS.

    Validation sets and tests use it; training reads a `cache.TokenCorpus`, which answers the
    same `take`, `src_lens` and `tgt_lens`.
    """

    src: list[list[int]]
    tgt: list[list[int]]

    def __len__(self) -> int:
        return len(self.src)

    @property
    def src_lens(self) -> np.ndarray:
        return np.array([len(s) for s in self.src], dtype=np.int64)

    @property
    def tgt_lens(self) -> np.ndarray:
        return np.array([len(t) for t in self.tgt], dtype=np.int64)

    def take(self, indices: Iterable[int]) -> tuple[Ragged, Ragged]:
        rows = list(indices)
        return Ragged.of([self.src[i] for i in rows]), Ragged.of([self.tgt[i] for i in rows])


def limit_length(
    src: list[list[int]], tgt: list[list[int]], max_len: int, mode: str = "drop"
) -> tuple[Pairs, int]:
    """Pairs with a side over `max_len` tokens (counting the target's EOS) are dropped, or cut to
    fit; returns what is left and how many pairs were over.

    Truncating keeps the source's EOS; a cut target still gets EOS in training, so the model sees
    sentences end early. That is the price of keeping the pair, and why "drop" is the default.
    """
    long = [i for i in range(len(src)) if len(src[i]) > max_len or len(tgt[i]) + 1 > max_len]
    if mode == "truncate":
        cut = set(long)
        pairs = Pairs(
            [
                s[: max_len - 1] + s[-1:] if i in cut and len(s) > max_len else s
                for i, s in enumerate(src)
            ],
            [t[: max_len - 1] for t in tgt],
        )
        return pairs, len(long)
    skip = set(long)
    keep = [i for i in range(len(src)) if i not in skip]
    return Pairs([src[i] for i in keep], [tgt[i] for i in keep]), len(long)


# The fused attention kernels put a batch's rows on one CUDA grid axis, whose limit is 65,535:
# cuDNN's and the memory-efficient kernel both failed on 65,536 rows of short sentences (an H200,
# torch 2.11), which a large GPU batch of short pairs reaches. A batch never holds more.
MAX_BATCH_ROWS = 65_535


def make_batches(
    src_lens: np.ndarray, tgt_lens: np.ndarray, batch_tokens: int, seed: int
) -> list[np.ndarray]:
    """Group similar lengths so little is padding; a batch holds at most `batch_tokens` padded
    tokens.

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
        window = sizes[
            start : start + min(MAX_BATCH_ROWS, max(1, batch_tokens // max(int(sizes[start]), 1)))
        ]
        fits = window * np.arange(1, len(window) + 1) <= batch_tokens
        count = max(1, int(np.argmin(fits)) if not fits.all() else len(window))
        batches.append(order[start : start + count])
        start += count
    return [batches[i] for i in rng.permutation(len(batches))]
