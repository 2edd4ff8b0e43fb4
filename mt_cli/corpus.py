"""Where sentence pairs come from: two line-aligned text files (optionally .gz), one table file
(TSV, CSV, JSONL or Parquet, optionally .gz), or a Hugging Face dataset by name or local folder.
Training reads them through the tokenized cache (`cache.py`); validation whole.

Line-aligned text is read by mt's own reader, not by `datasets`' "text" builder: that one
splits lines at a lone carriage return (silently misaligning a parallel corpus) and cannot name
the line holding bad bytes. Its lines are handed to `datasets` as they are read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count, islice
from pathlib import Path
from typing import Any

from mt_cli.errors import MtError
from mt_cli.text import BAD_UTF8_FIX, clean_line, iter_text_lines, open_bytes

CHUNK = 20_000  # pairs per chunk: large enough that the cached Arrow file has few record batches
TABLE_BUILDERS = {".tsv": "csv", ".csv": "csv", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}


@dataclass(frozen=True)
class Source:
    """One split's pairs: text files `src` + `tgt`, a `table` file, or a hub `dataset`.

    `src_lang`/`tgt_lang` name the columns of a table or dataset, or the keys of its
    "translation" column ({"de": ..., "en": ...}); a TSV file's first two columns need no names.
    """

    src: Path | None = None
    tgt: Path | None = None
    table: Path | None = None
    dataset: str | None = None
    config: str | None = None
    split: str = "train"
    src_lang: str | None = None
    tgt_lang: str | None = None

    def __post_init__(self) -> None:
        kinds = sum([self.src is not None or self.tgt is not None, self.table is not None, self.dataset is not None])
        if kinds != 1 or (self.src is None) != (self.tgt is None):
            raise MtError("give one source per split: --*-src and --*-tgt files, a table file, or --dataset")
        for path in (self.src, self.tgt, self.table):
            if path is not None and not Path(path).is_file():
                raise MtError(f"{path}: file not found")
        if self.table is not None and _table_kind(Path(self.table)) is None:
            raise MtError(f"{self.table}: unknown table format; use .tsv, .csv, .jsonl, .json or .parquet (or .gz)")

    def describe(self) -> str:
        if self.src is not None:
            return f"{self.src} / {self.tgt}"
        if self.table is not None:
            return str(self.table)
        return f"{self.dataset}{'/' + self.config if self.config else ''} [{self.split}]"

    def files(self) -> list[Path]:
        return [Path(p) for p in (self.src, self.tgt, self.table) if p is not None]


def _table_kind(path: Path) -> str | None:
    suffixes = path.suffixes[-2:] if path.suffix == ".gz" else path.suffixes[-1:]
    return next((s for s in suffixes if s in TABLE_BUILDERS), None)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprint(source: Source) -> str:
    """What the source holds: the sha256 of its files, or the dataset's own fingerprint."""
    if source.dataset is None:
        parts = [file_digest(p) for p in source.files()]
    else:
        parts = [_load_dataset(source)._fingerprint]
    parts += [source.src_lang or "", source.tgt_lang or ""]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _load_dataset(source: Source):
    import datasets

    try:
        if source.table is not None:
            kind = _table_kind(Path(source.table))
            options: dict[str, Any] = {}
            if kind == ".tsv":  # parallel TSV: no header, no quoting (quotes are text)
                options = {"delimiter": "\t", "header": None, "column_names": ["src", "tgt"], "quoting": 3}
            return datasets.load_dataset(TABLE_BUILDERS[kind], data_files=str(source.table), split="train", **options)
        return datasets.load_dataset(source.dataset, source.config, split=source.split)
    except MtError:
        raise
    except Exception as e:  # `datasets` raises many types; the user needs the source and the reason
        raise MtError(f"{source.describe()}: could not load ({type(e).__name__}: {str(e)[:300]})") from None


def _columns(ds, source: Source) -> tuple[str | None, str, str]:
    """(translation column or None, source key, target key) for a loaded table or dataset."""
    src_key, tgt_key = source.src_lang or "src", source.tgt_lang or "tgt"
    if src_key in ds.column_names and tgt_key in ds.column_names:
        return None, src_key, tgt_key
    if "translation" in ds.column_names and source.src_lang and source.tgt_lang:
        return "translation", src_key, tgt_key
    raise MtError(
        f"{source.describe()}: no {src_key!r} and {tgt_key!r} columns (found {', '.join(ds.column_names)}); "
        "name them with --src-lang and --tgt-lang (a 'translation' column of {lang: text} also works)"
    )


