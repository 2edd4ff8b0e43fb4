"""The training loop: one readable pass over shuffled token batches, validating as it goes.

One process, or several under torchrun: each global batch is cut into shares, every process
trains on its own, and DistributedDataParallel sums the gradients, so the update is the same
for any number of processes (and of --accumulate shares).
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mt_cli.config import Config, TrainConfig
from mt_cli.data.collate import collate
from mt_cli.data.pairs import make_batches
from mt_cli.device import autocast, resolve_device, set_deterministic
from mt_cli.errors import MtError
from mt_cli.train import distributed as ddp
from mt_cli.train.finish import finish
from mt_cli.train.hardware import CompiledOrEager
from mt_cli.train.inputs import DataSpec, Log
from mt_cli.train.progress import Record, RunLog, TrainProgress
from mt_cli.train.schedule import budget_progress, lr_at
from mt_cli.train.setup import Run, RunContext, TrainPaths, prepare
from mt_cli.train.signals import StopSignals
from mt_cli.train.state import TrainState, rng_state, write_checkpoint
from mt_cli.train.throughput import linear_flops
from mt_cli.train.validation import validate


def _done(state: TrainState, cfg: Config) -> bool:
    t = cfg.train
    return (
        (t.patience > 0 and state.validations_since_best >= t.patience)
        or (t.max_steps > 0 and state.step >= t.max_steps)
        or (t.max_epochs > 0 and state.epoch >= t.max_epochs)
        or (t.max_minutes > 0 and state.elapsed_s >= t.max_minutes * 60)
    )


def shares(batch: np.ndarray, n: int) -> list[np.ndarray]:
    """A global batch cut into n disjoint shares of nearly equal size (some empty if it is tiny)."""
    return [batch[i::n] for i in range(n)]


def _forward_backward(run: Run, batch: np.ndarray, n_tokens: int) -> float:
    """Forward and backward passes over this rank's shares of the batch; returns their summed loss."""
    t, d, data = run.cfg.train, run.dist, run.train_data
    mine = shares(batch, d.world * t.accumulate)[d.rank * t.accumulate : (d.rank + 1) * t.accumulate]
    # DDP averages gradients over ranks; scaled so, the update follows the mean over the global batch.
    scale = d.world / n_tokens
    loss_sum = 0.0
    for k, share in enumerate(mine):
        # A rank whose share is empty still runs a batch (weighted 0): DDP needs every rank's gradients.
        weight = 1.0 if len(share) else 0.0
        src, tgt_in, tgt_out = collate(*data.take(share if len(share) else batch[:1]), run.model.start_token)
        last_share = k == len(mine) - 1
        no_sync = run.objective.no_sync() if d.active and not last_share else contextlib.nullcontext()
        with no_sync:
            with autocast(run.amp, run.device):
                loss = run.objective(src.to(run.device), tgt_in.to(run.device), tgt_out.to(run.device))
            run.scaler.scale(loss * (weight * scale)).backward()
        loss_sum += loss.item() * weight
    return loss_sum


def train_step(
    run: Run, batch: np.ndarray, progress: float = 0.0, stop: bool = False
) -> tuple[float, int, float, float, bool]:
    """One update on one global batch. Returns (summed loss, target tokens, learning rate,
    gradient norm, whether any rank asked to stop), all the same on every rank.

    `progress` is the spent fraction of the budget, which the cosine and wsd schedules decay over.
    """
    t, d = run.cfg.train, run.dist
    n_tokens = int((run.train_data.tgt_lens[batch] + 1).sum())  # every target token and its EOS, in all shares
    try:
        loss_sum = _forward_backward(run, batch, n_tokens)
    except Exception as e:  # compiled code fails in many types, in the forward or (lazily) the backward pass
        ddp_wrapped = isinstance(run.objective, torch.nn.parallel.DistributedDataParallel)
        compiled = run.objective.module if ddp_wrapped else run.objective
        if not (isinstance(compiled, CompiledOrEager) and compiled.give_up(e)):
            raise
        run.optimizer.zero_grad(set_to_none=True)
        loss_sum = _forward_backward(run, batch, n_tokens)  # the same step again, eager
    loss_sum, stops = ddp.all_sum([loss_sum, float(stop)], d)
    run.scaler.unscale_(run.optimizer)  # clip the true gradients, not the fp16-scaled ones
    # With clipping off the norm is still measured (an infinite bound never clips), for the log.
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), t.clip_norm if t.clip_norm > 0 else math.inf)
    lr = lr_at(run.state.step + 1, t.lr, t.warmup_steps, t.lr_schedule, progress, t.lr_cooldown)
    norm = float(grad_norm)
    if run.scaler.is_enabled() and not math.isfinite(norm):
        norm = 0.0  # fp16 overflow: the scaler skips this update and lowers its scale; that is its job
    if math.isfinite(loss_sum) and math.isfinite(norm):  # else no update: one bad batch must not wreck the weights
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        run.scaler.step(run.optimizer)
        if run.ema is not None:
            ema_update(run.ema, run.model, t.ema_decay)
    # After unscale_, always: a skipped step too, or the next step's unscale_ raises (and the
    # fp16 scale would not fall after an overflow). A no-op without fp16.
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    return loss_sum, n_tokens, lr, norm, stops > 0


