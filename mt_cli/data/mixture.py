"""Several corpora trained on as one (a multilingual run): how often each is drawn, and the rows
of each epoch.

A corpus i of n_i lines (times its weight w_i) is drawn with probability proportional to
(w_i n_i / sum_j w_j n_j)^(1/T): T = 1 keeps the data's own mix, a larger T moves towards uniform,
so that a small pair is not drowned by a large one (Arivazhagan et al. 2019; fairseq and Marian
use T = 5). An epoch holds as many lines as all the corpora together, corpus i's share drawn from
it: without repeats while it has enough lines, repeating it when its share is larger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from mt_cli.data.cache import TokenCorpus
from mt_cli.data.ragged import Ragged


def sampling_probs(
    sizes: Sequence[float], weights: Sequence[float], temperature: float
) -> list[float]:
    """Each corpus's probability of being drawn: (w_i n_i / sum w n)^(1/T), normalised."""
    total = sum(n * w for n, w in zip(sizes, weights))
    raised = [
        ((n * w) / total) ** (1.0 / temperature) if n > 0 else 0.0 for n, w in zip(sizes, weights)
    ]
    return [r / sum(raised) for r in raised]


def epoch_counts(sizes: Sequence[int], probs: Sequence[float]) -> list[int]:
    """Lines of each corpus in one epoch of sum(sizes) lines, rounded so that they add up."""
    total = sum(sizes)
    exact = [p * total for p in probs]
    counts = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - counts[i], reverse=True)[
        : total - sum(counts)
    ]:
        counts[i] += 1
    return counts


class MixedCorpus:
    """Corpora read as one: row r of corpus i is row offsets[i] + r; each epoch's rows are drawn
    by the corpora's probabilities with the epoch's seed (the same rows again on resume)."""

    def __init__(self, corpora: Sequence[TokenCorpus], probs: Sequence[float]) -> None:
        self.corpora, self.probs = list(corpora), list(probs)
        sizes = [len(c) for c in self.corpora]
        self.offsets = np.cumsum([0, *sizes])
        self.src_lens = np.concatenate([c.src_lens for c in self.corpora])
        self.tgt_lens = np.concatenate([c.tgt_lens for c in self.corpora])
        self.counts = epoch_counts(sizes, self.probs)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def epoch_rows(self, seed: int) -> np.ndarray:
        """The rows of one epoch: corpus i's count of them, each corpus shuffled and repeated as
        its count needs."""
        rng = np.random.default_rng(seed)
        rows = []
        for i, (count, corpus) in enumerate(zip(self.counts, self.corpora)):
            n = len(corpus)
            whole, rest = divmod(count, n) if n else (0, 0)
            picked = [rng.permutation(n) for _ in range(whole)] + [rng.permutation(n)[:rest]]
            rows.append(np.concatenate(picked) + self.offsets[i])
        return np.concatenate(rows)

    def take(self, indices: Iterable[int]) -> tuple[Ragged, Ragged]:
        """Source and target ids of the given rows, in their order (one take per corpus)."""
        rows = np.asarray(list(indices), dtype=np.int64)
        which = np.searchsorted(self.offsets, rows, side="right") - 1
        srcs, tgts, placed = [], [], []
        for i in np.unique(which):
            at = np.flatnonzero(which == i)
            src, tgt = self.corpora[i].take(rows[at] - self.offsets[i])
            srcs.append(src)
            tgts.append(tgt)
            placed.append(at)
        # the corpora's rows one corpus after another; put back in the order asked for
        order = np.argsort(np.concatenate(placed)) if placed else np.zeros(0, np.int64)
        return Ragged.concat(srcs).rows(order), Ragged.concat(tgts).rows(order)


def sample_by_language(texts: dict[str, list[str]], temperature: float, seed: int) -> list[str]:
    """Lines for a joint tokenizer from each language's lines, each language's share of them by
    its sampling probability (as corpora are drawn for batches), as many lines in all as given:
    a small language's lines repeat, a large one's are thinned."""
    langs = sorted(texts)
    probs = sampling_probs([len(texts[lang]) for lang in langs], [1.0] * len(langs), temperature)
    counts = epoch_counts([len(texts[lang]) for lang in langs], probs)
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for lang, count in zip(langs, counts):
        lines = texts[lang]
        whole, rest = divmod(count, len(lines)) if lines else (0, 0)
        out += lines * whole + [lines[i] for i in rng.permutation(len(lines))[:rest]]
    return out
