"""Training: the learning-rate schedule as pure functions, then one readable loop.

One process, or several under torchrun: each global batch is cut into shares, every process
trains on its own, and DistributedDataParallel sums the gradients, so the update is the same
for any number of processes (and of --accumulate shares).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mt_cli import checkpoint
from mt_cli import distributed as ddp
from mt_cli.cache import TokenCorpus
from mt_cli.config import Config, TrainConfig, to_yaml
from mt_cli.corpus import fingerprint
from mt_cli.data import Pairs, collate, make_batches
from mt_cli.errors import MtError
from mt_cli.files import atomic_write_text
from mt_cli.loss import TranslationLoss
from mt_cli.model import Transformer, build_model
from mt_cli.progress import TrainProgress
from mt_cli.rundata import (
    TrainPaths,
    check_first,
    get_tokenizer,
    load_train_data,
    load_valid_data,
    wait_for_path,
    write_run_info,
)
from mt_cli.runstate import (
    TrainState,
    check_data,
    clear_leftovers,
    numbered_checkpoints,
    resume,
    rng_state,
    trim_log,
    write_checkpoint,
)
from mt_cli.runtime import CompiledOrEager, amp_dtype, auto_batch_tokens, autocast, resolve_device, set_threads
from mt_cli.schedule import budget_progress, lr_at
from mt_cli.throughput import linear_flops, peak_flops
from mt_cli.tokenizer import Tokenizer
from mt_cli.validation import Validation, validate


def _done(state: TrainState, cfg: Config) -> bool:
    t = cfg.train
    return (
        (t.patience > 0 and state.validations_since_best >= t.patience)
        or (t.max_steps > 0 and state.step >= t.max_steps)
        or (t.max_epochs > 0 and state.epoch >= t.max_epochs)
        or (t.max_minutes > 0 and state.elapsed_s >= t.max_minutes * 60)
    )


@dataclass
class Run:
    """Everything one training run works with, gathered once by `prepare`."""

    paths: TrainPaths
    cfg: Config
    dist: ddp.Dist
    device: torch.device
    amp: torch.dtype | None  # autocast dtype, None for fp32
    scaler: torch.amp.GradScaler  # active for fp16 only; a no-op otherwise
    peak_flops: float  # the device's peak for the precision trained in, for MFU in the log
    tokenizer: Tokenizer
    model: Transformer
    objective: torch.nn.Module  # TranslationLoss(model), wrapped in DistributedDataParallel under torchrun
    optimizer: torch.optim.Optimizer
    ema: Transformer | None  # the moving average of the weights, when train.ema_decay > 0
    train_data: TokenCorpus
    valid_pairs: Pairs
    valid_refs: list[str]
    state: TrainState


def prepare(paths: TrainPaths, cfg: Config, log, d: ddp.Dist, device: torch.device) -> Run:
    """Tokenizer, data, model and optimizer; the run's own last.pt is resumed when there is one."""
    t = cfg.train
    set_threads(t.threads)
    sources = paths.sources()
    if d.main:
        paths.out.mkdir(parents=True, exist_ok=True)
        if cleared := clear_leftovers(paths.out):
            log(f"{paths.out}: removed {cleared} temporary file(s) left by an interrupted save")
        if t.doctor:
            check_first(sources, log)
    else:
        wait_for_path(paths.out, "run folder", d)
    tokenizer = get_tokenizer(paths, sources["train"], cfg, log, d)
    vocab = {
        "src_vocab_size": tokenizer.src_vocab_size,
        "tgt_vocab_size": tokenizer.tgt_vocab_size,
        "shared_vocab": tokenizer.joint,
    }
    cfg = replace(cfg, model=replace(cfg.model, **vocab))
    fingerprints = {role: fingerprint(s) for role, s in sources.items()}  # sha256 of each file, read once
    train_data = load_train_data(sources["train"], fingerprints["train"], tokenizer, paths, t, log, d)
    valid_pairs, valid_refs = load_valid_data(sources["valid"], tokenizer, paths, t, log)

    random.seed(t.seed)
    torch.manual_seed(t.seed)
    model = build_model(cfg.model).to(device)
    if d.rank > 0:  # the same initial weights everywhere, then each rank its own dropout masks
        torch.manual_seed(t.seed * 1000 + d.rank)
    # The fused kernel: one pass over all parameters, 5x faster than the loop on this CPU.
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=t.lr,
        betas=t.adam_betas,
        eps=t.adam_eps,
        weight_decay=t.weight_decay,
        fused=device.type in ("cpu", "cuda"),
    )
    ema = copy.deepcopy(model).requires_grad_(False) if t.ema_decay > 0 else None
    amp = amp_dtype(t.amp, device)
    scaler = torch.amp.GradScaler(device.type, enabled=amp == torch.float16)  # fp16 gradients underflow without it
    last = paths.out / "last.pt"
    state = resume(last, cfg, model, optimizer, ema, log, d.rank, d.world, scaler) if last.is_file() else TrainState()
    state.data = check_data(fingerprints, state.data, {r: s.describe() for r, s in sources.items()}, last)
    if d.main:
        if dropped := trim_log(paths.out / "log.jsonl", state.step):
            log(f"{paths.out / 'log.jsonl'}: dropped {dropped} entries past step {state.step}, which will be redone")
        atomic_write_text(paths.out / "config.yaml", to_yaml(cfg))
        write_run_info(paths, sources, fingerprints, train_data, valid_pairs, device, d, amp)
    objective = TranslationLoss(model, t.label_smoothing)
    if t.batch_tokens == 0:
        cfg = replace(
            cfg, train=replace(t, batch_tokens=auto_batch_tokens(objective, device, amp, train_data, cfg, d, log))
        )
    if t.compile:
        objective = CompiledOrEager(objective, log)
    if d.active:
        ids = [device.index] if device.type == "cuda" else None
        objective = torch.nn.parallel.DistributedDataParallel(objective, device_ids=ids)
    n_params = sum(p.numel() for p in model.parameters())
    where = f" x {d.world} processes" if d.active else ""
    log(f"model: {n_params / 1e6:.1f}M parameters on {device}{where}{f' with {amp} autocast' if amp else ''}")
    peak, source = peak_flops(device, amp is not None)
    log(f"MFU is against {peak / 1e12:.2f} TFLOP/s ({source})")
    return Run(paths, cfg, d, device, amp, scaler, peak, tokenizer, model, objective, optimizer, ema, train_data,
               valid_pairs, valid_refs, state)  # fmt: skip


