"""The checkpoint file: one self-describing dict that rebuilds the model with nothing else.

    {"format": 2, "config": {...}, "tokenizer": {"joint": bytes} | {"src": ..., "tgt": ...},
     "model": state_dict, "train_state": {...} (resumable checkpoints only),
     "shortlist": {"table", "frequent", "tgt_vocab_size"} (optional: decode/shortlist.py),
     "origin": {"averaged": ["step4500.pt", ...]} (optional: weights that no single step had)}

It holds only tensors, numbers, strings, bytes, lists and dicts, and is always read with
torch.load(weights_only=True), so loading a file can never run code.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mt_cli.config import Config, from_dict, to_dict
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.errors import MtError
from mt_cli.files import atomic_open, check_readable
from mt_cli.model.transformer import Transformer, build_model

# 2: model.decoder_start exists (default "pad"); format-1 models all started from BOS.
FORMAT_VERSION = 2


@dataclass
class Checkpoint:
    config: Config
    tokenizer: Tokenizer
    model_state: dict[str, torch.Tensor]
    train_state: dict[str, Any] | None
    shortlist: dict[str, Any] | None = None  # a vocabulary shortlist's state (decode/shortlist.py)
    # where weights no single step had came from: {"averaged": [names]}
    origin: dict[str, Any] | None = None

    def build_model(self, device: str | torch.device = "cpu") -> Transformer:
        model = build_model(self.config.model, init=False)  # every weight comes from the file
        model.load_state_dict(self.model_state)
        return model.to(device).eval()


def save(path: Path, ckpt: Checkpoint) -> None:
    """The one way a checkpoint reaches the disk. Written atomically: a kill mid-save leaves the
    previous file whole."""
    payload: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "config": to_dict(ckpt.config),
        "tokenizer": ckpt.tokenizer.to_state(),
        "model": {k: v.detach().cpu() for k, v in ckpt.model_state.items()},
    }
    if ckpt.train_state is not None:
        payload["train_state"] = ckpt.train_state
    if ckpt.shortlist is not None:
        payload["shortlist"] = ckpt.shortlist
    if ckpt.origin is not None:
        payload["origin"] = ckpt.origin
    with atomic_open(Path(path), "wb") as f:
        torch.save(payload, f)


def load(path: Path) -> Checkpoint:
    path = Path(path)
    check_readable(path, "checkpoint")
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":  # torch.save writes a zip archive
            raise MtError(f"{path}: not an mt checkpoint (expected a file written by `mt train`)")
    try:
        # mmap: tensors are read from the file as they are used, not copied in first (a few tens
        # of milliseconds of `mt translate`'s start); a checkpoint replaced meanwhile is a new file.
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError:
        raise MtError(
            f"{path}: refused: "
            "the file holds Python objects, not only weights (an mt checkpoint never does)"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise MtError(
            f"{path}: not a readable mt checkpoint (truncated or not a checkpoint: {reason})"
        ) from None
    if not isinstance(payload, dict) or "format" not in payload or "model" not in payload:
        raise MtError(f"{path}: not an mt checkpoint (no format version or weights inside)")
    if payload["format"] > FORMAT_VERSION:
        raise MtError(
            f"{path}: checkpoint format {payload['format']} is newer than this mt reads "
            f"({FORMAT_VERSION}); upgrade mt"
        )
    config = payload["config"]
    if payload["format"] < 2:
        config = {**config, "model": {**config.get("model", {}), "decoder_start": "bos"}}
    return Checkpoint(
        config=from_dict(config, where=f"{path} config"),
        tokenizer=Tokenizer.from_state(payload["tokenizer"]),
        model_state=payload["model"],
        train_state=payload.get("train_state"),
        shortlist=payload.get("shortlist"),
        origin=payload.get("origin"),
    )


def average(paths: list[Path]) -> Checkpoint:
    """The element-wise mean of several checkpoints' weights (same model, same tokenizer).

    Averaging the last few checkpoints of a run usually scores better than any one of them.
    """
    if len(paths) < 2:
        raise MtError("averaging needs at least two checkpoints")
    first = load(paths[0])
    total = {k: v.double() for k, v in first.model_state.items()}
    for path in paths[1:]:
        ckpt = load(path)
        if (
            ckpt.config.model != first.config.model
            or ckpt.tokenizer.to_state() != first.tokenizer.to_state()
        ):
            raise MtError(
                f"{path}: a different model or tokenizer than {paths[0]}; "
                "only checkpoints of one run average"
            )
        for k, v in ckpt.model_state.items():
            total[k] += v.double()
    mean = {k: (v / len(paths)).to(first.model_state[k].dtype) for k, v in total.items()}
    return Checkpoint(
        first.config,
        first.tokenizer,
        mean,
        None,
        first.shortlist,
        {"averaged": [p.name for p in paths]},
    )
