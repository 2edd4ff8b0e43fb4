"""What training asks of the hardware: the largest batch a GPU holds, the faster arithmetic on a
CPU, and torch.compile with a fallback."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from mt_cli.config import Config, TrainConfig
from mt_cli.data.pairs import MAX_BATCH_ROWS
from mt_cli.device import autocast
from mt_cli.errors import MtError
from mt_cli.train.distributed import Dist, broadcast


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
    reserve = torch.empty(
        2 * n_params, dtype=torch.float32, device=device
    )  # exp_avg and exp_avg_sq
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
    """train.batch_tokens auto (0): on CUDA, 80% of the largest batch that fits (probed on rank 0,
    the same for every rank) times processes and shares; elsewhere the default."""
    t = cfg.train
    default = TrainConfig.batch_tokens
    if device.type != "cuda":
        log(f"batch_tokens auto probes GPU memory; on {device} it is the default, {default}")
        return default
    found = 0
    if d.main:
        longest = int(max(data.src_lens.max(), data.tgt_lens.max() + 1))
        found = probe_batch_tokens(objective, device, amp, longest, cfg.model.tgt_vocab_size)
        if found == 0:
            raise MtError(
                f"not even 1024 tokens of the longest pairs fit on {device}; lower train.max_len"
            )
    found = broadcast(found, d)
    tokens = int(found * 0.8) * d.world * t.accumulate
    log(
        f"batch_tokens auto: {found} tokens fit one {device} process; using {tokens} per global "
        "batch"
    )
    return tokens


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
        self.log(
            f"torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0][:200]}); training "
            "without it"
        )
        return True

    def forward(self, *args: Any) -> Any:
        if self.compiled is not None:
            try:
                return self.compiled(*args)
            except Exception as e:  # inductor and dynamo raise many types
                self.give_up(e)
        return self.module(*args)