def ema_update(ema: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    """ema <- decay * ema + (1 - decay) * model, parameter by parameter."""
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters(), strict=True):
            e.lerp_(p, 1.0 - decay)


def count_nonfinite(state: TrainState, loss: float, grad_norm: float, cfg: TrainConfig, last: Path) -> bool:
    """True when the step was skipped; too many in a row stop the run with what to do."""
    if math.isfinite(loss) and math.isfinite(grad_norm):
        state.nonfinite_in_a_row = 0
        return False
    state.nonfinite_in_a_row += 1
    if state.nonfinite_in_a_row >= cfg.max_nonfinite:
        raise MtError(
            f"step {state.step}: the loss or gradient was not finite {state.nonfinite_in_a_row} steps in a row; "
            f"stopped without saving ({last} holds the last good state). Lower train.lr, keep train.clip_norm "
            "on, or check the data with `mt doctor`"
        )
    return True


def save_last(run: Run) -> None:
    """RUN/last.pt: everything the next step depends on. Under torchrun every rank calls it (to
    hand in its RNG states) and rank 0 writes."""
    rngs = ddp.gather(rng_state(), run.dist)
    if run.dist.main:
        write_checkpoint(run.paths.last, run.cfg, run.tokenizer, run.model, run.optimizer,
                         run.state, run.ema, rngs, run.scaler, run.shortlist)  # fmt: skip


def run_validation(run: Run, record: Record, progress: TrainProgress) -> None:
    """Rank 0 scores the validation set and keeps best.pt when BLEU improves; every rank then
    takes its verdict (for early stopping) and last.pt is refreshed."""
    state, paths = run.state, run.paths
    if run.dist.main:
        scored = run.ema if run.ema is not None else run.model  # the weights best.pt would hold
        v = validate(scored, run.tokenizer, run.valid_pairs, run.valid_refs, run.cfg, run.device, run.amp,
                     run.shortlist)  # fmt: skip
        entry = {"step": state.step, "valid_loss": v.loss, "valid_nll": v.nll, "valid_bleu": v.bleu}
        record(entry)
        state.history.append(entry)
        improved = v.bleu > state.best_bleu
        if improved:
            state.best_bleu, state.best_step, state.validations_since_best = v.bleu, state.step, 0
            write_checkpoint(paths.best, run.cfg, run.tokenizer, scored, shortlist=run.shortlist)
        else:
            state.validations_since_best += 1
        keep = max(run.cfg.train.keep_last, run.cfg.train.average_last)
        if keep > 0:
            write_checkpoint(paths.step(state.step), run.cfg, run.tokenizer, scored, shortlist=run.shortlist)
            for old in paths.numbered()[:-keep]:
                old.unlink()
        best = " (best, saved)" if improved else f" (best {state.best_bleu:.2f} at step {state.best_step})"
        progress.note(f"step {state.step}: valid loss {v.loss:.3f}, BLEU {v.bleu:.2f}{best}")
    verdict = (state.best_bleu, state.best_step, state.validations_since_best, state.history)
    state.best_bleu, state.best_step, state.validations_since_best, state.history = ddp.broadcast(verdict, run.dist)
    save_last(run)


def log_entry(state: TrainState, lr: float, grad_norm: float, tokens_per_s: float, mfu: float) -> dict[str, Any]:
    return {
        "step": state.step,
        "epoch": state.epoch + 1,
        "loss": state.log_loss / state.log_tokens,
        "lr": lr,
        "grad_norm": grad_norm,
        "tokens_per_s": tokens_per_s,
        "mfu": mfu,
        "elapsed_s": round(state.elapsed_s, 1),
    }


