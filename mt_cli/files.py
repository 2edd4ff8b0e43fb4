"""Atomic file writes: a temporary file in the same folder, fsynced, then renamed over the target;
and the checks that a path can be read, or written, before any work depends on it.

A crash or kill at any moment leaves either the old file or the new one, never half of one; the
temporary file a kill leaves behind is removed by the next write of the same file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
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
    """A new folder in `parent` to fill and then rename into place, with a new folder's
    permissions."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(tmp, DIR_MODE)
    return tmp


def check_readable(path: Path, what: str) -> None:
    """Refuse, with one line naming `path` and what is wrong with it, a `what` ("input file",
    "checkpoint") that cannot be read as a file: missing, a folder, or without read permission."""
    path = Path(path)
    if path.is_dir():
        raise MtError(f"{path}: a folder, not a file; give the {what} itself (a file in it)")
    if not path.exists():
        raise MtError(f"{path}: {what} not found")
    if not path.is_file():
        raise MtError(f"{path}: not a regular file (a pipe or a device); give the {what} as a file")
    if not os.access(path, os.R_OK):
        raise MtError(
            f"{path}: the {what} is not readable (permission denied); "
            "chmod u+r it or run as its owner"
        )


def check_writable(path: Path) -> None:
    """Refuse, before any work, an output that could not be written: a folder, or a place whose
    nearest existing folder is a file or forbids writing (missing folders are made)."""
    path = Path(path)
    if path.is_dir():
        raise MtError(f"{path}: a folder, not a file; name the output file itself")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise MtError(f"{path}: cannot write here: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise MtError(
            f"{path}: cannot write in {parent} (permission denied); "
            "write somewhere else or chmod u+w it"
        )


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO]:
    """Open a temporary sibling of `path` for writing; it replaces `path` only on clean exit, with
    `path`'s permissions when it exists (as an edit in place keeps them)."""
    path = Path(path)
    check_writable(path)
    try:
        keep = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else FILE_MODE
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise MtError(f"{path}: cannot write here ({e.strerror})") from None
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(
            fd, mode, encoding=encoding, newline=None if encoding is None else "\n"
        ) as f:
            # Held until the rename below: another run's _remove_stale_temps leaves a locked file
            # alone.
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            _remove_stale_temps(path, Path(tmp))
            os.fchmod(f.fileno(), keep)
            yield f
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise MtError(
            f"{path}: write failed ({e.strerror}); the previous file is unchanged"
        ) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remove_stale_temps(path: Path, own: Path) -> None:
    """Remove the temporary files of `path` that killed runs left: named as atomic_open names them
    (mkstemp's 8 random characters, so another file's temporaries never match), older than `own`,
    and locked by no live writer. Nothing else would ever remove them."""
    pattern = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp")
    own_time = own.stat().st_mtime_ns
    for entry in os.scandir(own.parent):
        if entry.name == own.name or not pattern.fullmatch(entry.name):
            continue
        try:
            if (
                not entry.is_file(follow_symlinks=False)
                or entry.stat(follow_symlinks=False).st_mtime_ns >= own_time
            ):
                continue
            with open(entry.path, "rb") as f:
                # BlockingIOError: a live run is writing it
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.unlink(entry.path)
        except OSError:
            continue  # being written, already gone, or not ours to remove: left as it is


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)


def pair_paths(prefix: Path, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """PREFIX.de and PREFIX.en where the languages are known and differ (so that mt train reads
    them from the suffixes), else PREFIX.src and PREFIX.tgt."""
    known = src_lang and tgt_lang and src_lang != tgt_lang
    src, tgt = (src_lang, tgt_lang) if known else ("src", "tgt")
    return prefix.parent / f"{prefix.name}.{src}", prefix.parent / f"{prefix.name}.{tgt}"
