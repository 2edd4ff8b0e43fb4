"""What training asks of the hardware: the largest batch a GPU holds, the faster arithmetic on a
CPU (each resolved once when a run starts and kept in last.pt), and torch.compile with a
fallback."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from mt_cli.config import Config, TrainConfig
from mt_cli.data.cache import TokenCorpus
from mt_cli.data.collate import collate
from mt_cli.data.mixture import MixedCorpus
from mt_cli.data.pairs import MAX_BATCH_ROWS, make_batches
from mt_cli.device import autocast, cpu_has_bf16
from mt_cli.errors import MtError
from mt_cli.train.batches import Layout, to_device
from mt_cli.train.context import RunContext
from mt_cli.train.distributed import Dist, broadcast
from mt_cli.train.state import TrainState


def largest_fitting(fits: Callable[[int], bool], start: int, cap: int) -> int:
    """The largest n in [start, cap] with fits(n), assuming fits is True up to some n and False
    after: double while it fits, then bisect between the last fit and the first miss. 0 if
    even `start` does not fit."""
    if not fits(start):
        return 0
    low, high = start, start
    while high < cap:
        high = min(high * 2, cap)
        if not fits(high):
            break
        low = high
    else:
        return cap
    while high - low > max(low // 16, 1):  # within 1/16: finer would only cost more probes
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def probe_batch_tokens(
    objective: nn.Module, device: torch.device, amp: torch.dtype | None, longest: int, vocab: int
) -> int:
    """Padded tokens of the largest batch whose forward and backward fit in this GPU's memory,
    tried with the longest pairs the data holds (the worst case for activation memory), while
    the memory AdamW's two moments will take is held aside (they exist from the first update on).

    The probe's ids and its dropout masks draw on RNG streams of their own: the training RNG,
    which exact resume depends on, is where it was before."""
    gen = torch.Generator(device).manual_seed(0)
    n_params = sum(p.numel() for p in objective.parameters())
    # exp_avg and exp_avg_sq
    reserve = torch.empty(2 * n_params, dtype=torch.float32, device=device)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            return largest_fitting(
                _fits_on(objective, device, amp, longest, vocab, gen), 1024, 1 << 20
            )
    finally:
        del reserve


# What CUDA libraries say when an allocation fails; torch raises them as plain RuntimeErrors.
ALLOCATION_FAILURES = (
    "out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
    "CUBLAS_STATUS_NOT_INITIALIZED",
)


def is_allocation_failure(e: BaseException) -> bool:
    return isinstance(e, torch.OutOfMemoryError) or (
        isinstance(e, RuntimeError) and any(s in str(e) for s in ALLOCATION_FAILURES)
    )


def _fits_on(
    objective: nn.Module,
    device: torch.device,
    amp: torch.dtype | None,
    longest: int,
    vocab: int,
    gen: torch.Generator,
) -> Callable[[int], bool]:

    def fits(tokens: int) -> bool:
        rows = min(max(1, tokens // longest), MAX_BATCH_ROWS)  # as make_batches caps them
        ids = torch.randint(4, vocab, (rows, longest), device=device, generator=gen)
        try:
            with autocast(amp, device):
                loss = objective(ids, ids, ids)
            loss.backward()
            return True
        except RuntimeError as e:  # OutOfMemoryError is one
            if not is_allocation_failure(e):
                raise
            return False
        finally:
            objective.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()

    return fits


def auto_batch_tokens(
    objective: nn.Module,
    device: torch.device,
    amp: torch.dtype | None,
    data: Any,
    cfg: Config,
    d: Dist,
    log: Callable[[str], None],
) -> int:
    """train.batch_tokens auto (0): on CUDA, the batch that trains fastest of 80% of the largest
    that fits and its halves (probed and timed on rank 0, the same for every rank), times
    processes and shares; elsewhere the default."""
    t = cfg.train
    default = TrainConfig.batch_tokens
    if device.type != "cuda":
        log(f"batch_tokens auto probes GPU memory; on {device} it is the default, {default}")
        return default
    chosen = 0
    if d.main:
        longest = int(max(data.src_lens.max(), data.tgt_lens.max() + 1))
        found = probe_batch_tokens(objective, device, amp, longest, cfg.model.tgt_vocab_size)
        if found == 0:
            raise MtError(
                f"not even 1024 tokens of the longest pairs fit on {device}; lower train.max_len"
            )
        sizes = [int(found * 0.8) >> k for k in range(4) if int(found * 0.8) >> k >= MIN_TIMED]
        rates = {n: batch_rate(objective, device, amp, data, n, t.seed) for n in sizes or [found]}
        chosen = fastest(rates)
        said = ", ".join(f"{n}: {r:,.0f}" for n, r in rates.items())
        log(f"batch_tokens auto: {found} tokens fit one {device} process; target tokens/s {said}")
    chosen = broadcast(chosen, d)
    tokens = chosen * d.world * t.accumulate
    log(f"batch_tokens auto: {chosen} per process; {tokens} per global batch")
    return tokens


# Below this many tokens a GPU batch is not worth timing: it would not fill the device.
MIN_TIMED = 4096
# A smaller batch within this fraction of the fastest rate wins: as fast, with more updates.
RATE_MARGIN = 0.05


def fastest(rates: dict[int, float]) -> int:
    """The smallest batch size whose rate is within RATE_MARGIN of the fastest's."""
    best = max(rates.values())
    return min(n for n, r in rates.items() if r >= (1 - RATE_MARGIN) * best)


