"""Where a decoding run's time goes: the torch profiler's table for `Translator.translate`.

    python benchmarks/decode_profile.py --checkpoint RUN/best.pt --src-file ../shared/data/multi30k/test2016.de \\
        [--beam 5] [--precision fp32|int8] [--no-shortlist] [--n 512]

Translates the first --n lines once untimed (warm-up), then again under the profiler, and prints
the operators by their own CPU time, with the share of the wall time that no operator accounts
for (Python between operators: search's bookkeeping, module calls).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

from mt_cli.decode.translator import Translator


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--no-shortlist", action="store_true")
    p.add_argument("--rows", type=int, default=25)
    args = p.parse_args()
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    tr = Translator.load(args.checkpoint, "cpu", beam=args.beam, batch_size=64, precision=args.precision,
                         shortlist=not args.no_shortlist)  # fmt: skip
    tr.translate(lines)
    start = time.perf_counter()
    tr.translate(lines)
    plain = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        tr.translate(lines)
        wall = time.perf_counter() - start
    events = prof.key_averages()
    # Top-level operators only (self time sums to the time spent inside any operator).
    inside = sum(e.self_cpu_time_total for e in events) / 1e6
    print(f"{len(lines)} lines, beam {args.beam}, {args.precision}, shortlist {not args.no_shortlist}: "
          f"{len(lines) / plain:.1f} sent/s unprofiled; profiled wall {wall:.2f} s, in operators {inside:.2f} s "
          f"({100 * inside / wall:.0f}%), outside (Python) {100 * (1 - inside / wall):.0f}%")  # fmt: skip
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
