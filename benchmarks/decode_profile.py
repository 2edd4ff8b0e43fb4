"""Where a decoding run's time goes, and how close it runs to the machine's peak.

    python benchmarks/decode_profile.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de [--beam 5] [--precision fp32|bf16|int8] \\
        [--engine eager|compiled] [--no-shortlist] [--n 1000] [--append]

Translates the first --n lines once untimed (warm-up), then:
- timed with the engine's parts wrapped in clocks (encoder, self-attention, cross-attention,
  feed-forward, output layer, cache reorder, the rest of search), and the multiply-adds of every
  product counted from the shapes it ran on: the run's FLOP/s as a share of a large matrix
  product's on this machine in the precision's arithmetic (fp32, bf16, or int8 products,
  `torch._int_mm`), each timed in this process;
- again under the torch profiler: the operators by their own CPU time, and the share of wall
  time no operator accounts for (Python between operators).
--append adds the first table to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from results import append_section  # this folder's results helpers
from speed import machine  # the CPU and its flags, as every speed table names them
from torch.profiler import ProfilerActivity, profile

from mt_cli.decode import engine as engine_module
from mt_cli.decode import search as search_module
from mt_cli.decode import step_cache as step_cache_module
from mt_cli.decode.translator import Translator
from mt_cli.train.throughput import matmul_peak


def int8_peak(n: int = 2048, reps: int = 10) -> float:
    """Operations/s of an n x n int8 product with int32 sums (what int8 linear layers run on)."""
    a = torch.randint(-127, 127, (n, n), dtype=torch.int8)
    b = torch.randint(-127, 127, (n, n), dtype=torch.int8)
    torch._int_mm(a, b)
    start = time.perf_counter()
    for _ in range(reps):
        torch._int_mm(a, b)
    return 2 * n**3 * reps / (time.perf_counter() - start)


class Clocks:
    """Wall time per part and FLOPs per kind, gathered by wrapping the engine's methods."""

    def __init__(self) -> None:
        self.seconds: collections.Counter[str] = collections.Counter()
        self.flops: collections.Counter[str] = collections.Counter()
        self.restore: list[tuple[Any, str, Any]] = []

    def wrap(
        self, owner: Any, name: str, part: str, flops: Callable[..., float] | None = None
    ) -> None:
        real = getattr(owner, name)

        @functools.wraps(real)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = real(*args, **kwargs)
            self.seconds[part] += time.perf_counter() - start
            if flops is not None:
                self.flops[part] += flops(*args, **kwargs)
            return out

        self.restore.append((owner, name, real))
        setattr(owner, name, timed)

    def unwrap(self) -> None:
        for owner, name, real in reversed(self.restore):
            setattr(owner, name, real)


def linear_weights(module: torch.nn.Module) -> int:
    """Multiply-adds per row through every linear layer in `module`, whatever its arithmetic."""
    total = 0
    for m in module.modules():
        w = getattr(m, "weight_t", None)
        w = getattr(m, "weight", None) if w is None else w
        if (
            isinstance(w, torch.Tensor)
            and m is not module
            and w.dim() == 2
            and not isinstance(m, torch.nn.Embedding)
        ):
            total += w.numel()
    return total


def instrument(tr: Translator) -> Clocks:
    """Clocks on the engine's parts (decode.engine eager) and on search's reorder."""
    eng = tr.engine
    if not isinstance(eng, engine_module.Engine) or eng.compiled is not None:
        raise SystemExit(
            "decode_profile.py breaks down the uncompiled step of one model: use --engine eager"
        )
    clocks = Clocks()
    d = eng.cfg.d_model
    enc_w = linear_weights(eng.model.encoder)
    layer, n_layers = eng.step_fn.layers[0], len(eng.step_fn.layers)
    self_w = linear_weights(torch.nn.ModuleList([layer.qkv, layer.self_out]))
    cross_w = linear_weights(torch.nn.ModuleList([layer.cross_q, layer.cross_out]))
    ffn_w = linear_weights(torch.nn.ModuleList([layer.fc1, layer.fc2]))
    n_enc = eng.cfg.enc_layers
    clocks.wrap(
        type(eng),
        "encode",
        "encoder",  # products, and attention's 2 x d x S per token and layer
        lambda self, src, mask: 2.0 * src.numel() * (enc_w + n_enc * 2 * d * src.size(1)),
    )
    S = engine_module.StepLayer
    clocks.wrap(
        S,
        "_self_attention",
        "self-attention",
        lambda self, h, keys, values: 2.0 * h.size(0) * (self_w + 2 * d * keys.size(0)),
    )
    clocks.wrap(
        S,
        "_cross_attention",
        "cross-attention",
        lambda self, h, keys, values, mask: 2.0 * h.size(0) * (cross_w + 2 * d * keys.size(2)),
    )
    clocks.wrap(
        S,
        "cross_keys_values",
        "cross keys/values",
        lambda self, memory: 2.0 * memory.numel() * 2 * d,
    )
    # The step's own: every layer's feed-forward and the output layer over the batch's vocabulary.
    clocks.wrap(
        type(eng),
        "step",
        "decoder step",
        lambda self, tokens, cache: (
            2.0 * tokens.numel() * (n_layers * ffn_w + cache.output[0].numel())
        ),
    )
    clocks.wrap(step_cache_module.StepCache, "reorder", "cache reorder")
    clocks.wrap(search_module, "step_log_probs", "log-softmax and processors")
    return clocks


