"""The order a run trains in: each epoch's batches shuffled with the seed train.seed + epoch, so a
run resumed mid-epoch replays the same batches from where it stopped. A run of several corpora
draws each epoch's rows from them by their sampling probabilities (data/mixture.py) first."""

from __future__ import annotations

import numpy as np

from mt_cli.data.cache import TokenCorpus
from mt_cli.data.mixture import MixedCorpus
from mt_cli.data.pairs import make_batches
from mt_cli.train.state import TrainState


class Epochs:
    """The batches of the current epoch, made when first asked for (a few numpy arrays, however
    large the corpus), and made anew when the epoch changes."""

    batches: list[np.ndarray]

    def __init__(self, data: TokenCorpus | MixedCorpus, batch_tokens: int, seed: int) -> None:
        self.data, self.batch_tokens, self.seed = data, batch_tokens, seed
        self.epoch, self.batches = -1, []  # no epoch's batches made yet

    def of(self, epoch: int) -> list[np.ndarray]:
        if epoch != self.epoch:
            self.epoch, data, seed = epoch, self.data, self.seed + epoch
            # the epoch's rows drawn from each corpus, then batched
            if isinstance(data, MixedCorpus):
                rows = data.epoch_rows(seed)
                batches = make_batches(
                    data.src_lens[rows], data.tgt_lens[rows], self.batch_tokens, seed
                )
                self.batches = [rows[b] for b in batches]
            else:
                self.batches = make_batches(data.src_lens, data.tgt_lens, self.batch_tokens, seed)
        return self.batches

    def next_batch(self, state: TrainState) -> np.ndarray:
        """The batch the state's next update trains on: indices into the training data."""
        return self.of(state.epoch)[state.batch_in_epoch]

    def position(self, state: TrainState) -> float:
        """Passes over the data the state has made, counted fractionally (2.5: halfway through the
        third), as the budget's max_epochs measures them."""
        if state.batch_in_epoch == 0:  # an epoch's start: no need to make its batches to know
            return float(state.epoch)
        return state.epoch + state.batch_in_epoch / len(self.of(state.epoch))

    def ended(self, state: TrainState) -> bool:
        """Whether the state's epoch has had all its batches."""
        return state.batch_in_epoch >= len(self.of(state.epoch))
