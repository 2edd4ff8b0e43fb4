"""Atomic file writes: a temporary file in the same folder, fsynced, then renamed over the target.

A crash or kill at any moment leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from mt_cli.errors import MtError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp makes files only their owner can read; a checkpoint or translation should get the
# permissions any other new file would, so that colleagues and other services can read it.
FILE_MODE = 0o666 & ~_umask()
DIR_MODE = 0o777 & ~_umask()


def temp_dir(parent: Path, prefix: str) -> Path:
    """A new folder in `parent` to fill and then rename into place, with a new folder's permissions."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(tmp, DIR_MODE)
    return tmp


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO]:
    """Open a temporary sibling of `path` for writing; it replaces `path` only on clean exit."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise MtError(f"{path}: cannot write here ({e.strerror})") from None
    try:
        os.fchmod(fd, FILE_MODE)
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding, newline=None if encoding is None else "\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise MtError(f"{path}: write failed ({e.strerror}); the previous file is unchanged") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)
