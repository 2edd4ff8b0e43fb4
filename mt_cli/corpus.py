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
from itertools import zip_longest
from pathlib import Path
from typing import Any

from mt_cli.errors import MtError
from mt_cli.text import BAD_UTF8_FIX, clean_line, iter_text_lines, open_bytes

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


def _text_pairs(src: Path, tgt: Path) -> Iterator[dict[str, Any]]:
    """Lines of two files in step; bad bytes replaced and flagged (the policy is applied later)."""
    bad: list[int] = []
    n_src = n_tgt = 0
    with open_bytes(src) as fs, open_bytes(tgt) as ft:
        lines = zip_longest(
            iter_text_lines(fs, str(src), "replace", bad), iter_text_lines(ft, str(tgt), "replace", bad)
        )
        for n, (s, t) in enumerate(lines, start=1):
            n_src, n_tgt = n_src + (s is not None), n_tgt + (t is not None)
            if s is not None and t is not None and n_src == n_tgt == n:
                yield {"src": s, "tgt": t, "line": n, "bad": bool(bad)}
            bad.clear()
    if n_src != n_tgt:
        raise MtError(f"{src} has {n_src} lines but {tgt} has {n_tgt}; the files must be line-aligned")


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
    """A table or dataset source as a `datasets.Dataset` with columns src and tgt (cleaned text)
    and line (1-based row). Text files are read by `_raw_chunks` instead (see the module note)."""
    ds = _load_dataset(source)
    column, src_key, tgt_key = _columns(ds, source)

    def pick(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        src = [t[src_key] for t in batch[column]] if column else batch[src_key]
        tgt = [t[tgt_key] for t in batch[column]] if column else batch[tgt_key]
        return {
            "src": [clean_line(s or "") for s in src],
            "tgt": [clean_line(t or "") for t in tgt],
            "line": [i + 1 for i in indices],
        }

    return ds.map(pick, batched=True, with_indices=True, remove_columns=ds.column_names, desc="reading")


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
    if source.src is not None:
        pairs = ((p["src"], p["tgt"], p["bad"], p["line"]) for p in _text_pairs(Path(source.src), Path(source.tgt)))
    else:
        texts = text_dataset(source)
        pairs = ((s, t, False, 0) for s, t in zip(texts["src"], texts["tgt"]))
    seen = 0
    for s, t, bad, line in pairs:
        if bad and on_bad_utf8 == "error":
            raise MtError(f"{source.describe()}: line {line}: not valid UTF-8; {BAD_UTF8_FIX}")
        if not s.strip() or not t.strip() or (bad and on_bad_utf8 == "skip"):
            continue
        seen += 1
        if len(picked) < n:  # reservoir sampling: every pair has the same chance, in one pass
            picked.append((s, t))
        elif (j := rng.randrange(seen)) < n:
            picked[j] = (s, t)
    if not picked:
        raise MtError(f"{source.describe()}: no sentence pairs with text on both sides")
    return [s for s, _ in picked], [t for _, t in picked]