def text_dataset(source: Source):
    """A table or dataset source as a `datasets.Dataset` with columns src and tgt (cleaned text).
    Text files are read by `raw_chunks` instead (see the module note)."""
    ds = _load_dataset(source)
    column, src_key, tgt_key = _columns(ds, source)

    def pick(batch: dict[str, list]) -> dict[str, list]:
        src = [t[src_key] for t in batch[column]] if column else batch[src_key]
        tgt = [t[tgt_key] for t in batch[column]] if column else batch[tgt_key]
        return {"src": [clean_line(s or "") for s in src], "tgt": [clean_line(t or "") for t in tgt]}

    return ds.map(pick, batched=True, remove_columns=ds.column_names, desc="reading")


def raw_chunks(source: Source, progress) -> Iterator[tuple[list, list, int]]:
    """(source lines, target lines, first line number) in chunks: raw bytes from text files,
    cleaned strings from a table or dataset; `decoded` turns either into text. The cache's
    workers decode and tokenize the chunks, so the reading process only reads."""
    if source.src is None:
        ds = text_dataset(source)
        for start in range(0, len(ds), CHUNK):
            rows = ds[start : start + CHUNK]
            progress(start + len(rows["src"]), len(ds))
            yield rows["src"], rows["tgt"], start + 1
        return
    src, tgt = Path(source.src), Path(source.tgt)
    total = 0 if src.suffix == ".gz" else src.stat().st_size  # a .gz file's position is not its size's
    n = 0
    with open_bytes(src) as fs, open_bytes(tgt) as ft:
        while True:
            s, t = list(islice(fs, CHUNK)), list(islice(ft, CHUNK))
            if len(s) != len(t):
                n_src = n + len(s) + sum(1 for _ in fs)
                n_tgt = n + len(t) + sum(1 for _ in ft)
                raise MtError(f"{src} has {n_src} lines but {tgt} has {n_tgt}; the files must be line-aligned")
            if not s:
                return
            yield s, t, n + 1
            n += len(s)
            progress(fs.tell() if total else n, total)


def decoded(lines: list, first: int, bad: set[int]) -> list[str]:
    """A chunk's lines as text: bytes decoded and cleaned as everywhere, with the line numbers of
    bytes that are not UTF-8 (replaced by U+FFFD) added to `bad`; table text as it is."""
    if not lines or isinstance(lines[0], str):
        return lines
    found: list[int] = []
    text = list(iter_text_lines(lines, "", "replace", found, start=first))
    bad.update(found)
    return text


def read_pairs(source: Source, on_bad_utf8: str):
    """A small split (validation) whole in memory, as a `data.Corpus`, empty pairs dropped."""
    from mt_cli.data import Corpus, read_parallel

    if source.src is not None:
        return read_parallel(Path(source.src), Path(source.tgt), on_bad_utf8)
    texts = text_dataset(source)
    keep = [i for i, (s, t) in enumerate(zip(texts["src"], texts["tgt"])) if s.strip() and t.strip()]
    if not keep:
        raise MtError(f"{source.describe()}: no sentence pairs with text on both sides")
    src, tgt = texts["src"], texts["tgt"]
    return Corpus([src[i] for i in keep], [tgt[i] for i in keep], dropped_empty=len(texts) - len(keep))


def sample_texts(source: Source, n: int, seed: int, on_bad_utf8: str) -> tuple[list[str], list[str]]:
    """Up to `n` pairs drawn evenly from the whole source, for training a tokenizer on a corpus
    too large to hold (SentencePiece itself reads at most 2 million sentences)."""
    import random

    rng = random.Random(seed)
    picked: list[tuple[str, str]] = []
    seen = 0
    for src_raw, tgt_raw, first in raw_chunks(source, lambda done, total: None):
        bad: set[int] = set()
        for line, s, t in zip(count(first), decoded(src_raw, first, bad), decoded(tgt_raw, first, bad)):
            if line in bad and on_bad_utf8 == "error":
                raise MtError(f"{source.describe()}: line {line}: not valid UTF-8; {BAD_UTF8_FIX}")
            if not s.strip() or not t.strip() or (line in bad and on_bad_utf8 == "skip"):
                continue
            seen += 1
            if len(picked) < n:  # reservoir sampling: every pair has the same chance, in one pass
                picked.append((s, t))
            elif (j := rng.randrange(seen)) < n:
                picked[j] = (s, t)
    if not picked:
        raise MtError(f"{source.describe()}: no sentence pairs with text on both sides")
    return [s for s, _ in picked], [t for _, t in picked]
