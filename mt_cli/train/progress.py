"""Training progress: on stderr a live bar in a terminal (plain lines anywhere else), and the
run's record, RUN/log.jsonl (with TensorBoard events when asked)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from mt_cli.errors import MtError

# the bar runs in thousandths of whichever limit (steps, epochs, minutes) ends the run first
UNITS = 1000


class TrainProgress:
    """`limited`: the run has a budget (train/budget.py), so the bar shows the fraction of it
    used."""

    def __init__(self, limited: bool, enabled: bool = True) -> None:
        self.enabled = enabled  # off on torchrun ranks past 0: one process reports
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal and enabled
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.live,
        )
        self.task = self.bar.add_task("starting", total=UNITS if limited else None)

    def update(self, entry: dict[str, Any], spent: float) -> None:
        """A log entry, with the fraction of the budget `spent` (which passes 1 by a little at the
        end)."""
        text = (
            f"step {entry['step']} | epoch {entry['epoch']} | loss {entry['loss']:.3f} | "
            f"lr {entry['lr']:.2e} | {entry['tokens_per_s']:.0f} tok/s | MFU "
            f"{100 * entry.get('mfu', 0):.1f}%"
        )
        if self.live:
            self.bar.update(self.task, completed=min(spent, 1.0) * UNITS, description=text)
        elif self.enabled:
            self.console.print(text, highlight=False)

    def note(self, message: str) -> None:
        if self.enabled:
            self.console.print(message, highlight=False)

    def __enter__(self) -> TrainProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)


Record = Callable[[dict[str, Any]], None]  # one log entry (a dict) to RUN/log.jsonl: a RunLog


class RunLog:
    """RUN/log.jsonl, one JSON object a line, flushed as written; under torchrun rank 0's only.

    With TensorBoard on, each number also goes to RUN/tensorboard; on resume, events past the
    resumed step are purged, as log.jsonl's entries are: they are redone."""

    def __init__(
        self, path: Path | None, tensorboard: Path | None = None, resumed_at: int = 0
    ) -> None:
        self.file: IO[str] | None = open(path, "a", encoding="utf-8") if path is not None else None
        self.board = (
            _tensorboard_writer(tensorboard, resumed_at) if tensorboard is not None else None
        )

    def __call__(self, entry: dict[str, Any]) -> None:
        if self.file is None:
            return
        self.file.write(json.dumps(entry) + "\n")
        self.file.flush()
        if self.board is not None:
            for key, value in entry.items():
                if key != "step" and isinstance(value, (int, float)):
                    self.board.add_scalar(
                        ("valid/" if key.startswith("valid") else "train/") + key,
                        value,
                        entry["step"],
                    )
            self.board.flush()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()
        if self.board is not None:
            self.board.close()


def _tensorboard_writer(folder: Path, resumed_at: int) -> Any:
    """torch's SummaryWriter, which needs the `tensorboard` package."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise MtError(
            "train.tensorboard needs the tensorboard package: pip install tensorboard"
        ) from None
    return SummaryWriter(str(folder), purge_step=resumed_at + 1 if resumed_at else None)
