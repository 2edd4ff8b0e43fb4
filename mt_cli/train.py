"""Training: the loss and learning-rate schedule as pure functions, then one readable loop."""

from __future__ import annotations

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

import torch

from mt_cli import checkpoint
from mt_cli.config import Config, TrainConfig, to_yaml
from mt_cli.data import Pairs, collate, limit_length, make_batches, read_parallel
from mt_cli.doctor import preflight
from mt_cli.errors import MtError
from mt_cli.evaluate import score
from mt_cli.files import atomic_write_text, temp_dir
from mt_cli.loss import label_smoothed_loss, output_layer_loss
from mt_cli.model import Transformer, build_model
from mt_cli.progress import TrainProgress
from mt_cli.runstate import (
    TrainState,
    check_data,
    clear_leftovers,
    numbered_checkpoints,
    resume,
    trim_log,
    write_checkpoint,
)
from mt_cli.runtime import autocast, resolve_device, set_threads, use_bf16
from mt_cli.search import translate_ids
from mt_cli.tokenizer import PAD, Tokenizer, train_tokenizer


def lr_at(
    step: int, peak: float, warmup: int, schedule: str = "inverse_sqrt", progress: float = 0.0, cooldown: float = 1.0
) -> float:
    """The learning rate for update `step` (counted from 1): linear warmup to `peak`, then

    - "inverse_sqrt": decay with 1/sqrt(step), the paper's schedule scaled to its peak;
    - "cosine": a half cosine that reaches 0 when `progress`, the spent fraction of the budget, is 1;
    - "wsd" (warmup-stable-decay): hold the peak, then fall linearly to 0 over the last `cooldown`
      fraction of the budget.
    """
    step = max(step, 1)
    warm = min(step / warmup, 1.0) if warmup else 1.0
    progress = min(max(progress, 0.0), 1.0)
    if schedule == "cosine":
        return peak * warm * 0.5 * (1.0 + math.cos(math.pi * progress))
    if schedule == "wsd":
        return peak * warm * min(1.0, (1.0 - progress) / cooldown)
    if warmup == 0:
        return peak
    return peak * min(warm, math.sqrt(warmup / step))


def budget_progress(step: int, elapsed_s: float, epochs: float, cfg: TrainConfig) -> float:
    """The spent fraction of the run's budget: the largest over the limits that are set (0 if none).

    `epochs` counts fractionally (2.5 = halfway through the third epoch).
    """
    fractions = [0.0]
    if cfg.max_steps > 0:
        fractions.append(step / cfg.max_steps)
    if cfg.max_minutes > 0:
        fractions.append(elapsed_s / (cfg.max_minutes * 60))
    if cfg.max_epochs > 0:
        fractions.append(epochs / cfg.max_epochs)
    return max(fractions)


@dataclass
class TrainPaths:
    train_src: Path
    train_tgt: Path
    valid_src: Path
    valid_tgt: Path
    out: Path
    tokenizer: Path | None = None


@dataclass
class Validation:
    loss: float
    nll: float
    bleu: float


def get_tokenizer(paths: TrainPaths, cfg: Config, log) -> Tokenizer:
    """The given tokenizer, the run's own (when resuming), or a new one trained into RUN/tokenizer."""
    if paths.tokenizer is not None:
        return Tokenizer.load(paths.tokenizer)
    own = paths.out / "tokenizer"
    if own.is_dir():
        return Tokenizer.load(own)
    log(f"training a {cfg.tokenizer.vocab_size}-piece tokenizer into {own}")
    corpus = read_parallel(paths.train_src, paths.train_tgt, cfg.train.on_bad_utf8)
    tokenizer = train_tokenizer(corpus.src, corpus.tgt, cfg.tokenizer)
    # Whole or not at all: a kill between the src and tgt models must not leave half a tokenizer.
    tmp = temp_dir(paths.out, ".tokenizer.")
    tokenizer.save(tmp)
    os.replace(tmp, own)
    return tokenizer


def encode_corpus(
    src_path: Path, tgt_path: Path, tokenizer: Tokenizer, log, cfg: TrainConfig, limit: bool = True
) -> Pairs:
    """Token ids of a parallel corpus, with what was dropped or changed counted in the log.

    With `limit`, pairs longer than cfg.max_len are dropped or truncated (cfg.long_pairs).
    """
    corpus = read_parallel(src_path, tgt_path, cfg.on_bad_utf8)
    src, tgt = tokenizer.encode_src(corpus.src), tokenizer.encode_tgt(corpus.tgt)
    pairs = limit_length(src, tgt, cfg.max_len, cfg.long_pairs) if limit else Pairs(src, tgt)
    dropped = f"dropped {corpus.dropped_empty} with an empty side"
    if corpus.bad_utf8:
        done = "dropped" if cfg.on_bad_utf8 == "skip" else "repaired (U+FFFD)"
        dropped += f", {done} {corpus.bad_utf8} with bytes that are not UTF-8"
    if limit:
        done = "truncated" if cfg.long_pairs == "truncate" else "dropped"
        dropped += f", {done} {pairs.long} longer than {cfg.max_len} tokens"
    log(f"{src_path} / {tgt_path}: {len(pairs.src)} pairs ({dropped})")
    return pairs


