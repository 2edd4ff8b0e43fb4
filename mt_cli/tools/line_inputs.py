"""The files `mt translate` reads line by line: the input, and those read in step with it (a
target prefix, or target terms, per input line), plus the glossary TSV:

    Hund<TAB>hound        (one entry per line: source term, a tab, target term)

A side file must have exactly one line per input line. When the input is a file, both are counted
before anything is decoded, so a mismatch costs no time and writes nothing; from stdin it is found
as the lines come.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mt_cli.data.text import iter_text_lines
from mt_cli.decode.glossary import Glossary, load_glossary
from mt_cli.errors import MtError
from mt_cli.files import check_readable


def input_lines(path: Path | None, what: str = "input") -> Iterator[str]:
    r"""A text file's lines (stdin when None), decoded as they are read.

    Only "\n" ends a line: "\r" at a line's end is part of its CRLF ending, and one elsewhere
    becomes a space; the other characters str.splitlines breaks at (\x0b, \x0c, \x1c-\x1e, \x85,
    \u2028, \u2029) are text inside the line. So the lines are what `wc -l` counts (plus a last line
    without "\n"), and count_lines agrees. Bytes that are not UTF-8 stop the run with one MtError
    naming the file, the line and the byte's column, never guessed at: a translation of U+FFFD would
    look right and be wrong. On stdout, the chunks of lines before it are out already; a file output
    is left as it was."""
    if path is None:
        yield from iter_text_lines(sys.stdin.buffer, "<stdin>")
        return
    check_readable(path, f"{what} file")
    with open(path, "rb") as f:
        yield from iter_text_lines(f, str(path))


def count_lines(path: Path) -> int:
    """Lines as input_lines yields them: newlines, plus a last line without one."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            n, last = n + block.count(b"\n"), block[-1:]
    return n + (last != b"\n")


class LineFile:
    """A file read in step with the input: one line per input line."""

    def __init__(self, path: Path, what: str) -> None:
        check_readable(path, f"{what} file")
        self.path, self.what, self.read = path, what, 0
        self._lines = input_lines(path, what)

    def _mismatch(self, detail: str) -> MtError:
        return MtError(
            f"{self.path}: {detail}; give one {self.what} per input line (an empty line for none)"
        )

    def expect(self, total: int) -> None:
        """Refuse, before decoding, a file whose line count is not the input's."""
        n = count_lines(self.path)
        if n != total:
            raise self._mismatch(f"{n} lines, but the input has {total}")

    def take(self, n: int) -> list[str]:
        got = list(itertools.islice(self._lines, n))
        self.read += len(got)
        if len(got) < n:
            raise self._mismatch(f"{self.read} lines, but the input has more")
        return got

    def finish(self, total: int) -> None:
        if next(self._lines, None) is not None:
            raise self._mismatch(f"more lines than the input's {total}")


@dataclass(frozen=True)
class LineInputs:
    """What `mt translate` may read besides its input: prefixes, terms per line, a glossary, and
    the target language of a multi-target model."""

    prefix_file: Path | None = None
    constraints_file: Path | None = None
    glossary_file: Path | None = None
    target_lang: str | None = None  # the language to write, where the model writes several


class SideInputs:
    """The opened LineInputs: per chunk of input lines, their prefixes and target terms."""

    def __init__(self, inputs: LineInputs, input_path: Path | None) -> None:
        self.prefixes = LineFile(inputs.prefix_file, "prefix") if inputs.prefix_file else None
        self.terms = (
            LineFile(inputs.constraints_file, "tab-separated list of terms")
            if inputs.constraints_file
            else None
        )
        self.glossary: Glossary | None = (
            load_glossary(inputs.glossary_file) if inputs.glossary_file else None
        )
        if input_path is not None and input_path.is_file() and (self.prefixes or self.terms):
            total = count_lines(input_path)
            for f in (self.prefixes, self.terms):
                if f is not None:
                    f.expect(total)

    def for_chunk(self, lines: list[str]) -> tuple[list[str] | None, list[list[str]] | None]:
        prefixes = self.prefixes.take(len(lines)) if self.prefixes else None
        if self.terms is None and self.glossary is None:
            return prefixes, None
        given = (
            [parse_terms(t) for t in self.terms.take(len(lines))]
            if self.terms
            else [[] for _ in lines]
        )
        if self.glossary is not None:  # the glossary's terms for the line, then those given for it
            given = [_union(self.glossary.terms_for(line), g) for line, g in zip(lines, given)]
        return prefixes, given

    def finish(self, total: int) -> None:
        for f in (self.prefixes, self.terms):
            if f is not None:
                f.finish(total)


def _union(first: list[str], then: list[str]) -> list[str]:
    return first + [t for t in then if t not in first]


def parse_terms(line: str) -> list[str]:
    """One line of a --constraints-file: target terms separated by tabs (an empty line: none)."""
    return [t.strip() for t in line.split("\t") if t.strip()]
