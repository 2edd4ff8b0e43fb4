"""Where sentence pairs come from, one class per kind of source: two line-aligned text files
(`TextPair`, optionally .gz), one table file (`Table`: TSV, CSV, JSONL or Parquet, optionally
.gz), or a Hugging Face dataset by name or local folder (`HubDataset`).

Every source answers the same questions: what it is called (`describe`), what it holds
(`fingerprint`), its pairs in chunks for the tokenized cache (`chunks`), and, for a small split
such as validation, all its pairs as text in memory (`read`, a `Corpus`).

Line-aligned text is read by mt's own reader, not by `datasets`' "text" builder: that one
splits lines at a lone carriage return (silently misaligning a parallel corpus) and cannot name
the line holding bad bytes.
"""

from __future__ import annotations

import hashlib
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count, islice
from pathlib import Path
from typing import Any

from mt_cli.config import CORPUS_CHUNK_LINES
from mt_cli.data.text import (
    BAD_UTF8_FIX,
    check_aligned,
    clean_line,
    has_empty_side,
    iter_text_lines,
    open_bytes,
    read_lines,
)
from mt_cli.errors import MtError

CHUNK = CORPUS_CHUNK_LINES  # pairs per chunk
TABLE_BUILDERS = {
    ".tsv": "csv",
    ".csv": "csv",
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
}

Progress = Callable[[int, int], None]  # (done, total); total 0 when unknown
Chunk = tuple[list, list, int]  # (source lines, target lines, first line number)


@dataclass(frozen=True)
class Corpus:
    """A split's pairs as text, in memory, with what reading left out."""

    src: list[str]
    tgt: list[str]
    dropped_empty: int = 0
    # pairs with bytes that are not UTF-8: dropped ("skip") or repaired ("replace")
    bad_utf8: int = 0


class Source(ABC):
    @abstractmethod
    def describe(self) -> str:
        """How the user gave it, for messages and run.json."""

    @abstractmethod
    def content_parts(self) -> list[str]:
        """What identifies its contents: file digests, or the dataset's own fingerprint."""

    @abstractmethod
    def chunks(self, progress: Progress) -> Iterator[Chunk]:
        """Raw bytes from text files, cleaned strings from a table or dataset; `decoded` turns
        either into text. The cache's workers decode and tokenize, so the reader only reads."""

    @abstractmethod
    def read(self, on_bad_utf8: str = "error") -> Corpus:
        """All pairs as text (for a small split), those with an empty side dropped and counted."""

    def files(self) -> list[Path]:
        return []

    def fingerprint(self) -> str:
        """The sha256 that keys the tokenized cache and that a resumed run must see again."""
        return hashlib.sha256("\0".join(self.content_parts()).encode()).hexdigest()


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _must_exist(*paths: Path) -> None:
    for path in paths:
        if not Path(path).is_file():
            raise MtError(f"{path}: file not found")


@dataclass(frozen=True)
class TextPair(Source):
    """Two line-aligned UTF-8 text files (.gz too): line i of `src` translates to line i of
    `tgt`."""

    src: Path
    tgt: Path

    def __post_init__(self) -> None:
        _must_exist(self.src, self.tgt)

    def describe(self) -> str:
        return f"{self.src} / {self.tgt}"

    def files(self) -> list[Path]:
        return [Path(self.src), Path(self.tgt)]

    def content_parts(self) -> list[str]:
        return [file_digest(p) for p in self.files()] + ["", ""]  # no column names

    def chunks(self, progress: Progress) -> Iterator[Chunk]:
        src, tgt = Path(self.src), Path(self.tgt)
        # a .gz file's position is not its size's
        total = 0 if src.suffix == ".gz" else src.stat().st_size
        n = 0
        with open_bytes(src) as fs, open_bytes(tgt) as ft:
            while True:
                s, t = list(islice(fs, CHUNK)), list(islice(ft, CHUNK))
                if len(s) != len(t):
                    n_src = n + len(s) + sum(1 for _ in fs)
                    n_tgt = n + len(t) + sum(1 for _ in ft)
                    raise MtError(
                        f"{src} has {n_src} lines but {tgt} has {n_tgt}; "
                        "the files must be line-aligned"
                    )
                if not s:
                    return
                yield s, t, n + 1
                n += len(s)
                progress(fs.tell() if total else n, total)

    def read(self, on_bad_utf8: str = "error") -> Corpus:
        return read_parallel(Path(self.src), Path(self.tgt), on_bad_utf8)


