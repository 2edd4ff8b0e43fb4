"""torch.compile for training: the compiled training step against the eager one, on this device.

    python benchmarks/train_compile.py --data ../shared/data/multi30k --work /work/bench/host \\
        [--device cuda --preset base --batch-tokens 65536 --amp bf16] [--steps 150]

Each mode trains a fresh model (the same seed) on the same Multi30k batches with fused AdamW, in
a process of its own, the modes taking turns over --rounds: eager (mt's default step, with its
fused output-layer loss), compiled (train.compile=true: the whole objective under torch.compile
with dynamic shapes, logits at the real target tokens only) and, with --trunk, only the encoder
and decoder compiled (the fused loss eager). Target tokens/s over the steps after the first 10
(the first compiles), seconds to the end of the first step, and the mean loss of the last 50
steps, which should agree. Appended to benchmarks/RESULTS.md (unless --no-append).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

WORKER = r"""
import dataclasses, json, sys, time
from pathlib import Path
import torch
from mt_cli.config import build_config
from mt_cli.data.cache import TokenCorpus, build_cache
from mt_cli.data.pairs import make_batches
from mt_cli.data.sources import TextPair
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.device import autocast
from mt_cli.model.loss import TranslationLoss
from mt_cli.model.transformer import build_model
from mt_cli.train.batches import Layout, to_device
from mt_cli.train.hardware import CompiledOrEager

job = json.loads(sys.argv[1])
work, data_dir, device = Path(job["work"]), Path(job["data"]), torch.device(job["device"])
if device.type == "cpu":
    torch.set_num_threads(job["threads"])
tok = Tokenizer.load(work / "tokenizer")
source = TextPair(data_dir / "train.de", data_dir / "train.en")
data = TokenCorpus(build_cache(source, tok, work / "cache", 1, print), 256, "drop", "error", "t")
shape = build_config(job["preset"]).model
vocab = {"src_vocab_size": tok.src_vocab_size, "tgt_vocab_size": tok.tgt_vocab_size}
shape = dataclasses.replace(shape, **vocab)
torch.manual_seed(0)
model = build_model(shape).to(device).train()
objective = TranslationLoss(model, 0.1)
if job["mode"] == "compiled":
    objective = CompiledOrEager(objective, print)
elif job["mode"] == "trunk":
    model.hidden = torch.compile(model.hidden, dynamic=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
amp = torch.bfloat16 if job["amp"] == "bf16" else None
layout = Layout(data, model.start_token, slice(0, 1), 1, device.type == "cuda")
batches = make_batches(data.src_lens, data.tgt_lens, job["batch_tokens"], seed=0)[: job["steps"]]
losses, seconds, tokens, first = [], 0.0, 0, 0.0
for i, rows in enumerate(batches):
    batch = layout.batch(rows)
    start = time.perf_counter()
    with autocast(amp, device):
        loss = objective(*to_device(batch.shares[0], device))
    (loss / batch.tokens).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    losses.append(loss.item() / batch.tokens)  # a sync: the step is timed whole
    took = time.perf_counter() - start
    first = first or took
    if i >= 10:
        seconds, tokens = seconds + took, tokens + batch.tokens
tail = losses[-50:]
print(json.dumps({"tok/s": tokens / seconds, "first": first, "loss": sum(tail) / len(tail)}))
"""


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, required=True, help="Multi30k: train.{de,en}")
    p.add_argument("--work", type=Path, required=True, help="holds tokenizer/ (train_host.py's)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--preset", default="small")
    p.add_argument("--amp", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch-tokens", type=int, default=2048)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--trunk", action="store_true", help="also the encoder and decoder compiled")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    args.data, args.work = args.data.resolve(), args.work.resolve()
    sys.path.insert(0, str(HERE))
    from results import append_section, commit
    from train_host import tokenizer_in

    tokenizer_in(args.data, args.work)

    measured = commit()
    modes = ["eager", "compiled"] + (["trunk"] if args.trunk else [])
    best: dict[str, dict] = {}
    for _ in range(args.rounds):
        for mode in modes:
            job = {**{k: str(v) for k, v in vars(args).items()}, "mode": mode}
            job.update(batch_tokens=args.batch_tokens, steps=args.steps, threads=args.threads)
            done = subprocess.run(
                [sys.executable, "-c", WORKER, json.dumps(job)], capture_output=True, text=True
            )
            if done.returncode != 0:
                sys.exit(f"{mode} failed:\n{done.stderr[-3000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"  {mode}: {got}", flush=True)
            if mode not in best or got["tok/s"] > best[mode]["tok/s"]:
                best[mode] = got
    where = args.device
    if args.device == "cpu":
        from speed import machine

        where = machine()
    else:
        import torch

        where = torch.cuda.get_device_name(torch.device(args.device))
    eager = best["eager"]["tok/s"]
    rows = [
        f"{where}; torch {__import__('torch').__version__}; {args.preset} preset, {args.amp}, "
        f"{args.batch_tokens:,}-token batches, {args.steps} steps, {args.rounds} round(s).",
        "",
        "| step | tgt tok/s | x eager | first step, s | loss, last 50 steps |",
        "|---|---|---|---|---|",
    ]
    for mode, b in best.items():
        rows.append(
            f"| {mode} | {b['tok/s']:,.0f} | {b['tok/s'] / eager:.2f} | {b['first']:.1f} | "
            f"{b['loss']:.3f} |"
        )
    rows += ["", f"`python benchmarks/train_compile.py {' '.join(sys.argv[1:])}`"]
    text = "\n".join(rows)
    print(text)
    if not args.no_append:
        append_section("torch.compile for training", text, measured)


if __name__ == "__main__":
    main()
