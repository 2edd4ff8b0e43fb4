"""Progress of a long translation on stderr: lines done, lines/s and, when the total is known,
the time left. Only when stderr is a terminal: logs and pipes get nothing."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO


class Progress:
    def __init__(self, total: int | None, stream: IO[str], every_s: float = 0.5) -> None:
        self.total, self.stream, self.every_s = total, stream, every_s
        self.done, self.start, self._shown = 0, time.monotonic(), 0.0

    @classmethod
    def on_terminal(cls, total: Callable[[], int | None]) -> Progress | None:
        """A Progress on stderr if it is a terminal (only then is the total counted), else None."""
        return cls(total(), sys.stderr) if sys.stderr.isatty() else None

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._shown >= self.every_s:
            self._shown = now
            self.stream.write("\r" + self.line(now))
            self.stream.flush()

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        text = (
            f"{self.done:,} lines"
            + (f" of {self.total:,}" if self.total else "")
            + f", {rate:,.1f} lines/s"
        )
        if self.total and rate > 0:
            text += f", {_clock(max(self.total - self.done, 0) / rate)} left"
        return text

    def close(self) -> None:
        self.stream.write("\r" + self.line(time.monotonic()) + "\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return (
        f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )
