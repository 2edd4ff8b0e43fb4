"""mt's training step beside MarianMTModel's: the same config (a preset), the same batches, the
same optimizer (fused AdamW, clipping at 1.0), each in a process of its own importing only its own
library (benchmarks/speed_workers.py), taking turns over rounds, each keeping its fastest.

    python benchmarks/train_peers.py --data ../shared/data/multi30k --work /work/bench/peers \\
        --device cuda --preset base --amp bf16 --batch-tokens 65536 --steps 30

For a GPU what benchmarks/speed.py --parts training is for a CPU checkpoint: target tokens/s and
MFU (model FLOPs, counted on mt's model, whose linear layers Marian's match one for one, against
the data sheet's peak on a known GPU, else a matrix product timed on the device). The first 3
steps warm up and are not timed. Appended to benchmarks/RESULTS.md unless --no-append.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
SYSTEMS = {"mt": ("mt", None), "MarianMTModel (sdpa)": ("hf", "sdpa")}


def prepare(args) -> tuple[Path, dict, list[tuple[int, int, float]]]:
    """A checkpoint of the preset's shape (random weights), Marian's config of it, and the batches
    saved as tensors; (source tokens, target tokens, FLOPs) of each batch."""
    from mt_cli.config import build_config
    from mt_cli.data.cache import TokenCorpus, build_cache
    from mt_cli.data.collate import collate
    from mt_cli.data.pairs import make_batches
    from mt_cli.data.sources import TextPair
    from mt_cli.data.tokenizer import PAD, Tokenizer
    from mt_cli.interop.marian import marian_config
    from mt_cli.model import checkpoint
    from mt_cli.model.transformer import build_model
    from mt_cli.train.state import make_checkpoint
    from mt_cli.train.throughput import linear_flops

    tok = Tokenizer.load(args.work / "tokenizer")
    source = TextPair(args.data / "train.de", args.data / "train.en")
    cache = build_cache(source, tok, args.work / "cache", 1, print)
    data = TokenCorpus(cache, 256, "drop", "error", "train")
    cfg = build_config(args.preset)
    vocab = {"src_vocab_size": tok.src_vocab_size, "tgt_vocab_size": tok.tgt_vocab_size}
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, **vocab))
    model = build_model(cfg.model)
    ckpt = make_checkpoint(cfg, tok, model)
    path = args.work / f"peers-{args.preset}.pt"
    checkpoint.save(path, ckpt)
    marian = {
        k: v for k, v in marian_config(ckpt)[0].items() if k not in ("architectures", "model_type")
    }
    batches, sizes = [], []
    for rows in make_batches(data.src_lens, data.tgt_lens, args.batch_tokens, seed=0)[
        : args.steps + 3
    ]:
        src, tgt_in, tgt_out = collate(*data.take(rows), model.start_token)
        batches.append(tuple(x.int() for x in (src, tgt_in, tgt_out)))
        n_src, n_tgt = int((src != PAD).sum()), int((tgt_out != PAD).sum())
        sizes.append((n_src, n_tgt, linear_flops(model, n_src, n_tgt)))
    torch.save(batches, args.work / "peer-batches.pt")
    return path, marian, sizes


def in_worker(args, job: dict) -> dict:
    job_path, result_path = args.work / "job.json", args.work / "result.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    cmd = [sys.executable, str(HERE / "speed_workers.py"), str(job_path), str(result_path)]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"speed_workers.py failed ({job['family']}):\n{done.stderr[-3000:]}")
    result = json.loads(result_path.read_text(encoding="utf-8"))
    if not result["clean"]:
        sys.exit(f"a {job['family']} worker loaded {result['loaded']}: its timing is confounded")
    return result


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, required=True, help="Multi30k: train.{de,en}")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--preset", default="base")
    p.add_argument("--amp", choices=["fp32", "bf16"], default="bf16")
    p.add_argument("--batch-tokens", type=int, default=65536)
    p.add_argument("--steps", type=int, default=30, help="timed steps per system")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    args.data, args.work = args.data.resolve(), args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    from results import append_section, commit
    from train_host import tokenizer_in

    tokenizer_in(args.data, args.work)

    from mt_cli.data.tokenizer import PAD
    from mt_cli.train.throughput import peak_flops

    measured = commit()
    path, marian, sizes = prepare(args)
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, (family, attention) in SYSTEMS.items():
            job = {
                "kind": "train",
                "family": family,
                "precision": args.amp,
                "threads": args.threads,
                "device": args.device,
                "model": str(path),
                "marian_config": marian,
                "attention": attention,
                "pad": PAD,
                "warmup": 3,
                "batches_file": str(args.work / "peer-batches.pt"),
            }
            seconds = sum(in_worker(args, job)["seconds"])
            best[name] = min(seconds, best.get(name, float("inf")))
            print(f"  {name}: {seconds:.2f} s", flush=True)
    device = torch.device(args.device)
    peak, source = peak_flops(device, args.amp == "bf16")
    tokens, flops = sum(s[1] for s in sizes[3:]), sum(s[2] for s in sizes[3:])
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else source
    rows = [
        f"{where}; torch {torch.__version__}; {args.preset} preset, {args.amp}, "
        f"{args.batch_tokens:,}-token batches, {len(sizes) - 3} timed steps, {args.rounds} "
        f"round(s); MFU against {peak / 1e12:.2f} TFLOP/s ({source}).",
        "",
        "| training | tgt tok/s | MFU | x MarianMTModel |",
        "|---|---|---|---|",
    ]
    marian_rate = tokens / best["MarianMTModel (sdpa)"]
    for name, seconds in best.items():
        rate = tokens / seconds
        rows.append(
            f"| {name} | {rate:,.0f} | {100 * flops / seconds / peak:.1f}% | "
            f"{rate / marian_rate:.2f} |"
        )
    rows += ["", f"`python benchmarks/train_peers.py {' '.join(sys.argv[1:])}`"]
    text = "\n".join(rows)
    print(text)
    if not args.no_append:
        append_section("Training beside MarianMTModel", text, measured)


if __name__ == "__main__":
    main()
