"""Stopping a run cleanly: SIGINT (Ctrl-C) and SIGTERM ask training to stop after the current
step."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any


class StopSignals:
    """The first SIGINT or SIGTERM asks training to stop after the current step, which is then
    saved whole; a second one stops at once (KeyboardInterrupt), saving nothing. Handlers can only
    be set from the main thread; elsewhere signals keep their defaults."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
