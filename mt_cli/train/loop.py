"""Training, top to bottom: prepare the run, train until its budget is spent, finish.

`train` is the whole story in four numbered steps; `train_loop` is the loop of step 3, one
update at a time. One process, or several under torchrun: each trains its share of every
global batch and the update is the same for any number of processes (train/step.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mt_cli.config import Config, TrainConfig
from mt_cli.device import resolve_device, set_deterministic
from mt_cli.errors import MtError
from mt_cli.model import checkpoint
from mt_cli.train import distributed as ddp
from mt_cli.train.batches import Layout, Prefetcher
from mt_cli.train.budget import Budget, used_up
from mt_cli.train.context import RunContext, TrainPaths
from mt_cli.train.epochs import Epochs
from mt_cli.train.finish import finish
from mt_cli.train.inputs import DataSpec, Log
from mt_cli.train.progress import Record, RunLog, TrainProgress
from mt_cli.train.setup import Run, prepare
from mt_cli.train.signals import StopSignals
from mt_cli.train.state import TrainState
from mt_cli.train.step import StepFigures, StepResult, read, train_step
from mt_cli.train.throughput import Throughput
from mt_cli.train.validation import validate_all


def train(data: DataSpec, out: Path, cfg: Config, log: Log = print) -> TrainState:
    """Train a model into the run folder `out`: best.pt, last.pt, log.jsonl, config.yaml,
    tokenizer/. The same call again resumes from last.pt. Under torchrun every process calls this;
    only rank 0 logs and writes."""
    # 1. Processes and device: the ranks torchrun gave (rank 0 of 1 without it), one device each.
    dist = ddp.from_env(cfg.train.dist_timeout_s)
    if cfg.train.deterministic:
        set_deterministic()
        log("deterministic algorithms on (train.deterministic)")
    device = ddp.device_for(dist, resolve_device(cfg.train.device))
    with ddp.process_group(dist, device):
        # 2. Prepare: the run folder, tokenizer, data, model, optimizer, and the state last.pt holds
        # when there is one; the config resolved (vocabulary, batch size) and frozen from here on.
        log = log if dist.main else _quiet  # one process reports
        run = prepare(RunContext(TrainPaths(Path(out)), data, cfg, log, dist, device))
        t, paths, state = run.cfg.train, run.paths, run.state
        board = paths.tensorboard if t.tensorboard and dist.main else None
        with (
            RunLog(paths.log if dist.main else None, board, state.step) as record,
            TrainProgress(t.budgeted, enabled=dist.main) as progress,
        ):
            # 3. Train until the budget is spent or patience runs out. A first Ctrl-C or SIGTERM
            #    stops after a whole step and saves it; a second stops at once, saving nothing.
            with StopSignals() as stop:
                try:
                    finished = train_loop(run, record, progress, stop)
                except KeyboardInterrupt:
                    raise MtError(
                        f"stopped at once, mid-step; {paths.last} holds the last saved state"
                    ) from None
                if not finished:
                    if (last := run.resumable()) is not None:
                        checkpoint.save(paths.last, last)
                    why = stop.requested or "a signal to another process"
                    saved = f"{why} at step {state.step}: {paths.last} saved"
                    raise MtError(f"{saved}; rerun the same command to resume")
            if out_of_patience(state, t):
                log(f"early stop: no better validation BLEU in {t.patience} validations")
            log(
                f"done: {state.step} steps; best validation BLEU {state.best_bleu:.2f} at step "
                f"{state.best_step}"
            )
            ddp.barrier(dist)  # every rank's last collective done before any leaves the group
    # 4. Finish (rank 0): best.pt becomes the validated choice, averaged, with tuned decoding, its
    #    precision checked and its step compiled. Outside the process group: it runs no collective
    #    and may take minutes, and a rank that left the group while rank 0 was still in it aborted.
    if dist.main:
        # its events after step + 1: the final validation's events stay
        with RunLog(paths.log, board, state.step + 1) as record:
            finish(run, record, log)
    return state


def train_loop(
    run: Run, record: Record, progress: TrainProgress, stop: StopSignals | None = None
) -> bool:
    """Updates on shuffled batches, epoch after epoch, validating every train.valid_every steps.
    Returns False when a signal stopped it (after a whole step, on every rank alike)."""
    t, state = run.cfg.train, run.state
    budget, epochs = Budget.of(t), Epochs(run.train_data, t.batch_tokens, t.seed)
    started, elapsed_before = time.perf_counter(), state.elapsed_s
    meter = Throughput(run.model, run.peak_flops, run.dist.world, started)  # tokens/s and MFU
    window = Window(run, record, progress, meter)
    last_valid = state.history[-1]["step"] if state.history else -1
    run.model.train()
    with Prefetcher(Layout.of(run), t.batch_tokens, t.seed) as batches:
        while True:
            # a. The budget (or patience) says whether to go on; its fraction spent sets the rate.
            spent = budget.spent(state.step, state.elapsed_s, epochs.position(state))
            if used_up(spent) or out_of_patience(state, t):
                break
            # b. One update on the epoch's next batch, built ahead on another thread.
            asked = stop is not None and stop.requested is not None
            batch = batches.next(state.epoch, state.batch_in_epoch)
            window.add(train_step(run, batch, spent, asked))
            state.step, state.batch_in_epoch = state.step + 1, state.batch_in_epoch + 1
            now = time.perf_counter()
            state.elapsed_s = elapsed_before + (now - started)
            # c. A log line every train.log_every steps: the window's steps read back from the
            #    device at once, counted (or reported skipped), then their mean loss and speed.
            if state.step % t.log_every == 0:
                window.close(budget.spent(state.step, state.elapsed_s, epochs.position(state)))
            # d. An epoch's last batch: the next epoch is shuffled anew.
            if epochs.ended(state):
                state.epoch, state.batch_in_epoch = state.epoch + 1, 0
            # e. A signal: stop here, with the state whole (train() saves it).
            if window.stop:
                window.settle()
                return False
            # f. Validate every train.valid_every steps (saving last.pt), or only save every
            # train.save_every; the state they save is settled first.
            if state.step % t.valid_every == 0:
                window.settle()
                run_validation(run, record, progress)
                last_valid, now = state.step, time.perf_counter()
                meter.restart(now)  # validation is not training
                state.elapsed_s = elapsed_before + (now - started)
            elif t.save_every and state.step % t.save_every == 0:
                window.settle()
                if (last := run.resumable()) is not None:
                    checkpoint.save(run.paths.last, last)
    window.settle()
    if last_valid != state.step:
        run_validation(run, record, progress)
    return True


class Window:
    """The steps since the log line before: their results stay on the device until the window is
    read, once per log line (or before the state is saved), so no step waits for the device."""

    def __init__(self, run: Run, record: Record, progress: TrainProgress, meter: Throughput):
        self.run, self.record, self.progress, self.meter = run, record, progress, meter
        self.pending: list[StepResult] = []
        self.stop = False

    def add(self, result: StepResult) -> None:
        self.pending.append(result)
        self.stop = self.stop or result.stop

    def settle(self) -> StepFigures | None:
        """Read the pending steps and count them into the state; the last one's figures."""
        figures, first = read(self.pending), self.run.state.step - len(self.pending) + 1
        self.pending = []
        for k, f in enumerate(figures):
            _count(self.run, first + k, f, self.meter, self.record, self.progress)
        return figures[-1] if figures else None

    def close(self, spent: float) -> None:
        """Settle, then write the log line of the window: mean loss, learning rate, speed."""
        state = self.run.state
        last = self.settle()
        if last is not None and state.log_tokens:
            entry = log_entry(state, last, *self.meter.read(time.perf_counter()))
            self.record(entry)
            self.progress.update(entry, spent)
            state.log_loss, state.log_tokens = 0.0, 0


