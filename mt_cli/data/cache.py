"""The tokenized cache that training reads: one memory-mapped Arrow file per corpus and tokenizer,
so a 50-million-pair corpus is never held in RAM; only its lengths are.

No torch here (nor in what it imports): spawned tokenizing workers import this module.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from mt_cli.data.language_tokens import Encoder
from mt_cli.data.ragged import Ragged
from mt_cli.data.sources import CHUNK, Source, decoded
from mt_cli.data.text import BAD_UTF8_FIX, has_empty_side
from mt_cli.errors import MtError
from mt_cli.files import temp_dir

CACHE_FORMAT = 2  # bump when the cached columns or layout change


def _features() -> Any:
    """The cache's columns: what `_encode_chunk` makes."""
    from datasets import Features, Sequence, Value

    ids, n = Sequence(Value("int32")), Value("int32")
    flag = Value("bool")
    return Features(
        {
            "src_ids": ids,
            "tgt_ids": ids,
            "src_len": n,
            "tgt_len": n,
            "empty": flag,
            "bad": flag,
            "line": Value("int64"),
        }
    )


_WORKER_TOKENIZER: Encoder | None = None


def _start_worker(tokenizer: Encoder) -> None:
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = tokenizer


def _encode_chunk(chunk: tuple[list, list, int]) -> Any:
    """One chunk of pairs -> an Arrow record batch of token ids, lengths and flags (in a worker)."""
    import pyarrow as pa

    src_raw, tgt_raw, first = chunk
    bad: set[int] = set()
    src, tgt = decoded(src_raw, first, bad), decoded(tgt_raw, first, bad)
    tok = _WORKER_TOKENIZER
    assert tok is not None, "_start_worker sets the tokenizer first"
    src_ids, tgt_ids = tok.encode_src(src), tok.encode_tgt(tgt)
    columns = {
        "src_ids": pa.array(src_ids, pa.list_(pa.int32())),
        "tgt_ids": pa.array(tgt_ids, pa.list_(pa.int32())),
        "src_len": pa.array([len(x) for x in src_ids], pa.int32()),
        "tgt_len": pa.array([len(x) for x in tgt_ids], pa.int32()),
        "empty": pa.array([has_empty_side(a, b) for a, b in zip(src, tgt)]),
        "bad": pa.array([first + i in bad for i in range(len(src))]),
        "line": pa.array(range(first, first + len(src)), pa.int64()),
    }
    return pa.RecordBatch.from_pydict(columns)


def _encoded(
    chunks: Iterator, tokenizer: Encoder, workers: int, log: Callable[[str], None]
) -> Iterator:
    """Record batches in input order. With workers, a bounded window of chunks is in flight, so
    memory does not grow with the corpus (Pool.imap would read the whole input ahead). If the
    workers cannot run (a `__main__` that cannot be re-imported, say), this process tokenizes."""
    _start_worker(tokenizer)
    main_file = getattr(sys.modules["__main__"], "__file__", None)
    if workers > 1 and main_file is not None and not os.path.exists(main_file):
        log(
            "tokenizing in this process: "
            f"spawned workers cannot re-import a __main__ read from {main_file}"
        )
        workers = 1
    if workers <= 1:
        yield from map(_encode_chunk, chunks)
        return
    pending: deque = deque()  # (chunk, future), oldest first
    # spawn, not fork: the workers must not inherit torch's threads (or a CUDA context).
    ctx = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_start_worker, initargs=(tokenizer,)
        ) as pool:
            for chunk in chunks:
                pending.append((chunk, pool.submit(_encode_chunk, chunk)))
                if len(pending) >= 2 * workers:
                    yield pending[0][1].result()
                    pending.popleft()
            while pending:
                yield pending[0][1].result()
                pending.popleft()
    except BrokenProcessPool as e:
        log(f"tokenizing workers stopped ({e}); tokenizing in this process")
        yield from (_encode_chunk(chunk) for chunk, _ in pending)
        yield from map(_encode_chunk, chunks)


