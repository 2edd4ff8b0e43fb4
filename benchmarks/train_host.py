"""The host side of a training step: the time the training thread spends on its batches, against
the step.

    python benchmarks/train_host.py --data ../shared/data/multi30k --work /work/bench/host \\
        [--against /work/bench/base-tree --against-name "before"]

1. One batch built on one thread, Multi30k de-en tokenized into mt's cache: the per-sentence way
   (the cache's rows read as Python lists through `datasets`, then a tensor per sentence, as mt
   built its batches before) against mt's (one Arrow take, one vectorised pad, the real-token
   indices), at the CPU default of 2,048 tokens and at 235,929 (the batch `--batch-tokens auto`
   chose on an H100 for the base preset).
2. A real run, `mt train` (small preset, --max-steps, train.amp auto), in a process of its own:
   the seconds the training thread spends on batches (waiting for the prefetching thread; where
   the checkout builds batches on the training thread, reading and padding them) against its
   steps, and target tokens/s from its log (the windows after the first, median).
3. --against DIR: the same run from another checkout (a worktree of an earlier commit), the two
   taking turns over --rounds, each keeping its best.

Appended to benchmarks/RESULTS.md with the CPU named (unless --no-append).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPU_BATCH = 235_929  # the base preset's batch under --batch-tokens auto on an H100


def tokenizer_in(data: Path, work: Path) -> Path:
    """WORK/tokenizer: a joint 8k SentencePiece of Multi30k's de-en training pairs, trained once."""
    out = work / "tokenizer"
    if not out.is_dir():
        cmd = [sys.executable, "-m", "mt_cli", "tokenizer", "train", "--vocab-size", "8000"]
        cmd += ["--src", str(data / "train.de"), "--tgt", str(data / "train.en")]
        subprocess.run([*cmd, "--out", str(out)], check=True)
    return out


