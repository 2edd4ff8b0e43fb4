"""Where a run works and what every part of it knows: the run folder's files and the run's context
(config, log, process, device)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from mt_cli.config import Config
from mt_cli.train.distributed import Dist
from mt_cli.train.inputs import DataSpec, Log


@dataclass(frozen=True)
class TrainPaths:
    """The files of a run folder; the only place their names are spelled."""

    out: Path

    @property
    def last(self) -> Path:  # resumable: weights, optimizer, RNG, counters
        return self.out / "last.pt"

    @property
    def best(self) -> Path:  # the best validation BLEU so far
        return self.out / "best.pt"

    @property
    def best_step(self) -> Path:  # the best single step, kept when an average took best.pt's place
        return self.out / "best-step.pt"

    @property
    def averaged(self) -> Path:
        return self.out / "averaged.pt"

    @property
    def log(self) -> Path:
        return self.out / "log.jsonl"

    @property
    def config(self) -> Path:
        return self.out / "config.yaml"

    @property
    def run_info(self) -> Path:
        return self.out / "run.json"

    @property
    def tokenizer(self) -> Path:  # the run's own tokenizer, when it trained one
        return self.out / "tokenizer"

    @property
    def tensorboard(self) -> Path:
        return self.out / "tensorboard"

    def step(self, n: int) -> Path:
        return self.out / f"step{n}.pt"

    def numbered(self) -> list[Path]:
        """RUN/step<N>.pt files, oldest first."""
        found = [p for p in self.out.glob("step*.pt") if p.stem[4:].isdigit()]
        return sorted(found, key=lambda p: int(p.stem[4:]))


@dataclass(frozen=True)
class RunContext:
    """What every part of a run needs to know: where, with what config, how to log, which
    process of how many, on which device. `prepare` takes the context as given and hands the
    run its resolved one (the vocabulary sizes, the batch size of train.batch_tokens auto) before
    the first step; nothing changes it after that."""

    paths: TrainPaths
    data: DataSpec
    cfg: Config
    log: Log
    dist: Dist
    device: torch.device
