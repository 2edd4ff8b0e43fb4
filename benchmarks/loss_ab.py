"""A/B of mt's training loss: the plain label-smoothed loss on full logits against the fused,
chunked output-layer loss, two fresh models taking turns, fastest of --rounds each.

    python benchmarks/loss_ab.py --checkpoint checkpoints/speed/de-en-10min/best.pt \\
        --train-src ../shared/data/multi30k/train.de --train-tgt ../shared/data/multi30k/train.en \\
        --precision bf16

Prints target tokens/s of each; benchmarks/RESULTS.md "What each lever did" quotes it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from speed import training_batches  # this folder's benchmark helpers

from mt_cli.data.collate import collate
from mt_cli.data.tokenizer import PAD
from mt_cli.device import autocast
from mt_cli.model import checkpoint
from mt_cli.model.loss import label_smoothed_loss, output_layer_loss
from mt_cli.model.transformer import build_model


def plain(model, src, tgt_in, tgt_out, chunk):
    keep = tgt_out != PAD
    return label_smoothed_loss(model(src, tgt_in, keep), tgt_out[keep], 0.1)[0] / keep.sum()


def fused(model, src, tgt_in, tgt_out, chunk):
    keep = tgt_out != PAD
    h = model.hidden(src, tgt_in, keep)
    return (
        output_layer_loss(h, model.output_projection.weight, tgt_out[keep], 0.1, chunk) / keep.sum()
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--train-src", type=Path, required=True)
    p.add_argument("--train-tgt", type=Path, required=True)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--chunk", type=int, default=256)
    p.add_argument("--train-steps", type=int, default=25)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(2)
    ckpt = checkpoint.load(args.checkpoint)
    pairs, batches = training_batches(ckpt, args)
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, loss_of in (("plain", plain), ("fused", fused)):
            torch.manual_seed(0)
            model = build_model(ckpt.config.model).train()
            optim = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
            seconds = tokens = 0.0
            for i, batch in enumerate(batches):
                src, tgt_in, tgt_out = collate(*pairs.take(batch), PAD)
                start = time.perf_counter()
                with autocast(args.precision == "bf16", torch.device("cpu")):
                    loss = loss_of(model, src, tgt_in, tgt_out, args.chunk)
                optim.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optim.step()
                if i >= 3:
                    seconds += time.perf_counter() - start
                    tokens += int((tgt_out != PAD).sum())
            best[name] = max(best.get(name, 0.0), tokens / seconds)
    print(
        f"{args.precision}, chunk {args.chunk}: plain {best['plain']:.0f}, fused "
        f"{best['fused']:.0f} tgt tok/s ({100 * (best['fused'] / best['plain'] - 1):+.1f}%)"
    )


if __name__ == "__main__":
    main()
