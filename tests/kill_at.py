"""Run `mt` and SIGKILL it at a chosen moment: `python tests/kill_at.py POINT N -- mt-args...`.

A SIGKILL cannot be caught, so nothing in mt gets to clean up; this is the power cut or OOM
killer the resume promise is about. The points patch mt only to find the moment, never to
change what it does:
  step N          right after the N-th optimizer update, before anything records it
  replace N       during the N-th checkpoint save, written and fsynced but not yet renamed
  midwrite N      during the N-th checkpoint save, half its bytes on disk
  log N           after the N-th line of log.jsonl, half of the next one written
  hang N / die N  under torchrun, rank 1 only: after its N-th update, sleep for good / SIGKILL
                  itself
"""

from __future__ import annotations

import io
import os
import signal
import sys
import time


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _after(n: int):
    count = [0]

    def hit() -> bool:
        count[0] += 1
        return count[0] == n

    return hit


def install(point: str, n: int) -> None:
    import mt_cli.files as files_module
    import mt_cli.model.checkpoint as checkpoint_module
    import mt_cli.train.loop as train_module
    import mt_cli.train.progress as progress_module

    hit = _after(n)
    if point in ("hang", "die"):
        real_step = train_module.train_step

        def train_step(*args, **kwargs):
            result = real_step(*args, **kwargs)
            if os.environ.get("RANK") == "1" and hit():
                if point == "die":
                    _die()
                # A rank stuck in a collective never returns to Python, where mt's SIGTERM
                # handler (save, then stop) would run; torchrun kills it 30 s after its SIGTERM.
                # Here SIGTERM ends it at once: the test skips that grace period, nothing else.
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                while True:
                    time.sleep(60)
            return result

        train_module.train_step = train_step
    elif point == "step":
        real_step = train_module.train_step

        def train_step(*args, **kwargs):
            result = real_step(*args, **kwargs)
            if hit():
                _die()
            return result

        train_module.train_step = train_step
    elif point in ("replace", "midwrite"):
        torch_module = checkpoint_module.torch

        # the checkpoint module's `torch`: `save` patched, everything else passed through
        class Torch:
            def __getattr__(self, name):
                return getattr(torch_module, name)

            @staticmethod
            def save(obj, f):
                if point == "midwrite" and hit():
                    buffer = io.BytesIO()
                    torch_module.save(obj, buffer)
                    f.write(buffer.getvalue()[: buffer.tell() // 2])
                    f.flush()
                    os.fsync(f.fileno())
                    _die()
                torch_module.save(obj, f)
                if point == "replace" and hit():
                    files_module.os.replace = lambda *a: _die()

        checkpoint_module.torch = Torch()
    elif point == "log":
        real_json, lines = progress_module.json, [0]

        class Torn(str):
            def __add__(self, other):  # drop the newline: the line is cut short
                return str(self)

        # json with `dumps` patched; the torn line is flushed, then the next entry kills
        class Json:
            def __getattr__(self, name):
                return getattr(real_json, name)

            @staticmethod
            def dumps(obj):
                lines[0] += 1
                if lines[0] == n + 2:
                    _die()
                text = real_json.dumps(obj)
                return Torn(text[: len(text) // 2]) if lines[0] == n + 1 else text

        progress_module.json = Json()
    else:
        raise SystemExit(f"unknown kill point {point}")


if __name__ == "__main__":
    point, n = sys.argv[1], int(sys.argv[2])
    assert sys.argv[3] == "--"
    install(point, n)
    sys.argv = ["mt", *sys.argv[4:]]
    from mt_cli.cli import main

    main()