def read_parallel(src_path: Path, tgt_path: Path, on_bad_utf8: str = "error") -> Corpus:
    """Line-aligned source and target files; pairs with an empty side are dropped and counted.

    `on_bad_utf8`: "error" stops at the first undecodable byte, "skip" drops the pairs that hold
    one (both sides, so the files stay aligned), "replace" keeps them with U+FFFD in its place.
    """
    bad_src: list[int] = []
    bad_tgt: list[int] = []
    src = read_lines(src_path, on_bad_utf8, bad_src, BAD_UTF8_FIX)
    tgt = read_lines(tgt_path, on_bad_utf8, bad_tgt, BAD_UTF8_FIX)
    check_aligned(src_path, src, tgt_path, tgt)
    bad = {n - 1 for n in bad_src + bad_tgt}
    skip = bad if on_bad_utf8 == "skip" else set()
    keep = [i for i, (s, t) in enumerate(zip(src, tgt)) if not has_empty_side(s, t)]
    keep = [i for i in keep if i not in skip]
    if not keep:
        raise MtError(f"{src_path} / {tgt_path}: no sentence pairs with text on both sides")
    empty = len(src) - len(keep) - len(skip)  # what was left out and not for its bytes
    return Corpus(
        [src[i] for i in keep], [tgt[i] for i in keep], dropped_empty=empty, bad_utf8=len(bad)
    )


class _Tabular(Source):
    """A source that `datasets` loads: columns named by `src_lang`/`tgt_lang`, or the keys of a
    "translation" column ({"de": ..., "en": ...}); a TSV file's first two columns need no names."""

    src_lang: str | None
    tgt_lang: str | None

    @abstractmethod
    def load(self) -> Any:
        """The `datasets.Dataset` as stored."""

    def texts(self) -> Any:
        """The source as a `datasets.Dataset` with columns src and tgt (cleaned text)."""
        ds = self.load()
        column, src_key, tgt_key = self._columns(ds)

        def pick(batch: dict[str, list]) -> dict[str, list]:
            src = [t[src_key] for t in batch[column]] if column else batch[src_key]
            tgt = [t[tgt_key] for t in batch[column]] if column else batch[tgt_key]
            return {
                "src": [clean_line(s or "") for s in src],
                "tgt": [clean_line(t or "") for t in tgt],
            }

        return ds.map(pick, batched=True, remove_columns=ds.column_names, desc="reading")

    def _columns(self, ds: Any) -> tuple[str | None, str, str]:
        """(translation column or None, source key, target key)."""
        src_key, tgt_key = self.src_lang or "src", self.tgt_lang or "tgt"
        if src_key in ds.column_names and tgt_key in ds.column_names:
            return None, src_key, tgt_key
        if "translation" in ds.column_names and self.src_lang and self.tgt_lang:
            return "translation", src_key, tgt_key
        raise MtError(
            f"{self.describe()}: no {src_key!r} and {tgt_key!r} columns (found "
            f"{', '.join(ds.column_names)}); "
            "name them as the pair's source_lang and target_lang (a 'translation' column of {lang: "
            "text} also works)"
        )

    def chunks(self, progress: Progress) -> Iterator[Chunk]:
        ds = self.texts()
        for start in range(0, len(ds), CHUNK):
            rows = ds[start : start + CHUNK]
            progress(start + len(rows["src"]), len(ds))
            yield rows["src"], rows["tgt"], start + 1

    def read(self, on_bad_utf8: str = "error") -> Corpus:
        texts = self.texts()
        src, tgt = texts["src"], texts["tgt"]
        keep = [i for i, (s, t) in enumerate(zip(src, tgt)) if not has_empty_side(s, t)]
        if not keep:
            raise MtError(f"{self.describe()}: no sentence pairs with text on both sides")
        return Corpus(
            [src[i] for i in keep], [tgt[i] for i in keep], dropped_empty=len(texts) - len(keep)
        )

    def _loading(self, builder: str, *args: Any, **options: Any) -> Any:
        import datasets

        try:
            return datasets.load_dataset(builder, *args, **options)
        except MtError:
            raise
        # `datasets` raises many types; the user needs the source and the reason
        except Exception as e:
            raise MtError(
                f"{self.describe()}: could not load ({type(e).__name__}: {str(e)[:300]})"
            ) from None