def cache_key(data_fingerprint: str, tokenizer: Encoder) -> str:
    state = tokenizer.to_state()

    # model bytes; an imported vocabulary's lists and files, as canonical JSON
    def digest(v: Any) -> str:
        if isinstance(v, bytes):
            return hashlib.sha256(v).hexdigest()
        return hashlib.sha256(json.dumps(v, sort_keys=True, default=digest).encode()).hexdigest()

    parts = [str(CACHE_FORMAT), data_fingerprint, *(digest(state[k]) for k in sorted(state))]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def build_cache(
    source: Source,
    tokenizer: Encoder,
    cache_root: Path,
    workers: int,
    log: Callable[[str], None],
    data_fingerprint: str | None = None,
) -> Path:
    """The tokenized cache of `source` under `cache_root` (one Arrow file), built once, by
    `workers` processes tokenizing chunks while this one reads and writes."""
    import pyarrow as pa
    from datasets.arrow_writer import ArrowWriter

    key = cache_key(data_fingerprint or source.fingerprint(), tokenizer)
    final = Path(cache_root) / key
    if (final / "mt-cache.json").is_file():
        return final
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    work = temp_dir(Path(cache_root), f".{key}.")
    try:
        started, said = time.perf_counter(), [time.perf_counter()]

        def progress(done: int, total: int) -> None:
            if time.perf_counter() - said[0] > 10:  # a line every 10 s: big corpora take minutes
                said[0] = time.perf_counter()
                log(
                    f"  tokenizing {source.describe()}: {100 * done / total:.0f}%"
                    if total
                    else f"  {done} lines"
                )

        log(f"{source.describe()}: tokenizing into {final} ({workers} worker(s))")
        writer = ArrowWriter(
            features=_features(), path=str(work / "data.arrow"), writer_batch_size=CHUNK
        )
        pairs = 0
        for batch in _encoded(source.chunks(progress), tokenizer, workers, log):
            writer.write_table(pa.Table.from_batches([batch]))
            pairs += batch.num_rows
        writer.finalize()
        writer.close()
        info = {
            "source": source.describe(),
            "pairs": pairs,
            "seconds": time.perf_counter() - started,
        }
        (work / "mt-cache.json").write_text(json.dumps(info) + "\n")
        try:
            os.replace(work, final)
        except OSError:
            # another process (or rank) finished the same cache first: theirs is as good
            if not (final / "mt-cache.json").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def wait_for_cache(
    data_fingerprint: str, tokenizer: Encoder, cache_root: Path, timeout_s: float
) -> Path:
    """For ranks other than 0: the cache that rank 0 builds, once it is whole."""
    final = Path(cache_root) / cache_key(data_fingerprint, tokenizer)
    deadline = time.monotonic() + timeout_s
    while not (final / "mt-cache.json").is_file():
        if time.monotonic() > deadline:
            raise MtError(
                f"{final}: rank 0 did not finish the tokenized cache within {timeout_s:.0f} s"
            )
        time.sleep(1.0)
    return final


class TokenCorpus:
    """A tokenized cache, memory-mapped: lengths in RAM (numpy), ids read per batch.

    Rows that training leaves out (an empty side; bad bytes under "skip"; over max_len under
    "drop") are left out by index, so the cache stays usable for any of those settings.
    """

    def __init__(
        self, path: Path, max_len: int | None, long_pairs: str, on_bad_utf8: str, name: str
    ) -> None:
        import datasets

        self.ds = datasets.Dataset.from_file(str(Path(path) / "data.arrow"))  # memory-mapped

        def col(name: str) -> np.ndarray:  # from the mapped Arrow table
            return self.ds.data.column(name).to_numpy()

        src_len, tgt_len = col("src_len").astype(np.int64), col("tgt_len").astype(np.int64)
        empty, bad = col("empty").astype(bool), col("bad").astype(bool)
        if bad.any() and on_bad_utf8 == "error":
            line = int(col("line")[int(np.argmax(bad))])
            raise MtError(f"{name}: line {line}: not valid UTF-8; {BAD_UTF8_FIX}")
        long = (src_len > max_len) | (tgt_len + 1 > max_len) if max_len else np.zeros_like(empty)
        drop = (
            empty
            | (bad if on_bad_utf8 == "skip" else False)
            | (long if long_pairs == "drop" else False)
        )
        self.rows = np.flatnonzero(~drop)
        if len(self.rows) == 0:
            raise MtError(f"{name}: no sentence pairs with text on both sides")
        self.max_len = max_len if long_pairs == "truncate" else None
        self.src_lens = (
            np.minimum(src_len[self.rows], self.max_len) if self.max_len else src_len[self.rows]
        )
        self.tgt_lens = (
            np.minimum(tgt_len[self.rows], self.max_len - 1) if self.max_len else tgt_len[self.rows]
        )
        self.counts = {
            "empty": int(empty.sum()),
            "bad_utf8": int(bad.sum()),
            "long": int((long & ~empty).sum()),
        }

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, indices: Iterable[int]) -> tuple[Ragged, Ragged]:
        """Source and target ids of the given pairs (positions among the kept rows), read with one
        Arrow take per column straight into flat arrays: no Python list per sentence."""
        import pyarrow as pa

        rows = pa.array(self.rows[np.asarray(indices, dtype=np.int64)])
        got = self.ds.data.table.select(["src_ids", "tgt_ids"]).take(rows)
        src, tgt = (_ragged(got.column(name)) for name in ("src_ids", "tgt_ids"))
        if self.max_len:  # --long-pairs truncate, as limit_length cuts (the source keeps its EOS)
            cut = self.max_len - 1
            ends = np.repeat(src.lengths, src.lengths)
            at = src.positions()
            src = src.keep((ends <= self.max_len) | (at < cut) | (at == ends - 1))
            tgt = tgt.keep(tgt.positions() < cut)
        return src, tgt


def _ragged(column: Any) -> Ragged:
    """An Arrow list<int32> column (maybe in chunks) as a Ragged of int64 ids."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lists = pa.concat_arrays(column.chunks) if column.num_chunks != 1 else column.chunk(0)
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    # flatten() respects a sliced array's offsets, where .values would not
    return Ragged(lists.flatten().to_numpy(zero_copy_only=False).astype(np.int64), lengths)