def validate(
    model: Transformer, tokenizer: Tokenizer, pairs: Pairs, refs: list[str], cfg: Config, device, bf16: bool
) -> Validation:
    """Validation loss with teacher forcing, and BLEU of the same decoding `mt translate` does."""
    model.eval()
    loss_sum = nll_sum = 0.0
    n_tokens = 0
    with torch.inference_mode(), autocast(bf16, device):
        for batch in make_batches(pairs, cfg.train.batch_tokens, seed=0):
            src, tgt_in, tgt_out = (t.to(device) for t in collate(pairs, batch, model.start_token))
            keep = tgt_out != PAD
            loss, nll = label_smoothed_loss(model(src, tgt_in, keep), tgt_out[keep], cfg.train.label_smoothing)
            loss_sum, nll_sum = loss_sum + loss.item(), nll_sum + nll.item()
            n_tokens += int(keep.sum())
        hyps = tokenizer.decode_tgt(translate_ids(model, pairs.src, cfg.decode))
    model.train()
    bleu = score(hyps, [refs], metrics=("bleu",))["bleu"]
    return Validation(loss_sum / n_tokens, nll_sum / n_tokens, bleu)


def ema_update(ema: torch.nn.Module, model: torch.nn.Module, decay: float) -> None:
    """ema <- decay * ema + (1 - decay) * model, parameter by parameter."""
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters(), strict=True):
            e.lerp_(p, 1.0 - decay)


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
    device: torch.device
    bf16: bool
    tokenizer: Tokenizer
    model: Transformer
    optimizer: torch.optim.Optimizer
    ema: Transformer | None  # the moving average of the weights, when train.ema_decay > 0
    train_pairs: Pairs
    valid_pairs: Pairs
    valid_refs: list[str]
    state: TrainState


def prepare(paths: TrainPaths, cfg: Config, log) -> Run:
    """Tokenizer, data, model and optimizer; the run's own last.pt is resumed when there is one."""
    t = cfg.train
    device = resolve_device(t.device)
    set_threads(t.threads)
    paths.out.mkdir(parents=True, exist_ok=True)
    if cleared := clear_leftovers(paths.out):
        log(f"{paths.out}: removed {cleared} temporary file(s) left by an interrupted save")
    if t.doctor:
        preflight({"train": (paths.train_src, paths.train_tgt), "valid": (paths.valid_src, paths.valid_tgt)}, log)
    tokenizer = get_tokenizer(paths, cfg, log)
    vocab = {
        "src_vocab_size": tokenizer.src_vocab_size,
        "tgt_vocab_size": tokenizer.tgt_vocab_size,
        "shared_vocab": tokenizer.joint,
    }
    cfg = replace(cfg, model=replace(cfg.model, **vocab))
    train_pairs = encode_corpus(paths.train_src, paths.train_tgt, tokenizer, log, t)
    valid_pairs = encode_corpus(paths.valid_src, paths.valid_tgt, tokenizer, log, t, limit=False)
    valid_refs = read_parallel(paths.valid_src, paths.valid_tgt, t.on_bad_utf8).tgt

    random.seed(t.seed)
    torch.manual_seed(t.seed)
    model = build_model(cfg.model).to(device)
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
    last = paths.out / "last.pt"
    state = resume(last, cfg, model, optimizer, ema, log) if last.is_file() else TrainState()
    roles = ("train_src", "train_tgt", "valid_src", "valid_tgt")
    state.data = check_data({role: getattr(paths, role) for role in roles}, state.data, last)
    if dropped := trim_log(paths.out / "log.jsonl", state.step):
        log(f"{paths.out / 'log.jsonl'}: dropped {dropped} entries past step {state.step}, which will be redone")
    atomic_write_text(paths.out / "config.yaml", to_yaml(cfg))
    bf16 = use_bf16(t.amp, device)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.1f}M parameters on {device}{' with bf16 autocast' if bf16 else ''}")
    return Run(paths, cfg, device, bf16, tokenizer, model, optimizer, ema, train_pairs, valid_pairs, valid_refs, state)


def train_step(run: Run, batch: list[int], progress: float = 0.0) -> tuple[float, int, float, float]:
    """One update on one batch: returns (summed loss, target tokens, learning rate, gradient norm).

    `progress` is the spent fraction of the budget, which the cosine and wsd schedules decay over.
    """
    t, model = run.cfg.train, run.model
    src, tgt_in, tgt_out = (x.to(run.device) for x in collate(run.train_pairs, batch, run.model.start_token))
    keep = tgt_out != PAD
    with autocast(run.bf16, run.device):
        h = model.hidden(src, tgt_in, keep)  # (N, D), real target tokens only
        loss_sum = output_layer_loss(h, model.output_projection.weight, tgt_out[keep], t.label_smoothing)
    n_tokens = h.size(0)
    (loss_sum / n_tokens).backward()
    # With clipping off the norm is still measured (an infinite bound never clips), for the log.
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip_norm if t.clip_norm > 0 else math.inf)
    lr = lr_at(run.state.step + 1, t.lr, t.warmup_steps, t.lr_schedule, progress, t.lr_cooldown)
    loss, norm = loss_sum.item(), float(grad_norm)
    if math.isfinite(loss) and math.isfinite(norm):  # else no update: one bad batch must not wreck the weights
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        run.optimizer.step()
        if run.ema is not None:
            ema_update(run.ema, model, t.ema_decay)
    run.optimizer.zero_grad(set_to_none=True)
    return loss, n_tokens, lr, norm


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
    """RUN/last.pt: everything the next step depends on."""
    write_checkpoint(run.paths.out / "last.pt", run.cfg, run.tokenizer, run.model, run.optimizer, run.state, run.ema)


