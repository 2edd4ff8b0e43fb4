"""The batches a run trains on, built ahead on a thread of their own, so that the training thread
(and the GPU it feeds) never waits for the host to read and pad the next one.

The order is the epochs' (train/epochs.py), so prefetching changes nothing a run computes: a
resumed run builds the same batches from where it stopped. Each batch is read as flat arrays and
padded in one vectorised operation (data/ragged.py); on CUDA it is pinned, so that the copy to the
GPU runs without blocking (`to_device`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from mt_cli.data.cache import TokenCorpus
from mt_cli.data.collate import collate
from mt_cli.data.mixture import MixedCorpus
from mt_cli.data.tokenizer import PAD
from mt_cli.train.epochs import Epochs

if TYPE_CHECKING:
    from mt_cli.train.setup import Run

# src (B, S), tgt_in and tgt_out (B, T), and the flat indices (N,) of tgt_out's real tokens: found
# here, on the host, so that the step never asks a GPU where they are (nonzero would wait for it)
Share = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]

# Batches built ahead of the one training: two keep the queue full across an epoch's turn (a
# new epoch's batches are made first) without holding many large batches in memory.
AHEAD = 2


@dataclass(frozen=True)
class Batch:
    """One global batch as this process trains it: its shares as padded tensors, and the counts
    the step's loss is scaled by (the same on every process)."""

    epoch: int
    position: int  # its place in the epoch: the state's batch_in_epoch when it trains
    indices: np.ndarray  # rows of the training data, the whole global batch
    shares: list[Share]  # this process's shares, in order
    weights: list[float]  # 1.0, or 0.0 for an empty share (a stand-in row: DDP needs gradients)
    tokens: int  # target tokens with their EOS, over every process's shares
    src_tokens: int


def shares(batch: np.ndarray, n: int) -> list[np.ndarray]:
    """A global batch cut into n disjoint shares of nearly equal size (some empty if it is tiny)."""
    return [batch[i::n] for i in range(n)]


@dataclass(frozen=True)
class Layout:
    """How a run cuts and places its batches: the same for every batch it trains on."""

    data: TokenCorpus | MixedCorpus
    start_token: int  # what the decoder reads first
    mine: slice  # this process's shares among the global batch's
    n_shares: int  # processes x accumulate
    pin: bool  # pinned memory, for a non-blocking copy to a GPU

    @staticmethod
    def of(run: Run) -> Layout:
        d, acc = run.dist, run.cfg.train.accumulate
        mine = slice(d.rank * acc, (d.rank + 1) * acc)
        pin = run.device.type == "cuda"
        return Layout(run.train_data, run.model.start_token, mine, d.world * acc, pin)

    def batch(self, indices: np.ndarray, epoch: int = 0, position: int = 0) -> Batch:
        """This process's shares of a global batch, padded (and pinned). numpy and
        torch.from_numpy only: this runs off the training thread, where a parallel torch
        operator would start an OpenMP team of its own."""
        out: list[Share] = []
        weights = []
        for share in shares(indices, self.n_shares)[self.mine]:
            weights.append(1.0 if len(share) else 0.0)
            src, tgt_in, tgt_out = collate(
                *self.data.take(share if len(share) else indices[:1]), self.start_token
            )
            at = torch.from_numpy(np.flatnonzero(tgt_out.numpy() != PAD))
            if self.pin:
                src, tgt_in, tgt_out, at = (t.pin_memory() for t in (src, tgt_in, tgt_out, at))
            out.append((src, tgt_in, tgt_out, at))
        n_tgt = int((self.data.tgt_lens[indices] + 1).sum())  # each target's EOS included
        n_src = int(self.data.src_lens[indices].sum())
        return Batch(epoch, position, indices, out, weights, n_tgt, n_src)


class Prefetcher:
    """Batches in the run's order from (epoch, position) on, built by a daemon thread up to
    AHEAD batches ahead. `next()` gives them one by one; an error in the thread is raised there."""

    def __init__(self, layout: Layout, batch_tokens: int, seed: int) -> None:
        # Epochs of its own: the training thread's answers position() and ended() meanwhile.
        self.epochs = Epochs(layout.data, batch_tokens, seed)
        self.layout = layout
        self.queue: queue.Queue = queue.Queue(AHEAD)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.at: tuple[int, int] = (-1, -1)

    def _order(
        self, epoch: int, position: int
    ) -> Iterator[tuple[int, int, np.ndarray, tuple[int, int]]]:
        """(epoch, position, indices, the place of the batch after it), from (epoch, position)."""
        while True:
            batches = self.epochs.of(epoch)
            for k in range(position, len(batches)):
                yield (
                    epoch,
                    k,
                    batches[k],
                    (epoch, k + 1) if k + 1 < len(batches) else (epoch + 1, 0),
                )
            epoch, position = epoch + 1, 0

    def _work(self, epoch: int, position: int) -> None:
        try:
            for e, k, indices, following in self._order(epoch, position):
                if not self._put((self.layout.batch(indices, e, k), following)):
                    return
        except BaseException as error:  # handed to the training thread, which raises it
            self._put(error)

    def _put(self, item: object) -> bool:
        while not self.stopping.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def next(self, epoch: int, position: int) -> Batch:
        """The batch at (epoch, position): the one after the last given, or (after a jump, or the
        first time) a new thread started from there."""
        if self.thread is None or self.at != (epoch, position):
            self.close()
            self.stopping.clear()
            self.queue = queue.Queue(AHEAD)
            self.thread = threading.Thread(
                target=self._work, args=(epoch, position), name="mt-batches", daemon=True
            )
            self.thread.start()
        item = self.queue.get()
        if isinstance(item, BaseException):
            self.close()
            raise item
        batch, self.at = item
        return batch

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the thread (it ends at its next put); its batches are dropped."""
        if self.thread is not None:
            self.stopping.set()
            self.thread.join()
            self.thread = None


def to_device(share: Share, device: torch.device) -> Share:
    """A share on the training device; pinned memory makes the copy to a GPU asynchronous."""
    src, tgt_in, tgt_out, at = (t.to(device, non_blocking=True) for t in share)
    return src, tgt_in, tgt_out, at
