"""Where a training step's time goes: torch.profiler over a few steps of a real run's step.

    python benchmarks/train_profile.py --data ../shared/data/multi30k --work /tmp/profile \\
        --preset base --device cuda --amp bf16 --batch-tokens auto --steps 20

The run is prepared as `mt train` prepares it (tokenizer, cache, model, fused AdamW, the batch
size of --batch-tokens), its batches come from the same prefetching thread, and after --warmup
steps the next --steps are profiled. Printed (and appended to benchmarks/RESULTS.md unless
--no-append): the wall time of a step, the top 15 device kernels by their own time (CUDA) or
operators (CPU), and, on a GPU, the time it sat idle between kernels: the host gaps the next lever
would close.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def prepare_run(args):
    from mt_cli.config import build_config
    from mt_cli.train import distributed as ddp
    from mt_cli.train.context import RunContext, TrainPaths
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.setup import prepare

    d = args.data
    spec = DataSpec.text_files(
        d / "train.de", d / "train.en", d / "val.de", d / "val.en", cache=args.work / "cache"
    )
    train = {"device": args.device, "amp": args.amp, "batch_tokens": args.batch_tokens}
    cfg = build_config(args.preset, options={"train": {**train, "doctor": False}})
    device = torch.device(args.device)
    ctx = RunContext(TrainPaths(args.work / "run"), spec, cfg, print, ddp.Dist(), device)
    return prepare(ctx)


def gaps(prof, device: torch.device) -> tuple[float, float]:
    """(seconds the GPU ran kernels, seconds it sat idle between the first and the last)."""
    if device.type != "cuda":
        return 0.0, 0.0
    kernels = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    )
    busy = idle = 0.0
    end = kernels[0][0] if kernels else 0.0
    for start, stop in kernels:  # in microseconds; overlapping kernels count once
        if start > end:
            idle += start - end
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return busy / 1e6, idle / 1e6


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, required=True, help="Multi30k: train.{de,en}, val.{de,en}")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--preset", default="small")
    p.add_argument("--device", default="cpu")
    p.add_argument("--amp", default="auto")
    p.add_argument("--batch-tokens", type=int, default=0, help="0: auto, as --batch-tokens auto")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    from torch.profiler import ProfilerActivity, profile

    from mt_cli.train.batches import Layout, Prefetcher
    from mt_cli.train.step import read, train_step

    run = prepare_run(args)
    device, t = run.device, run.cfg.train
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    run.model.train()
    with Prefetcher(Layout.of(run), t.batch_tokens, t.seed) as ahead:
        at, results = (0, 0), []

        def steps(n: int) -> None:
            nonlocal at
            for _ in range(n):
                batch = ahead.next(*at)
                results.append(train_step(run, batch))
                at = (batch.epoch, batch.position + 1)

        steps(args.warmup)
        read(results)  # the warm-up done
        results.clear()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            start = time.perf_counter()
            steps(args.steps)
            figures = read(results)
            sync()
            wall = time.perf_counter() - start
    tokens = sum(f.tokens for f in figures)
    busy, idle = gaps(prof, device)
    sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort, row_limit=15, max_name_column_width=60)
    sys.path.insert(0, str(HERE))
    from results import append_section, commit
    from speed import machine

    where = torch.cuda.get_device_name(device) if cuda else machine()
    lines = [
        f"{where}; torch {torch.__version__}; preset {args.preset}, amp {run.amp or 'fp32'}, "
        f"{t.batch_tokens:,} tokens a batch; {args.steps} steps profiled after {args.warmup}.",
        "",
        f"- a step: {1000 * wall / args.steps:.1f} ms wall, {tokens / wall:,.0f} target tokens/s "
        "(under the profiler, which slows the host)",
    ]
    if cuda:
        lines.append(
            f"- the GPU: kernels {busy:.2f} s of {wall:.2f} s, idle between kernels "
            f"{idle:.2f} s ({100 * idle / wall:.1f}% of the wall time)"
        )
    lines += ["", "```", table, "```"]
    text = "\n".join(lines)
    print(text)
    if not args.no_append:
        append_section("Where a training step's time goes", text, commit())


if __name__ == "__main__":
    main()