def run_validation(run: Run, record, progress: TrainProgress) -> None:
    """Score the validation set, keep best.pt when BLEU improves, and always refresh last.pt."""
    state, out = run.state, run.paths.out
    scored = run.ema if run.ema is not None else run.model  # the weights best.pt would hold
    v = validate(scored, run.tokenizer, run.valid_pairs, run.valid_refs, run.cfg, run.device, run.bf16)
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
    save_last(run)
    best = " (best, saved)" if improved else f" (best {state.best_bleu:.2f} at step {state.best_step})"
    progress.note(f"step {state.step}: valid loss {v.loss:.3f}, BLEU {v.bleu:.2f}{best}")


def train_loop(run: Run, record, progress: TrainProgress, stop: StopSignals | None = None) -> None:
    """Epochs of shuffled token batches until a limit is reached, validating every `valid_every` steps."""
    t, state = run.cfg.train, run.state
    started, elapsed_before = time.perf_counter(), state.elapsed_s
    timed_tokens, window_start = 0, started  # for tokens/s, counted in this process only
    last_valid = state.history[-1]["step"] if state.history else -1
    run.model.train()
    while not _done(state, run.cfg):
        batches = make_batches(run.train_pairs, t.batch_tokens, seed=t.seed + state.epoch)
        while state.batch_in_epoch < len(batches) and not _done(state, run.cfg):
            if stop is not None and stop.requested:
                return  # between steps: the state is whole, and train() saves it
            epochs = state.epoch + state.batch_in_epoch / len(batches)
            spent = budget_progress(state.step, state.elapsed_s, epochs, t)
            loss_sum, n_tokens, lr, grad_norm = train_step(run, batches[state.batch_in_epoch], spent)
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
            if state.step % t.log_every == 0 and state.log_tokens:
                entry = {
                    "step": state.step,
                    "epoch": state.epoch + 1,
                    "loss": state.log_loss / state.log_tokens,
                    "lr": lr,
                    "grad_norm": grad_norm,
                    "tokens_per_s": timed_tokens / max(now - window_start, 1e-9),
                    "elapsed_s": round(state.elapsed_s, 1),
                }
                record(entry)
                progress.update(state, entry)
                state.log_loss, state.log_tokens, timed_tokens, window_start = 0.0, 0, 0, now
            if state.step % t.valid_every == 0:
                run_validation(run, record, progress)
                last_valid = state.step
                timed_tokens, window_start = 0, time.perf_counter()  # keep validation time out of tokens/s
                state.elapsed_s = elapsed_before + (window_start - started)
            elif t.save_every and state.step % t.save_every == 0:
                save_last(run)
        if state.batch_in_epoch >= len(batches):
            state.epoch += 1
            state.batch_in_epoch = 0
    if last_valid != state.step and not (stop is not None and stop.requested):
        run_validation(run, record, progress)


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
    """Train a model into `paths.out`: best.pt, last.pt, log.jsonl, config.yaml, tokenizer/."""
    run = prepare(paths, cfg, log)
    last = paths.out / "last.pt"
    with open(paths.out / "log.jsonl", "a", encoding="utf-8") as log_file, TrainProgress(run.cfg) as progress:

        def record(entry: dict[str, Any]) -> None:
            log_file.write(json.dumps(entry) + "\n")
            log_file.flush()

        with StopSignals() as stop:
            try:
                train_loop(run, record, progress, stop)
            except KeyboardInterrupt:
                raise MtError(f"stopped at once, mid-step; {last} holds the last saved state") from None
            if stop.requested:
                save_last(run)
                raise MtError(
                    f"{stop.requested} at step {run.state.step}: {last} saved; rerun the same command to resume"
                )
        state = run.state
        if state.validations_since_best >= run.cfg.train.patience > 0:
            log(f"early stop: no better validation BLEU in {run.cfg.train.patience} validations")
        log(f"done: {state.step} steps; best validation BLEU {state.best_bleu:.2f} at step {state.best_step}")
        if run.cfg.train.average_last:
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
    v = validate(model, run.tokenizer, run.valid_pairs, run.valid_refs, run.cfg, run.device, run.bf16)
    record({"step": run.state.step, "averaged": [p.name for p in paths], "valid_loss": v.loss, "valid_bleu": v.bleu})
    log(f"averaged {len(paths)} checkpoints into {out}: valid BLEU {v.bleu:.2f} (best one: {run.state.best_bleu:.2f})")
    return v