def batch_rate(
    objective: nn.Module,
    device: torch.device,
    amp: torch.dtype | None,
    data: Any,
    tokens: int,
    seed: int,
    steps: int = 3,
) -> float:
    """Target tokens per second of forward and backward passes on the data's own batches of
    `tokens`, after one untimed (kernels chosen, memory allocated). No update is made and the run's
    RNG is left where it was."""

    batches = make_batches(data.src_lens, data.tgt_lens, tokens, seed)[: steps + 1]
    layout = Layout(data, 0, slice(0, 1), 1, False)  # built as training builds them
    seconds, counted = 0.0, 0
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for k, rows in enumerate(batches):
            src, tgt_in, tgt_out, at = to_device(layout.batch(rows).shares[0], device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            with autocast(amp, device):
                loss = objective(src, tgt_in, tgt_out, at)
            loss.backward()
            objective.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if k > 0:
                seconds += time.perf_counter() - start
                counted += int((data.tgt_lens[rows] + 1).sum())
    return counted / max(seconds, 1e-9)


def faster_amp(
    objective: nn.Module, batches: list[tuple[torch.Tensor, ...]], rounds: int = 3
) -> torch.dtype | None:
    """bf16 autocast or fp32 (None), whichever trains these batches faster on this CPU: forward
    and backward timed each way, taking turns over `rounds`, each keeping its fastest (the first
    round of each also pays for oneDNN's kernel set-up). bf16 must win by 5%: a tie keeps fp32.

    Measured, not assumed: with AMX the small shape trained 1.6x faster in bf16 and the tiny one
    10% slower. Nothing of the run changes: the draws (dropout) come from RNG streams of their
    own, gradients are dropped, no optimizer step is taken."""
    best: dict[torch.dtype | None, float] = {None: float("inf"), torch.bfloat16: float("inf")}
    with torch.random.fork_rng(devices=[]):
        for _ in range(rounds):
            for amp in best:
                start = time.perf_counter()
                for src, tgt_in, tgt_out in batches:
                    with autocast(amp, torch.device("cpu")):
                        loss = objective(src, tgt_in, tgt_out)
                    loss.backward()
                    objective.zero_grad(set_to_none=True)
                best[amp] = min(best[amp], time.perf_counter() - start)
    return torch.bfloat16 if best[torch.bfloat16] < 0.95 * best[None] else None


class CompiledOrEager(torch.nn.Module):
    """torch.compile(module), or the module itself once compiled code fails: a missing compiler or
    an unsupported graph costs speed, never the run. A failure in the forward pass is caught here;
    one in the backward pass (compiled lazily, at the first backward) by the training step, which
    calls `give_up` and runs the step again eagerly."""

    def __init__(self, module: torch.nn.Module, log: Callable[[str], None]) -> None:
        super().__init__()
        self.module, self.log = module, log
        # dynamic=True: every batch has its own (B, T); static shapes would compile again for each
        # new one until the recompile limit, after which dynamo runs eagerly without a word.
        self.compiled: Any = torch.compile(module, dynamic=True)

    def give_up(self, e: BaseException) -> bool:
        """Train eagerly from now on; False if that was so already (the error is not compile's)."""
        if self.compiled is None:
            return False
        self.compiled = None
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        self.log(f"torch.compile failed ({why}); training without it")
        return True

    def forward(self, *args: Any) -> Any:
        if self.compiled is not None:
            try:
                return self.compiled(*args)
            except Exception as e:  # inductor and dynamo raise many types
                self.give_up(e)
        return self.module(*args)


def resolve_batch_tokens(
    ctx: RunContext,
    state: TrainState,
    objective: torch.nn.Module,
    amp: torch.dtype | None,
    train_data: TokenCorpus | MixedCorpus,
) -> Config:
    """The config with train.batch_tokens auto (0) resolved, once: probed on a fresh run, then kept
    in last.pt (and config.yaml), so a resumed run batches as it did, without probing again."""
    cfg, t = ctx.cfg, ctx.cfg.train
    if t.batch_tokens == 0:
        if state.batch_tokens > 0:
            ctx.log(f"batch_tokens auto: {state.batch_tokens}, as resolved when the run started")
            tokens = state.batch_tokens
        else:
            tokens = auto_batch_tokens(
                objective, ctx.device, amp, train_data, cfg, ctx.dist, ctx.log
            )
        cfg = replace(cfg, train=replace(t, batch_tokens=tokens))
    state.batch_tokens = cfg.train.batch_tokens
    return cfg


# Below this width train.amp auto trains in fp32 without timing: casting to bf16 costs more than
# it saves on small products (benchmarks/RESULTS.md, "bf16 training on the CPU").
AMP_PROBE_MIN_D_MODEL = 256


def resolve_amp(
    ctx: RunContext,
    state: TrainState,
    objective: torch.nn.Module,
    amp: torch.dtype | None,
    data: TokenCorpus | MixedCorpus,
    start_token: int,
) -> torch.dtype | None:
    """train.amp auto on a CPU with bf16 arithmetic: bf16 or fp32, whichever trains this model's
    batches faster, timed once when the run starts (rank 0 decides for all) and kept in last.pt,
    so a resumed run trains in the arithmetic it started with. A deterministic run does not time."""
    t, d = ctx.cfg.train, ctx.dist
    if t.amp != "auto" or ctx.device.type != "cpu" or not cpu_has_bf16():
        return amp
    if state.amp:
        ctx.log(f"amp auto: {state.amp}, as chosen when the run started")
    elif t.deterministic or ctx.cfg.model.d_model < AMP_PROBE_MIN_D_MODEL:
        state.amp = "off"
    else:
        use_bf16 = 0
        if d.main:
            ctx.log("amp auto: timing a few training batches in fp32 and in bf16 on this CPU")
            share = max(t.batch_tokens // (d.world * t.accumulate), 1)
            chosen = make_batches(data.src_lens, data.tgt_lens, share, t.seed)[:2]
            batches = [
                tuple(x.to(ctx.device) for x in collate(*data.take(b), start_token)) for b in chosen
            ]
            use_bf16 = int(faster_amp(objective, batches) is not None)
        state.amp = "bf16" if broadcast(use_bf16, d) else "off"
        how = "bf16 autocast" if state.amp == "bf16" else "fp32"
        ctx.log(f"amp auto: {state.amp} ({how} trained faster here)")
    return torch.bfloat16 if state.amp == "bf16" else None


def resolve_compile(
    ctx: RunContext,
    state: TrainState,
    objective: torch.nn.Module,
    amp: torch.dtype | None,
    data: TokenCorpus | MixedCorpus,
) -> torch.nn.Module:
    """The objective, compiled or not by train.compile. auto on CUDA: compiled (CompiledOrEager)
    when it trained the run's own batches at least 5% faster than eager, timed once when the run
    starts (rank 0 decides for all) and kept in last.pt; on other devices eager, where the
    compiled step measured slower (benchmarks/RESULTS.md, "torch.compile for training")."""
    t, d = ctx.cfg.train, ctx.dist
    if t.compile != "auto":
        return CompiledOrEager(objective, ctx.log) if t.compile == "true" else objective
    if state.compiled:
        ctx.log(f"compile auto: {state.compiled}, as chosen when the run started")
    elif ctx.device.type != "cuda" or t.deterministic:
        state.compiled = "false"
    if state.compiled == "false":
        # decided before torch.compile is called: what it would build is never used
        return objective
    compiled = CompiledOrEager(objective, ctx.log)  # compiles lazily, at its first batch
    if not state.compiled:
        faster = 0
        if d.main:
            ctx.log("compile auto: timing the run's batches compiled (compiling first) and eager")
            share = max(t.batch_tokens // (d.world * t.accumulate), 1)
            rates = [
                batch_rate(o, ctx.device, amp, data, share, t.seed) for o in (compiled, objective)
            ]
            faster = int(compiled.compiled is not None and rates[0] > 1.05 * rates[1])
            ctx.log(
                f"compile auto: {rates[0]:,.0f} target tokens/s compiled, {rates[1]:,.0f} eager"
            )
        state.compiled = "true" if broadcast(faster, d) else "false"
    return compiled if state.compiled == "true" else objective
