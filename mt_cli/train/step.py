"""One training step: one update on one global batch, the same on every process.

Each global batch is cut into shares, every process runs its own (one after another with
train.accumulate), and DistributedDataParallel sums the gradients, so the update is the same for
any number of processes and of accumulate shares.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

from mt_cli.device import autocast
from mt_cli.train import distributed as ddp
from mt_cli.train.batches import Batch, to_device
from mt_cli.train.hardware import CompiledOrEager
from mt_cli.train.schedule import lr_at
from mt_cli.train.setup import Run


@dataclass(frozen=True)
class StepResult:
    """What one update did, the same on every rank. The loss, norm and skip flag stay on the
    device, so that the host never waits for the step; the loop reads a window's at once."""

    loss: torch.Tensor  # () summed over the batch's target tokens, over all ranks
    tokens: int  # the batch's target tokens, each sentence's EOS included
    src_tokens: int  # the batch's source tokens (for the throughput meter)
    lr: float  # the learning rate the update used
    grad_norm: torch.Tensor  # () before clipping; fp16 overflows are the gradient scaler's job
    skipped: torch.Tensor  # () bool: the loss or gradient was not finite, so no update was made
    stop: bool  # whether any rank was asked to stop (a signal) before this step


@dataclass(frozen=True)
class StepFigures:
    """A StepResult read back to the host."""

    loss: float
    tokens: int
    src_tokens: int
    lr: float
    grad_norm: float
    finite: bool  # False when the update was skipped: one bad batch must not wreck the weights


def read(results: list[StepResult]) -> list[StepFigures]:
    """The steps' figures, read from the device in one transfer (the only wait for the device)."""
    if not results:
        return []
    values = torch.stack(
        [torch.stack([r.loss.double(), r.grad_norm.double(), r.skipped.double()]) for r in results]
    ).tolist()
    return [
        StepFigures(loss, r.tokens, r.src_tokens, r.lr, norm, not skipped)
        for r, (loss, norm, skipped) in zip(results, values)
    ]


def train_step(run: Run, batch: Batch, spent: float = 0.0, stop: bool = False) -> StepResult:
    """One update on one global batch, built ahead (train/batches.py).

    `spent` is the fraction of the run's budget used before this step (train/budget.py), which the
    cosine and wsd schedules decay over; `stop` whether this process was asked to stop. Nothing
    here reads a tensor back to the host: a step whose loss or gradient is not finite is skipped
    on the device (the fused optimizer's found_inf, as the fp16 gradient scaler uses it).
    """
    t, d = run.cfg.train, run.dist
    try:
        loss_sum = _forward_backward(run, batch)
    # compiled code fails in many types, in the forward or (lazily) the backward pass
    except Exception as e:
        ddp_wrapped = isinstance(run.objective, torch.nn.parallel.DistributedDataParallel)
        compiled = run.objective.module if ddp_wrapped else run.objective
        if not (isinstance(compiled, CompiledOrEager) and compiled.give_up(e)):
            raise
        run.optimizer.zero_grad(set_to_none=True)
        loss_sum = _forward_backward(run, batch)  # the same step again, eager
    loss_sum = ddp.sum_tensor(loss_sum, d)
    stops = ddp.all_sum([float(stop)], d)[0] if d.active else float(stop)
    run.scaler.unscale_(run.optimizer)  # clip the true gradients, not the fp16-scaled ones
    # With clipping off the norm is still measured (an infinite bound never clips), for the log.
    grad_norm = torch.nn.utils.clip_grad_norm_(
        run.model.parameters(), t.clip_norm if t.clip_norm > 0 else math.inf
    )
    lr = lr_at(run.state.step + 1, t.lr, t.warmup_steps, t.lr_schedule, spent, t.lr_cooldown)
    bad = ~(torch.isfinite(loss_sum) & torch.isfinite(grad_norm))
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    _update(run, bad)
    # After unscale_, always: a skipped step too, or the next step's unscale_ raises (and the
    # fp16 scale would not fall after an overflow). A no-op without fp16.
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    # fp16: an overflowing gradient is the scaler's to skip (it lowers its scale); only a loss
    # that is not finite counts as a bad step
    counted = ~torch.isfinite(loss_sum) if run.scaler.is_enabled() else bad
    return StepResult(loss_sum, batch.tokens, batch.src_tokens, lr, grad_norm, counted, stops > 0)


def _update(run: Run, bad: torch.Tensor) -> None:
    """The optimizer's step and the EMA's, both skipped where `bad` is set, without the host
    reading it: the fused AdamW takes it as found_inf (a skipped step is not counted either)."""
    t, optimizer = run.cfg.train, run.optimizer
    if run.scaler.is_enabled():
        run.scaler.step(optimizer)  # it sets found_inf from the fp16 overflow check itself
    elif optimizer.defaults.get("fused"):
        optimizer.found_inf = bad.float()  # type: ignore[attr-defined]
        optimizer.step()
        del optimizer.found_inf  # type: ignore[attr-defined]
    elif not bool(bad):  # an optimizer without found_inf (no fused kernel on this device)
        optimizer.step()
    if run.ema is not None:
        ema_update(run.ema, run.model, t.ema_decay, ~bad)


def _forward_backward(run: Run, batch: Batch) -> torch.Tensor:
    """Forward and backward passes over this rank's shares of the batch; returns their summed
    loss, on the device."""
    d = run.dist
    # DDP averages gradients over ranks; scaled so, the update follows the mean over the global
    # batch.
    scale = d.world / batch.tokens
    loss_sum = torch.zeros((), dtype=torch.float64, device=run.device)
    for k, (share, weight) in enumerate(zip(batch.shares, batch.weights)):
        # A rank whose share is empty still runs a batch (weighted 0): DDP needs every rank's
        # gradients.
        src, tgt_in, tgt_out, at = to_device(share, run.device)
        last_share = k == len(batch.shares) - 1
        no_sync = (
            run.objective.no_sync() if d.active and not last_share else contextlib.nullcontext()
        )
        with no_sync:
            with autocast(run.amp, run.device):
                loss = run.objective(src, tgt_in, tgt_out, at)
            run.scaler.scale(loss * (weight * scale)).backward()
        loss_sum += loss.detach().double() * weight
    return loss_sum


def ema_update(
    ema: torch.nn.Module, model: torch.nn.Module, decay: float, keep: torch.Tensor | None = None
) -> None:
    """ema <- decay * ema + (1 - decay) * model, parameter by parameter; where `keep` (a bool
    tensor) is False, the EMA stays as it was (a skipped step), decided on the device."""
    with torch.no_grad():
        weight: float | torch.Tensor = 1.0 - decay
        if keep is not None:
            weight = keep.float() * (1.0 - decay)
        for e, p in zip(ema.parameters(), model.parameters(), strict=True):
            e.lerp_(p, weight)