def _count(
    run: Run, step: int, f: StepFigures, meter: Throughput, record: Record, progress: TrainProgress
) -> None:
    state = run.state
    if count_nonfinite(state, step, f, run.cfg.train, run.paths.last):
        record({"step": step, "skipped": "loss or gradient not finite"})
        progress.note(f"step {step}: loss {f.loss}, gradient norm {f.grad_norm}: update skipped")
    else:
        state.log_loss += f.loss
        state.log_tokens += f.tokens
        meter.count(f.src_tokens, f.tokens)


def out_of_patience(state: TrainState, t: TrainConfig) -> bool:
    """Early stopping: train.patience validations in a row without a better BLEU."""
    return t.patience > 0 and state.validations_since_best >= t.patience


def count_nonfinite(
    state: TrainState, step: int, f: StepFigures, cfg: TrainConfig, last: Path
) -> bool:
    """True when step `step` was skipped; too many in a row stop the run with what to do. Counted
    when its window is read, up to train.log_every steps later: the skipped updates changed no
    weight meanwhile, and nothing is saved before the window is read."""
    if f.finite:
        state.nonfinite_in_a_row = 0
        return False
    state.nonfinite_in_a_row += 1
    if state.nonfinite_in_a_row >= cfg.max_nonfinite:
        raise MtError(
            f"step {step}: the loss or gradient was not finite {state.nonfinite_in_a_row} "
            f"steps in a row; stopped without saving ({last} holds the last good state). Lower "
            "train.lr, keep train.clip_norm on, or check the data with `mt doctor`"
        )
    return True