def breakdown(tr: Translator, lines: list[str]) -> tuple[list[str], float]:
    """The parts' wall times as a table, and the run's FLOP/s."""
    clocks = instrument(tr)
    start = time.perf_counter()
    tr.translate(lines)
    wall = time.perf_counter() - start
    clocks.unwrap()
    sec, fl = clocks.seconds, clocks.flops
    step = sec["decoder step"]
    inside = sec["self-attention"] + sec["cross-attention"]
    parts = {
        "encoder": sec["encoder"],
        "cross keys/values (once per batch)": sec["cross keys/values"],
        "self-attention (q/k/v, cache write, attention, output projection)": sec["self-attention"],
        "cross-attention (query, attention, output projection)": sec["cross-attention"],
        "feed-forward, layer norms, embeddings, output layer": step - inside,
        "cache reorder": sec["cache reorder"],
        "log-softmax and processors": sec["log-softmax and processors"],
        "search's own work (top-k, finished hypotheses, batching, text)": wall
        - step
        - sec["encoder"]
        - sec["cache reorder"]
        - sec["log-softmax and processors"]
        - sec["cross keys/values"],
    }
    total = sum(fl.values())
    out = ["| part | seconds | share |", "|---|---|---|"]
    out += [f"| {k} | {v:.2f} | {100 * v / wall:.0f}% |" for k, v in parts.items()]
    out.append(f"| whole run | {wall:.2f} | 100% |")
    return out, total / wall


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--engine", default="eager")
    p.add_argument("--no-shortlist", action="store_true")
    p.add_argument("--rows", type=int, default=25)
    p.add_argument("--append", action="store_true")
    args = p.parse_args()
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    tr = Translator.load(
        args.checkpoint,
        "cpu",
        beam=args.beam,
        batch_size=64,
        precision=args.precision,
        shortlist=not args.no_shortlist,
        engine=args.engine,
    )
    tr.translate(lines)
    start = time.perf_counter()
    tr.translate(lines)
    plain = time.perf_counter() - start
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}.get(args.precision)
    peak = matmul_peak(dtype) if dtype is not None else int8_peak()
    table, rate = breakdown(tr, lines) if tr.cfg.engine == "eager" else ([], 0.0)
    what = (
        f"{len(lines)} lines of {args.src_file.name}, beam {args.beam}, {args.precision}, engine "
        f"{args.engine}, shortlist {not args.no_shortlist}: {len(lines) / plain:.1f} sent/s"
    )
    head = [what]
    if table:
        head.append(
            f"products counted from their shapes: {rate / 1e9:.1f} GFLOP/s, "
            f"{100 * rate / peak:.1f}% of a "
            f"2048x2048 {args.precision} product's {peak / 1e9:.0f} G/s timed here; {machine()}"
        )
    print("\n".join(head + [""] + table))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        tr.translate(lines)
        wall = time.perf_counter() - start
    events = prof.key_averages()
    # top-level self times: all time in operators
    inside = sum(e.self_cpu_time_total for e in events) / 1e6
    print(
        f"\nprofiled wall {wall:.2f} s, in operators {inside:.2f} s ({100 * inside / wall:.0f}%), "
        "outside "
        f"(Python) {100 * (1 - inside / wall):.0f}%"
    )
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    if args.append and table:
        cmd = (
            f"`python benchmarks/decode_profile.py --checkpoint {args.checkpoint} --precision "
            f"{args.precision} --beam {args.beam} --append`"
        )
        body = "\n".join([*head, "", *table, "", cmd])
        append_section("Decoding profile", body)


if __name__ == "__main__":
    main()
