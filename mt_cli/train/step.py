"""One training step: one update on one global batch, the same on every process.

Each global batch is cut into shares, every process runs its own (one after another with
train.accumulate), and DistributedDataParallel sums the gradients, so the update is the same for
any number of processes and of accumulate shares.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import torch

from mt_cli.data.collate import collate
from mt_cli.device import autocast
from mt_cli.train import distributed as ddp
from mt_cli.train.hardware import CompiledOrEager
from mt_cli.train.schedule import lr_at
from mt_cli.train.setup import Run


@dataclass(frozen=True)
class StepResult:
    """What one update did; the same on every rank."""

    loss: float  # summed over the batch's target tokens, over all ranks
    tokens: int  # the batch's target tokens, each sentence's EOS included
    src_tokens: int  # the batch's source tokens (for the throughput meter)
    lr: float  # the learning rate the update used
    grad_norm: float  # before clipping; 0 for an fp16 overflow, which the gradient scaler handles
    stop: bool  # whether any rank was asked to stop (a signal) before this step

    @property
    def finite(self) -> bool:
        """False when the update was skipped: one bad batch must not wreck the weights."""
        return math.isfinite(self.loss) and math.isfinite(self.grad_norm)


def shares(batch: np.ndarray, n: int) -> list[np.ndarray]:
    """A global batch cut into n disjoint shares of nearly equal size (some empty if it is tiny)."""
    return [batch[i::n] for i in range(n)]


def train_step(run: Run, batch: np.ndarray, spent: float = 0.0, stop: bool = False) -> StepResult:
    """One update on one global batch (indices into the training data).

    `spent` is the fraction of the run's budget used before this step (train/budget.py), which the
    cosine and wsd schedules decay over; `stop` whether this process was asked to stop.
    """
    t, d = run.cfg.train, run.dist
    # every target token and its EOS, in all shares
    n_tokens = int((run.train_data.tgt_lens[batch] + 1).sum())
    try:
        loss_sum = _forward_backward(run, batch, n_tokens)
    except (
        Exception
    ) as e:  # compiled code fails in many types, in the forward or (lazily) the backward pass
        ddp_wrapped = isinstance(run.objective, torch.nn.parallel.DistributedDataParallel)
        compiled = run.objective.module if ddp_wrapped else run.objective
        if not (isinstance(compiled, CompiledOrEager) and compiled.give_up(e)):
            raise
        run.optimizer.zero_grad(set_to_none=True)
        loss_sum = _forward_backward(run, batch, n_tokens)  # the same step again, eager
    loss_sum, stops = ddp.all_sum([loss_sum, float(stop)], d)
    run.scaler.unscale_(run.optimizer)  # clip the true gradients, not the fp16-scaled ones
    # With clipping off the norm is still measured (an infinite bound never clips), for the log.
    grad_norm = torch.nn.utils.clip_grad_norm_(
        run.model.parameters(), t.clip_norm if t.clip_norm > 0 else math.inf
    )
    lr = lr_at(run.state.step + 1, t.lr, t.warmup_steps, t.lr_schedule, spent, t.lr_cooldown)
    norm = float(grad_norm)
    if run.scaler.is_enabled() and not math.isfinite(norm):
        # fp16 overflow: the scaler skips this update and lowers its scale; that is its job
        norm = 0.0
    result = StepResult(
        loss_sum, n_tokens, int(run.train_data.src_lens[batch].sum()), lr, norm, stops > 0
    )
    if result.finite:
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        run.scaler.step(run.optimizer)
        if run.ema is not None:
            ema_update(run.ema, run.model, t.ema_decay)
    # After unscale_, always: a skipped step too, or the next step's unscale_ raises (and the
    # fp16 scale would not fall after an overflow). A no-op without fp16.
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    return result


def _forward_backward(run: Run, batch: np.ndarray, n_tokens: int) -> float:
    """Forward and backward passes over this rank's shares of the batch; returns their summed
    loss."""
    t, d, data = run.cfg.train, run.dist, run.train_data
    mine = shares(batch, d.world * t.accumulate)[
        d.rank * t.accumulate : (d.rank + 1) * t.accumulate
    ]
    # DDP averages gradients over ranks; scaled so, the update follows the mean over the global
    # batch.
    scale = d.world / n_tokens
    loss_sum = 0.0
    for k, share in enumerate(mine):
        # A rank whose share is empty still runs a batch (weighted 0): DDP needs every rank's
        # gradients.
        weight = 1.0 if len(share) else 0.0
        src, tgt_in, tgt_out = collate(
            *data.take(share if len(share) else batch[:1]), run.model.start_token
        )
        last_share = k == len(mine) - 1
        no_sync = (
            run.objective.no_sync() if d.active and not last_share else contextlib.nullcontext()
        )
        with no_sync:
            with autocast(run.amp, run.device):
                loss = run.objective(
                    src.to(run.device), tgt_in.to(run.device), tgt_out.to(run.device)
                )
            run.scaler.scale(loss * (weight * scale)).backward()
        loss_sum += loss.item() * weight
    return loss_sum


def ema_update(ema: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    """ema <- decay * ema + (1 - decay) * model, parameter by parameter."""
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters(), strict=True):
            e.lerp_(p, 1.0 - decay)