def log_entry(
    state: TrainState, result: StepFigures, tokens_per_s: float, mfu: float
) -> dict[str, Any]:
    return {
        "step": state.step,
        "epoch": state.epoch + 1,
        "loss": state.log_loss / state.log_tokens,
        "lr": result.lr,
        "grad_norm": result.grad_norm,
        "tokens_per_s": tokens_per_s,
        "mfu": mfu,
        "elapsed_s": round(state.elapsed_s, 1),
    }


def run_validation(run: Run, record: Record, progress: TrainProgress) -> None:
    """Rank 0 scores the validation set and keeps best.pt when BLEU improves; every rank then
    takes its verdict (for early stopping) and last.pt is refreshed."""
    state, paths = run.state, run.paths
    if run.dist.main:
        scored = run.ema if run.ema is not None else run.model  # the weights best.pt would hold
        v = validate_all(
            scored, run.tokenizer, run.valid, run.cfg, run.device, run.amp, run.shortlist
        )
        entry: dict[str, Any] = {
            "step": state.step,
            "valid_loss": v.loss,
            "valid_nll": v.nll,
            "valid_bleu": v.bleu,
        }
        if v.by_pair:  # several directions: valid_bleu is their mean
            entry["valid_bleu_by_pair"] = v.by_pair
        record(entry)
        state.history.append(entry)
        improved = v.bleu > state.best_bleu
        if improved:
            state.best_bleu, state.best_step, state.validations_since_best = v.bleu, state.step, 0
            checkpoint.save(paths.best, run.weights(scored))
        else:
            state.validations_since_best += 1
        keep = max(run.cfg.train.keep_last, run.cfg.train.average_last)
        if keep > 0:
            checkpoint.save(paths.step(state.step), run.weights(scored))
            for old in paths.numbered()[:-keep]:
                old.unlink()
        best = (
            " (best, saved)"
            if improved
            else f" (best {state.best_bleu:.2f} at step {state.best_step})"
        )
        pairs = f" ({', '.join(f'{k} {b:.2f}' for k, b in v.by_pair.items())})" if v.by_pair else ""
        progress.note(f"step {state.step}: valid loss {v.loss:.3f}, BLEU {v.bleu:.2f}{pairs}{best}")
    verdict = (state.best_bleu, state.best_step, state.validations_since_best, state.history)
    state.best_bleu, state.best_step, state.validations_since_best, state.history = ddp.broadcast(
        verdict, run.dist
    )
    if (last := run.resumable()) is not None:
        checkpoint.save(paths.last, last)


def _quiet(*_: Any) -> None:
    """The log of torchrun's ranks past 0: one process reports."""