def train_loop(run: Run, record: Record, progress: TrainProgress, stop: StopSignals | None = None) -> bool:
    """Epochs of shuffled token batches until a limit is reached, validating every `valid_every`
    steps. Returns False when a signal stopped it (after a whole step, on every rank alike)."""
    t, state, data = run.cfg.train, run.state, run.train_data
    started, elapsed_before = time.perf_counter(), state.elapsed_s
    timed_tokens, timed_flops, window_start = 0, 0.0, started  # for tokens/s and MFU, in this process only
    flops_per_src, flops_per_tgt = linear_flops(run.model, 1, 0), linear_flops(run.model, 0, 1)
    last_valid = state.history[-1]["step"] if state.history else -1
    run.model.train()
    while not _done(state, run.cfg):
        epoch = state.epoch
        batches = make_batches(data.src_lens, data.tgt_lens, t.batch_tokens, seed=t.seed + epoch)
        # Until the epoch rolls over (below, batch_in_epoch back to 0): the next one is shuffled anew.
        while state.epoch == epoch and not _done(state, run.cfg):
            epochs = state.epoch + state.batch_in_epoch / len(batches)
            spent = budget_progress(state.step, state.elapsed_s, epochs, t)
            asked = stop is not None and stop.requested is not None
            batch = batches[state.batch_in_epoch]
            loss_sum, n_tokens, lr, grad_norm, stopping = train_step(run, batch, spent, asked)
            state.step += 1
            state.batch_in_epoch += 1
            now = time.perf_counter()
            state.elapsed_s = elapsed_before + (now - started)
            if count_nonfinite(state, loss_sum, grad_norm, t, run.paths.last):
                record({"step": state.step, "skipped": "loss or gradient not finite"})
                progress.note(f"step {state.step}: loss {loss_sum}, gradient norm {grad_norm}: update skipped")
            else:
                state.log_loss, state.log_tokens = state.log_loss + loss_sum, state.log_tokens + n_tokens
                timed_tokens += n_tokens
                timed_flops += flops_per_src * int(data.src_lens[batch].sum()) + flops_per_tgt * n_tokens
            if state.step % t.log_every == 0 and state.log_tokens:
                seconds = max(now - window_start, 1e-9)
                # MFU over all processes: each did the same work in the same time.
                mfu = timed_flops / seconds / (run.peak_flops * run.dist.world)
                entry = log_entry(state, lr, grad_norm, timed_tokens / seconds, mfu)
                record(entry)
                progress.update(state, entry)
                state.log_loss, state.log_tokens, timed_tokens, timed_flops, window_start = 0.0, 0, 0, 0.0, now
            if state.batch_in_epoch >= len(batches):
                state.epoch, state.batch_in_epoch = state.epoch + 1, 0
            if stopping:
                return False  # the state is whole; train() saves it
            if state.step % t.valid_every == 0:
                run_validation(run, record, progress)
                last_valid = state.step
                timed_tokens, timed_flops, window_start = 0, 0.0, time.perf_counter()  # validation is not training
                state.elapsed_s = elapsed_before + (window_start - started)
            elif t.save_every and state.step % t.save_every == 0:
                save_last(run)
    if last_valid != state.step:
        run_validation(run, record, progress)
    return True


def train(data: DataSpec, out: Path, cfg: Config, log: Log = print) -> TrainState:
    """Train a model into the run folder `out`: best.pt, last.pt, log.jsonl, config.yaml, tokenizer/.

    Under torchrun every process calls this; only rank 0 logs and writes.
    """
    d = ddp.from_env(cfg.train.dist_timeout_s)
    if cfg.train.deterministic:
        set_deterministic()
        log("deterministic algorithms on (train.deterministic)")
    device = ddp.device_for(d, resolve_device(cfg.train.device))
    with ddp.process_group(d, device):
        ctx = RunContext(TrainPaths(Path(out)), data, cfg, log if d.main else (lambda *_: None), d, device)
        return _train(ctx)


def _train(ctx: RunContext) -> TrainState:
    run = prepare(ctx)
    paths, main, log = ctx.paths, ctx.dist.main, ctx.log
    board = paths.tensorboard if run.cfg.train.tensorboard and main else None
    with RunLog(paths.log if main else None, board, run.state.step) as record, \
            TrainProgress(run.cfg, enabled=main) as progress:  # fmt: skip
        with StopSignals() as stop:
            try:
                finished = train_loop(run, record, progress, stop)
            except KeyboardInterrupt:
                raise MtError(f"stopped at once, mid-step; {paths.last} holds the last saved state") from None
            if not finished:
                save_last(run)
                why = stop.requested or "a signal to another process"
                raise MtError(f"{why} at step {run.state.step}: {paths.last} saved; rerun the same command to resume")
        state = run.state
        if state.validations_since_best >= run.cfg.train.patience > 0:
            log(f"early stop: no better validation BLEU in {run.cfg.train.patience} validations")
        log(f"done: {state.step} steps; best validation BLEU {state.best_bleu:.2f} at step {state.best_step}")
        if main:
            finish(run, record, log)
    return state