def shares(batch: np.ndarray, n: int) -> list[np.ndarray]:
    """A global batch cut into n disjoint shares of nearly equal size (some empty if it is tiny)."""
    return [batch[i::n] for i in range(n)]


def train_step(run: Run, batch: np.ndarray, progress: float = 0.0, stop: bool = False):
    """One update on one global batch. Returns (summed loss, target tokens, learning rate,
    gradient norm, whether any rank asked to stop), all the same on every rank.

    `progress` is the spent fraction of the budget, which the cosine and wsd schedules decay over.
    """
    t, d, data = run.cfg.train, run.dist, run.train_data
    mine = shares(batch, d.world * t.accumulate)[d.rank * t.accumulate : (d.rank + 1) * t.accumulate]
    n_tokens = int((data.tgt_lens[batch] + 1).sum())  # every target token and its EOS, in all shares
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
        run.scaler.update()
        if run.ema is not None:
            ema_update(run.ema, run.model, t.ema_decay)
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
        write_checkpoint(run.paths.out / "last.pt", run.cfg, run.tokenizer, run.model, run.optimizer,
                         run.state, run.ema, rngs, run.scaler)  # fmt: skip


def run_validation(run: Run, record, progress: TrainProgress) -> None:
    """Rank 0 scores the validation set and keeps best.pt when BLEU improves; every rank then
    takes its verdict (for early stopping) and last.pt is refreshed."""
    state, out = run.state, run.paths.out
    if run.dist.main:
        scored = run.ema if run.ema is not None else run.model  # the weights best.pt would hold
        v = validate(scored, run.tokenizer, run.valid_pairs, run.valid_refs, run.cfg, run.device, run.amp)
        entry = {"step": state.step, "valid_loss": v.loss, "valid_nll": v.nll, "valid_bleu": v.bleu}
        record(entry)
        state.history.append(entry)
        improved = v.bleu > state.best_bleu
        if improved:
            state.best_bleu, state.best_step, state.validations_since_best = v.bleu, state.step, 0
            write_checkpoint(out / "best.pt", run.cfg, run.tokenizer, scored)
        else:
            state.validations_since_best += 1
        keep = max(run.cfg.train.keep_last, run.cfg.train.average_last)
        if keep > 0:
            write_checkpoint(out / f"step{state.step}.pt", run.cfg, run.tokenizer, scored)
            for old in numbered_checkpoints(out)[:-keep]:
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