def table_kind(path: Path) -> str | None:
    suffixes = path.suffixes[-2:] if path.suffix == ".gz" else path.suffixes[-1:]
    return next((s for s in suffixes if s in TABLE_BUILDERS), None)


@dataclass(frozen=True)
class Table(_Tabular):
    """One file of pairs: .tsv (source<TAB>target, no header), .csv, .jsonl/.json or .parquet (.gz
    too)."""

    path: Path
    src_lang: str | None = None
    tgt_lang: str | None = None

    def __post_init__(self) -> None:
        _must_exist(self.path)
        if table_kind(Path(self.path)) is None:
            raise MtError(
                f"{self.path}: unknown table format; "
                "use .tsv, .csv, .jsonl, .json or .parquet (or .gz)"
            )

    def describe(self) -> str:
        return str(self.path)

    def files(self) -> list[Path]:
        return [Path(self.path)]

    def content_parts(self) -> list[str]:
        return [file_digest(Path(self.path)), self.src_lang or "", self.tgt_lang or ""]

    def load(self) -> Any:
        kind = table_kind(Path(self.path))
        options: dict[str, Any] = {}
        if kind == ".tsv":  # parallel TSV: no header, no quoting (quotes are text)
            options = {
                "delimiter": "\t",
                "header": None,
                "column_names": ["src", "tgt"],
                "quoting": 3,
            }
        return self._loading(
            TABLE_BUILDERS[str(kind)], data_files=str(self.path), split="train", **options
        )


@dataclass(frozen=True)
class HubDataset(_Tabular):
    """A Hugging Face dataset, by hub name or local folder, one split of it."""

    name: str
    config: str | None = None
    split: str = "train"
    src_lang: str | None = None
    tgt_lang: str | None = None

    def describe(self) -> str:
        return f"{self.name}{'/' + self.config if self.config else ''} [{self.split}]"

    def content_parts(self) -> list[str]:
        return [self.load()._fingerprint, self.src_lang or "", self.tgt_lang or ""]

    def load(self) -> Any:
        return self._loading(self.name, self.config, split=self.split)


def decoded(lines: list, first: int, bad: set[int]) -> list[str]:
    """A chunk's lines as text: bytes decoded and cleaned as everywhere, with the line numbers of
    bytes that are not UTF-8 (replaced by U+FFFD) added to `bad`; table text as it is."""
    if not lines or isinstance(lines[0], str):
        return lines
    found: list[int] = []
    text = list(iter_text_lines(lines, "", "replace", found, start=first))
    bad.update(found)
    return text


def sample_texts(
    source: Source, n: int, seed: int, on_bad_utf8: str
) -> tuple[list[str], list[str]]:
    """Up to `n` pairs drawn evenly from the whole source, for training a tokenizer on a corpus
    too large to hold (SentencePiece itself reads at most 2 million sentences)."""
    rng = random.Random(seed)
    picked: list[tuple[str, str]] = []
    seen = 0
    for src_raw, tgt_raw, first in source.chunks(lambda done, total: None):
        bad: set[int] = set()
        for line, s, t in zip(
            count(first), decoded(src_raw, first, bad), decoded(tgt_raw, first, bad)
        ):
            if line in bad and on_bad_utf8 == "error":
                raise MtError(f"{source.describe()}: line {line}: not valid UTF-8; {BAD_UTF8_FIX}")
            if has_empty_side(s, t) or (line in bad and on_bad_utf8 == "skip"):
                continue
            seen += 1
            if len(picked) < n:  # reservoir sampling: every pair has the same chance, in one pass
                picked.append((s, t))
            elif (j := rng.randrange(seen)) < n:
                picked[j] = (s, t)
    if not picked:
        raise MtError(f"{source.describe()}: no sentence pairs with text on both sides")
    return [s for s, _ in picked], [t for _, t in picked]