def build_rows(args) -> list[str]:
    """Part 1, in this process: ms per batch each way, best of a few tries each."""
    import numpy as np
    import torch

    from mt_cli.data.cache import TokenCorpus, build_cache
    from mt_cli.data.pairs import make_batches
    from mt_cli.data.sources import TextPair
    from mt_cli.data.tokenizer import EOS, PAD, Tokenizer
    from mt_cli.train.batches import Layout

    torch.set_num_threads(1)
    tok = Tokenizer.load(args.work / "tokenizer")
    source = TextPair(args.data / "train.de", args.data / "train.en")
    data = TokenCorpus(
        build_cache(source, tok, args.work / "cache", 1, print), 256, "drop", "error", "train"
    )

    def per_sentence(indices: np.ndarray) -> None:
        got = data.ds[data.rows[indices]]  # rows as Python lists
        for seqs in (
            got["src_ids"],
            [[2, *t] for t in got["tgt_ids"]],
            [[*t, EOS] for t in got["tgt_ids"]],
        ):
            out = torch.full((len(seqs), max(len(s) for s in seqs)), PAD, dtype=torch.long)
            for row, seq in enumerate(seqs):
                out[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)

    layout = Layout(data, 2, slice(0, 1), 1, False)
    rows = [
        "| batch (padded tokens) | pairs | per sentence, ms | mt, ms | faster |",
        "|---|---|---|---|---|",
    ]
    for size in (2048, GPU_BATCH):
        batches = make_batches(data.src_lens, data.tgt_lens, size, seed=0)
        picked = sorted(batches, key=len)[len(batches) // 2 : len(batches) // 2 + 5]  # median-sized
        best = {}
        for name, fn in (("per sentence", per_sentence), ("mt", layout.batch)):
            times = []
            for _ in range(3):
                for b in picked:
                    start = time.perf_counter()
                    fn(b)
                    times.append(time.perf_counter() - start)
            best[name] = statistics.median(times)
        ms = {k: 1000 * v for k, v in best.items()}
        rows.append(
            f"| {size:,} | {int(statistics.median(len(b) for b in picked)):,} | "
            f"{ms['per sentence']:.1f} | {ms['mt']:.2f} | {ms['per sentence'] / ms['mt']:.0f}x |"
        )
        print(rows[-1], flush=True)
    return rows


WORKER = r"""
import json, sys, time
from pathlib import Path
import mt_cli.train.loop as loop
import mt_cli.train.step as step
from mt_cli.cli import app

spent = {"batch": 0.0, "step": 0.0, "steps": 0}
timed = lambda key, fn: (lambda *a, **k: _timed(key, fn, a, k))
def _timed(key, fn, a, k):
    start = time.perf_counter()
    try:
        return fn(*a, **k)
    finally:
        spent[key] += time.perf_counter() - start
if hasattr(loop, "Prefetcher"):  # batches built ahead: the training thread waits for them
    real_next = loop.Prefetcher.next
    loop.Prefetcher.next = lambda self, *a: _timed("batch", real_next, (self, *a), {})
else:  # batches built in the step: reading and padding them is the host's work
    from mt_cli.data.cache import TokenCorpus
    real_take = TokenCorpus.take
    TokenCorpus.take = lambda self, *a: _timed("batch", real_take, (self, *a), {})
    step.collate = timed("batch", step.collate)
real_step = loop.train_step
def counted(*a, **k):
    spent["steps"] += 1
    return _timed("step", real_step, a, k)
loop.train_step = counted
out = sys.argv[1]
sys.argv = ["mt", *sys.argv[2:]]
try:
    code = app(standalone_mode=False)
finally:
    Path(out).write_text(json.dumps(spent))
sys.exit(code or 0)
"""


def run_once(args, tree: Path, out: Path) -> dict:
    """One `mt train` of --steps in a fresh process importing mt from `tree`."""
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    d, w = args.data, args.work
    options = {
        "--train-src": d / "train.de",
        "--train-tgt": d / "train.en",
        "--valid-src": w / "val.de",  # 100 lines: validation only ends each run
        "--valid-tgt": w / "val.en",
        "--preset": "small",
        "--max-steps": args.steps,
        "--out": out,
        "--cache": w / "cache",
        "--tokenizer": w / "tokenizer",
    }
    sets = [
        "train.valid_every=100000",
        "train.log_every=20",
        "decode.beam=1",
        "train.tune_length_penalties=[]",
        "train.compile_after_minutes=0",
        "train.average_last=0",
    ]
    cmd = [sys.executable, "-c", WORKER, str(out) + ".json", "train"]
    cmd += [str(x) for kv in options.items() for x in kv]
    cmd += [x for s in sets for x in ("--set", s)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"mt train failed in {tree}:\n{done.stderr[-3000:]}")
    spent = json.loads(Path(str(out) + ".json").read_text())
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    rates = [e["tokens_per_s"] for e in log if "tokens_per_s" in e][1:]
    amp = "bf16" if "bf16 autocast" in done.stderr else "fp32"
    return {**spent, "tok/s": statistics.median(rates), "amp": amp}


def run_rows(args) -> list[str]:
    systems = {"mt": HERE.parent}
    if args.against:
        systems[args.against_name] = args.against
    best: dict[str, dict] = {}
    for r in range(args.rounds):
        for i, (name, tree) in enumerate(systems.items()):
            got = run_once(args, tree, args.work / f"run-{i}-{r}")
            print(f"  {name}: {got}", flush=True)
            if name not in best or got["tok/s"] > best[name]["tok/s"]:
                best[name] = got
    rows = [
        "| checkout | precision | steps | on batches, ms a step | a step, ms | batches' share "
        "| tgt tok/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, b in best.items():
        per_batch, per_step = 1000 * b["batch"] / b["steps"], 1000 * b["step"] / b["steps"]
        inline = name != "mt" or b["batch"] == 0
        # where batches are built in the step, its time holds theirs; otherwise they are apart
        whole = per_step if inline else per_step + per_batch
        rows.append(
            f"| {name} | {b['amp']} | {b['steps']} | {per_batch:.2f} | {whole:.0f} | "
            f"{100 * per_batch / whole:.2f}% | {b['tok/s']:,.0f} |"
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, required=True, help="Multi30k: train.{de,en}, val.{de,en}")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--against", type=Path, help="another checkout, run the same way")
    p.add_argument("--against-name", default="before")
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    # each run starts in its checkout's folder
    args.data, args.work = args.data.resolve(), args.work.resolve()
    args.against = args.against.resolve() if args.against else None
    args.work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    from results import append_section, commit
    from speed import machine

    measured = commit()
    for lang in ("de", "en"):  # validation only ends each run: 100 lines keep it short
        lines = (args.data / f"val.{lang}").read_text(encoding="utf-8").splitlines()[:100]
        (args.work / f"val.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer_in(args.data, args.work)
    body = [
        f"{machine()}; torch {__import__('torch').__version__}.",
        "",
        "One batch, built on one thread:",
        "",
    ]
    body += build_rows(args)
    body += [
        "",
        f"`mt train`, small preset, {args.steps} steps, taking turns over {args.rounds} rounds, "
        "best kept:",
        "",
    ]
    body += run_rows(args)
    body += ["", f"`python benchmarks/train_host.py {' '.join(sys.argv[1:])}`"]
    text = "\n".join(body)
    print(text)
    if not args.no_append:
        append_section("The host side of a training step", text, measured)


if __name__ == "__main__":
    main()
