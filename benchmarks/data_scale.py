"""Data at scale: a synthetic corpus of millions of pairs, its tokenized cache, then 50 steps.

    python benchmarks/data_scale.py --pairs 5000000 --work /tmp/mt-scale

Writes the corpus (once; reused from --work), trains a tokenizer on its first 200k pairs (not
timed), then runs `mt train` twice as a subprocess while sampling the RSS of its whole process
tree (mt and its tokenizing workers) every 0.1 s:
  1. cold: the cache is built (--workers 2), then 50 training steps;
  2. warm: a new run folder on the same cache, 50 steps.
Preparation throughput (pairs/s) is printed next to plain Python reading the same two files.
The figures are appended to benchmarks/RESULTS.md (and with --docs put into docs/training.md's
table).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path

import numpy as np
from results import append_section, copy_newest
from speed import machine

MT = [sys.executable, "-m", "mt_cli"]


def write_corpus(src: Path, tgt: Path, pairs: int, seed: int = 0) -> None:
    """Source sentences of 4-30 made-up words; the target maps each word and reverses the order."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzäöü"))
    words = ["".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(20000)]
    target = {w: w[::-1].upper()[:1] + w[::-1][1:] for w in words}
    zipf = 1.0 / np.arange(1, len(words) + 1)
    zipf /= zipf.sum()
    with open(src, "w", encoding="utf-8") as fs, open(tgt, "w", encoding="utf-8") as ft:
        for start in range(0, pairs, 100_000):
            n = min(100_000, pairs - start)
            lengths = rng.integers(4, 31, n)
            ids = rng.choice(len(words), int(lengths.sum()), p=zipf)
            at = 0
            s_lines, t_lines = [], []
            for length in lengths:
                sent = [words[i] for i in ids[at : at + length]]
                at += length
                s_lines.append(" ".join(sent).capitalize() + ".\n")
                t_lines.append(" ".join(target[w] for w in reversed(sent)) + ".\n")
            fs.writelines(s_lines)
            ft.writelines(t_lines)


def plain_python_read(src: Path, tgt: Path) -> tuple[int, float]:
    """The floor to compare with: read both files in step and strip each line, nothing else."""
    started = time.perf_counter()
    n = 0
    with open(src, encoding="utf-8") as fs, open(tgt, encoding="utf-8") as ft:
        for s, t in zip(fs, ft):
            s.strip(), t.strip()
            n += 1
    return n, time.perf_counter() - started


def plain_python_encode(src: Path, tgt: Path, tokenizer: Path, limit: int) -> float:
    """Pairs/s of reading and SentencePiece-encoding the first `limit` pairs in one process, no
    cache."""
    from mt_cli.data.tokenizer import Tokenizer

    tok = Tokenizer.load(tokenizer)
    started, n = time.perf_counter(), 0
    with open(src, encoding="utf-8") as fs, open(tgt, encoding="utf-8") as ft:
        pairs = zip(fs, ft)
        while n < limit and (chunk := list(islice(pairs, 2000))):
            (
                tok.encode_src([s.strip() for s, _ in chunk]),
                tok.encode_tgt([t.strip() for _, t in chunk]),
            )
            n += len(chunk)
    return n / (time.perf_counter() - started)