def train_loop(run: Run, record, progress: TrainProgress, stop: StopSignals | None = None) -> bool:
    """Epochs of shuffled token batches until a limit is reached, validating every `valid_every`
    steps. Returns False when a signal stopped it (after a whole step, on every rank alike)."""
    t, state, data = run.cfg.train, run.state, run.train_data
    started, elapsed_before = time.perf_counter(), state.elapsed_s
    timed_tokens, timed_flops, window_start = 0, 0.0, started  # for tokens/s and MFU, in this process only
    flops_per_src, flops_per_tgt = linear_flops(run.model, 1, 0), linear_flops(run.model, 0, 1)
    last_valid = state.history[-1]["step"] if state.history else -1
    run.model.train()
    while not _done(state, run.cfg):
        batches = make_batches(data.src_lens, data.tgt_lens, t.batch_tokens, seed=t.seed + state.epoch)
        while state.batch_in_epoch < len(batches) and not _done(state, run.cfg):
            epochs = state.epoch + state.batch_in_epoch / len(batches)
            spent = budget_progress(state.step, state.elapsed_s, epochs, t)
            asked = stop is not None and stop.requested is not None
            batch = batches[state.batch_in_epoch]
            loss_sum, n_tokens, lr, grad_norm, stopping = train_step(run, batch, spent, asked)
            state.step += 1
            state.batch_in_epoch += 1
            now = time.perf_counter()
            state.elapsed_s = elapsed_before + (now - started)
            if count_nonfinite(state, loss_sum, grad_norm, t, run.paths.out / "last.pt"):
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


def tensorboard_writer(out: Path, resumed_at: int):
    """TensorBoard events in RUN/tensorboard, through torch's writer (which needs `tensorboard`).

    On resume, events past the resumed step are purged, as log.jsonl's entries are: they are redone."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise MtError("--tensorboard needs the tensorboard package: pip install tensorboard") from None
    return SummaryWriter(str(out / "tensorboard"), purge_step=resumed_at + 1 if resumed_at else None)


class StopSignals:
    """SIGINT (Ctrl-C) and SIGTERM ask training to stop after the current step, which is then saved
    whole; a second signal stops at once, saving nothing. Handlers can only be set from the main
    thread; elsewhere signals keep their defaults."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame) -> None:
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def train(paths: TrainPaths, cfg: Config, log=print) -> TrainState:
    """Train a model into `paths.out`: best.pt, last.pt, log.jsonl, config.yaml, tokenizer/.

    Under torchrun every process calls this; only rank 0 logs and writes.
    """
    d = ddp.from_env(cfg.train.dist_timeout_s)
    device = ddp.device_for(d, resolve_device(cfg.train.device))
    with ddp.process_group(d, device):
        return _train(paths, cfg, log if d.main else (lambda *_: None), d, device)


def _train(paths: TrainPaths, cfg: Config, log, d: ddp.Dist, device: torch.device) -> TrainState:
    run = prepare(paths, cfg, log, d, device)
    last = paths.out / "last.pt"
    log_path = paths.out / "log.jsonl" if d.main else Path(os.devnull)
    with open(log_path, "a", encoding="utf-8") as log_file, TrainProgress(run.cfg, enabled=d.main) as progress:
        board = tensorboard_writer(paths.out, run.state.step) if run.cfg.train.tensorboard and d.main else None

        def record(entry: dict[str, Any]) -> None:
            log_file.write(json.dumps(entry) + "\n")
            log_file.flush()
            if board is not None:
                for key, value in entry.items():
                    if key != "step" and isinstance(value, (int, float)):
                        board.add_scalar(
                            ("valid/" if key.startswith("valid") else "train/") + key, value, entry["step"]
                        )
                board.flush()

        with StopSignals() as stop:
            try:
                finished = train_loop(run, record, progress, stop)
            except KeyboardInterrupt:
                raise MtError(f"stopped at once, mid-step; {last} holds the last saved state") from None
            if not finished:
                save_last(run)
                why = stop.requested or "a signal to another process"
                raise MtError(f"{why} at step {run.state.step}: {last} saved; rerun the same command to resume")
        state = run.state
        if state.validations_since_best >= run.cfg.train.patience > 0:
            log(f"early stop: no better validation BLEU in {run.cfg.train.patience} validations")
        log(f"done: {state.step} steps; best validation BLEU {state.best_bleu:.2f} at step {state.best_step}")
        if run.cfg.train.average_last and d.main:
            average_last(run, record, log)
    return state


def average_last(run: Run, record, log) -> Validation | None:
    """Average the last `average_last` numbered checkpoints into RUN/averaged.pt and validate it."""
    paths = numbered_checkpoints(run.paths.out)[-run.cfg.train.average_last :]
    if len(paths) < 2:
        log(f"not averaging: only {len(paths)} numbered checkpoint(s) in {run.paths.out}")
        return None
    averaged = checkpoint.average(paths)
    out = run.paths.out / "averaged.pt"
    checkpoint.save_checkpoint(out, averaged)
    model = averaged.build_model(run.device)
    v = validate(model, run.tokenizer, run.valid_pairs, run.valid_refs, run.cfg, run.device, run.amp)
    record({"step": run.state.step, "averaged": [p.name for p in paths], "valid_loss": v.loss, "valid_bleu": v.bleu})
    log(f"averaged {len(paths)} checkpoints into {out}: valid BLEU {v.bleu:.2f} (best one: {run.state.best_bleu:.2f})")
    return v
