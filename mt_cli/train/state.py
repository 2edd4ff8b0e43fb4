"""What a run keeps to resume exactly: its counters, RNG states, optimizer and data fingerprints.

The promise (tested with SIGKILL at many moments): rerunning the same command after a kill
ends with a last.pt whose tensors are bitwise those of a run that was never interrupted.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mt_cli.config import Config, ModelConfig
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.decode.shortlist import Shortlist
from mt_cli.errors import MtError
from mt_cli.files import atomic_write_text
from mt_cli.model import checkpoint


@dataclass
class TrainState:
    """Where a run stands; with the RNG and optimizer states it is what `last.pt` resumes from."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of this epoch already trained on
    elapsed_s: float = 0.0
    best_bleu: float = -1.0
    best_step: int = 0
    validations_since_best: int = 0  # for early stopping
    # summed loss and target tokens since the last log entry, which averages them
    log_loss: float = 0.0
    log_tokens: int = 0
    # skipped steps (loss or gradient not finite) since the last good one
    nonfinite_in_a_row: int = 0
    # the global batch the run trains with, as train.batch_tokens auto resolved it
    batch_tokens: int = 0
    # what train.amp auto chose on a CPU with bf16 arithmetic (bf16 or off), kept on resume
    amp: str = ""
    # what train.compile auto chose (true or false), kept on resume
    compiled: str = ""
    # fingerprint of each split's data, checked on resume
    data: dict[str, str] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def make_checkpoint(
    cfg: Config,
    tokenizer: Tokenizer,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    state: TrainState | None = None,
    ema: torch.nn.Module | None = None,
    rng_ranks: list[dict[str, Any]] | None = None,
    scaler: torch.amp.GradScaler | None = None,
    shortlist: Shortlist | None = None,
) -> checkpoint.Checkpoint:
    """A model checkpoint; with `state` (and the optimizer and EMA) a resumable one, like last.pt.

    `rng_ranks`: under torchrun, every rank's RNG states (rank 0's are also kept as "rng").
    """
    train_state = None
    if state is not None:
        assert optimizer is not None, "a resumable checkpoint holds the optimizer"
        train_state = {**vars(state), "optimizer": optimizer.state_dict(), "rng": rng_state()}
        if ema is not None:
            train_state["ema"] = ema.state_dict()
        if rng_ranks is not None and len(rng_ranks) > 1:
            train_state["rng_ranks"] = rng_ranks
        if scaler is not None and scaler.is_enabled():
            train_state["scaler"] = scaler.state_dict()
    listed = shortlist.to_state() if shortlist is not None else None
    return checkpoint.Checkpoint(cfg, tokenizer, model.state_dict(), train_state, listed)


def _comparable(section: Any) -> Any:
    """A config section as resuming compares it: the languages a model records say what its weights
    mean, not what shape they have (a run started before models recorded them resumes)."""
    if isinstance(section, ModelConfig):
        return dataclasses.replace(section, source_langs=(), target_langs=())
    return section


def resume(
    path: Path,
    cfg: Config,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    ema: torch.nn.Module | None,
    log: Callable[[str], None],
    rank: int = 0,
    world: int = 1,
    scaler: torch.amp.GradScaler | None = None,
) -> TrainState:
    """Load everything the next step depends on from `path` into the given objects.

    Under torchrun each rank takes back its own RNG states when the run had as many ranks; with
    another number of processes, ranks past 0 start fresh streams (dropout then differs).
    """
    ckpt = checkpoint.load(path)
    if ckpt.train_state is None:
        raise MtError(f"{path}: holds no training state to resume from; use a new run folder")
    for section in ("model", "tokenizer"):
        if _comparable(getattr(ckpt.config, section)) != _comparable(getattr(cfg, section)):
            raise MtError(
                f"{path}: the run was started with a different {section} config; "
                "rerun with the same settings or use a new run folder"
            )
    model.load_state_dict(ckpt.model_state)
    ts = dict(ckpt.train_state)
    try:
        optimizer.load_state_dict(ts.pop("optimizer"))
    except ValueError as e:  # e.g. weight decay switched on or off: parameter groups differ
        raise MtError(
            f"{path}: its optimizer state does not fit this run's optimizer ({e}); "
            "resume with the settings the run was started with, or use a new run folder"
        ) from None
    rng, ranks = ts.pop("rng"), ts.pop("rng_ranks", None)
    if rank == 0:
        set_rng_state(rng)
    elif ranks is not None and len(ranks) == world:
        set_rng_state(ranks[rank])
    scaler_state = ts.pop("scaler", None)
    if scaler is not None and scaler_state is not None:
        scaler.load_state_dict(scaler_state)
    ema_state = ts.pop("ema", None)
    if ema is not None:
        ema.load_state_dict(ema_state if ema_state is not None else ckpt.model_state)
    state = TrainState(**ts)
    log(
        f"resuming {path} at step {state.step} (epoch {state.epoch + 1}, best BLEU "
        f"{state.best_bleu:.2f})"
    )
    return state


def check_data(
    now: dict[str, str], recorded: dict[str, str], names: dict[str, str], last: Path
) -> dict[str, str]:
    """A resumed run must see the data it started with: `now` and `recorded` map each split to
    its fingerprint, `names` to how the user gave it."""
    changed = [role for role in now if role in recorded and recorded[role] != now[role]]
    if changed:
        role = changed[0]
        raise MtError(
            f"{names[role]}: not the {role} data that {last} was trained on "
            "(its contents changed); restore it, or train into a new run folder"
        )
    return now


def trim_log(path: Path, step: int) -> int:
    """Drop log.jsonl entries past `step`, and a line cut short by a kill; returns how many went.

    A run killed after its last save logged steps that the resumed run will log again, so
    without this they would appear twice.
    """
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if isinstance(entry, dict) and entry.get("step", 0) <= step:
            kept.append(line + "\n")
        else:
            dropped += 1
    if dropped:
        atomic_write_text(path, "".join(kept))
    return dropped


def clear_leftovers(run_dir: Path) -> int:
    """Remove the temporary files of saves that a kill interrupted; returns how many went."""
    found = [p for p in run_dir.glob(".*.tmp") if p.is_file()] + [
        p for p in run_dir.glob(".tokenizer.*") if p.is_dir()
    ]
    for p in found:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return len(found)