def tree_rss_mb(pid: int) -> tuple[float, float]:
    """Resident memory of a process and all its descendants, from /proc: (all, anonymous).

    "All" includes the pages of the memory-mapped cache that were read, which are the kernel's
    page cache, shared and dropped under pressure; "anonymous" is memory that only this tree
    holds (Python objects, tensors, numpy arrays)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total = anon = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon += int(line.split()[1])
        except OSError:
            pass
    return total / 1024, anon / 1024


def run_measured(cmd: list[str], log: Path) -> tuple[float, float, float, int]:
    """(seconds, peak tree RSS in MB, peak anonymous RSS, exit code) of a command; output to
    `log`."""
    started = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        peak = peak_anon = 0.0
        while proc.poll() is None:
            rss, anon = tree_rss_mb(proc.pid)
            peak, peak_anon = max(peak, rss), max(peak_anon, anon)
            time.sleep(0.1)
    return time.perf_counter() - started, peak, peak_anon, proc.returncode


def prepare(w: Path, pairs: int) -> tuple[Path, Path, Path]:
    """The corpus (written once, then reused), a 100-pair validation set, and a tokenizer trained
    on the first 200k pairs (not timed): (source, target, tokenizer)."""
    w.mkdir(parents=True, exist_ok=True)
    src, tgt = w / f"train{pairs}.src", w / f"train{pairs}.tgt"
    if not (src.is_file() and tgt.is_file()):
        started = time.perf_counter()
        write_corpus(src, tgt, pairs)
        print(
            f"wrote {pairs} pairs ({(src.stat().st_size + tgt.stat().st_size) >> 20} MB) in "
            f"{time.perf_counter() - started:.0f} s"
        )
    n_tok = min(200_000, pairs - 100)
    for side, path in (("src", src), ("tgt", tgt)):
        with open(path, encoding="utf-8") as f:
            head = list(islice(f, n_tok + 100))
        (w / f"head.{side}").write_text("".join(head[:n_tok]))
        # 100 pairs: validation is not what is measured
        (w / f"valid.{side}").write_text("".join(head[n_tok:]))
    tok = w / "tokenizer"
    if not tok.is_dir():
        cmd = [
            *MT,
            "tokenizer",
            "train",
            "--src",
            w / "head.src",
            "--tgt",
            w / "head.tgt",
            "--out",
            tok,
        ]
        subprocess.run(list(map(str, cmd)), check=True)
    return src, tgt, tok


def train_twice(
    w: Path, src: Path, tgt: Path, tok: Path, cache: Path, steps: int, workers: int
) -> list[tuple]:
    """`mt train` cold (building `cache`) then warm (reusing it): a row per run with its wall
    seconds, peak tree and anonymous RSS, and median training tokens/s."""
    shutil.rmtree(cache, ignore_errors=True)
    rows: list[tuple] = []
    for label in ("cold (builds the cache)", "warm (reuses it)"):
        run, log = w / f"run-{len(rows)}", w / f"run-{len(rows)}.log"
        shutil.rmtree(run, ignore_errors=True)
        cmd = [
            *MT,
            "train",
            "--train-src",
            src,
            "--train-tgt",
            tgt,
            "--valid-src",
            w / "valid.src",
            "--valid-tgt",
            w / "valid.tgt",
            "--tokenizer",
            tok,
            "--cache",
            cache,
            "--out",
            run,
            "--preset",
            "small",
            "--max-steps",
            steps,
            "--workers",
            workers,
            "--device",
            "cpu",
            "--set",
            f"train.valid_every={steps}",
            "--set",
            "train.log_every=10",
            "--set",
            "decode.beam=1",
        ]
        seconds, peak, anon, rc = run_measured(list(map(str, cmd)), log)
        if rc != 0:
            sys.exit(f"mt train failed; see {log}")
        entries = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines()]
        tps = float(np.median([e["tokens_per_s"] for e in entries if "tokens_per_s" in e]))
        rows.append((label, seconds, peak, anon, tps))
        print(
            f"{label}: {seconds:.0f} s in all, peak RSS {peak:,.0f} MB, anonymous {anon:,.0f} MB "
            f"(mt and its workers), training {tps:,.0f} tgt tok/s"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=5_000_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mt-scale"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument(
        "--docs",
        "--readme",
        dest="docs",
        action="store_true",
        help="also put the table into docs/training.md's data-scale section",
    )
    a = ap.parse_args()
    src, tgt, tok = prepare(a.work, a.pairs)
    n, seconds = plain_python_read(src, tgt)
    plain = n / seconds
    print(f"plain Python read: {n} pairs in {seconds:.1f} s ({plain:,.0f} pairs/s)")
    encode = plain_python_encode(src, tgt, tok, 200_000)
    print(
        f"plain Python read + SentencePiece encode, one process: {encode:,.0f} pairs/s (first 200k "
        "pairs)"
    )
    cache = a.work / "cache"
    rows = train_twice(a.work, src, tgt, tok, cache, a.steps, a.workers)
    info = json.loads(next(cache.glob("*/mt-cache.json")).read_text())
    size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) >> 20
    prep = info["pairs"] / info["seconds"]
    print(
        f"cache: {info['pairs']} pairs in {info['seconds']:.0f} s ({prep:,.0f} pairs/s, "
        f"{a.workers} workers), "
        f"{size} MB on disk; plain Python: reading {plain:,.0f} pairs/s, + encoding {encode:,.0f}"
    )
    body = (
        "\n".join(
            [
                f"{a.pairs:,} synthetic pairs, {a.workers} workers; {machine()}.",
                "",
                "| run | wall s | peak RSS MB (tree) | peak anonymous MB | train tgt tok/s |",
                "|---|---|---|---|---|",
                *[
                    f"| {r[0]} | {r[1]:.0f} | {r[2]:,.0f} | {r[3]:,.0f} | {r[4]:,.0f} |"
                    for r in rows
                ],
                "",
                f"- cache build: {prep:,.0f} pairs/s ({info['seconds']:.0f} s, read + tokenize + "
                f"write, {size} MB on disk)",
                f"- plain Python reading the same two files: {plain:,.0f} pairs/s; reading and "
                "encoding them with "
                f"SentencePiece in one process, no cache: {encode:,.0f} pairs/s (first 200k pairs)",
                f"- command: `python benchmarks/data_scale.py --pairs {a.pairs} --workers "
                f"{a.workers} --steps {a.steps}`",
            ]
        )
        + "\n"
    )
    append_section("data_scale.py", body)
    if a.docs:
        copy_newest("data_scale.py", "data-scale")


if __name__ == "__main__":
    main()
