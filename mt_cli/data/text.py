"""Text as mt reads it: strict UTF-8 lines, cleaned the same way everywhere.

Kept free of torch, so that the processes that tokenize a corpus start light.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, cast

from mt_cli.errors import MtError

UTF8_HINT = "convert the file to UTF-8, e.g. with iconv"
BAD_UTF8_FIX = f"{UTF8_HINT}, or set train.on_bad_utf8 to skip (drop such pairs) or replace"


def has_empty_side(src: str, tgt: str) -> bool:
    """A pair with no text on one side (spaces count as none). Training drops it, `mt doctor` warns
    of it and `mt clean` removes it: the one statement of the rule."""
    return not src.strip() or not tgt.strip()


def read_lines(
    path: Path, on_bad_utf8: str = "error", bad: list[int] | None = None, hint: str = UTF8_HINT
) -> list[str]:
    """All lines of a UTF-8 text file, cleaned by `clean_line`.

    Undecodable bytes stop the run with the file and line named, rather than being guessed at,
    unless `on_bad_utf8` is "replace" (U+FFFD for each bad byte); their line numbers go to `bad`.
    """
    path = Path(path)
    if not path.is_file():
        raise MtError(f"{path}: file not found")
    with open_bytes(path) as f:
        return list(iter_text_lines(f, str(path), on_bad_utf8, bad, hint))


def open_bytes(path: Path) -> BinaryIO:
    """A text file for reading as bytes, decompressed when it ends in .gz."""
    if Path(path).suffix == ".gz":
        return cast(BinaryIO, gzip.open(path, "rb"))
    return open(path, "rb")


def iter_text_lines(
    stream: Iterable[bytes],
    name: str,
    on_bad_utf8: str = "error",
    bad: list[int] | None = None,
    hint: str = UTF8_HINT,
    start: int = 1,
) -> Iterator[str]:
    """Decode a binary stream line by line, so a huge file or stdin never sits in memory whole.

    `start`: the line number of the first line, when the lines are a chunk from further on."""
    for lineno, raw in enumerate(stream, start=start):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            if on_bad_utf8 == "error":
                raise MtError(
                    f"{name}:{lineno}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at column "
                    f"{e.start + 1}); {hint}"
                ) from None
            line = raw.decode("utf-8", errors="replace")
            if bad is not None:
                bad.append(lineno)
        yield clean_line(line, first=lineno == 1)


def clean_line(line: str, first: bool = False) -> str:
    """Without its line ending, a leading BOM (first line) and stray carriage returns: a \r left
    inside a line would become part of a vocabulary piece or of an output line."""
    if first:
        line = line.removeprefix("\ufeff")
    return line.rstrip("\r\n").replace("\r", " ")


def check_aligned(path_a: Path, lines_a: list[str], path_b: Path, lines_b: list[str]) -> None:
    """Parallel files, or hypotheses and references, must have one line for each other's line."""
    if len(lines_a) != len(lines_b):
        raise MtError(
            f"{path_a} has {len(lines_a)} lines but {path_b} has {len(lines_b)}; "
            "the files must be line-aligned"
        )
