"""The quickstart: Multi30k German->English, small preset, trained, translated and scored."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from mt_cli.config import build_config
from mt_cli.data import fetch_multi30k
from mt_cli.evaluate import score_files
from mt_cli.files import atomic_write_text
from mt_cli.train import TrainPaths, train
from mt_cli.translate import translate_file

LOCAL_COPY = Path("data/multi30k")  # where hub downloads are written (git-ignored)


def run_quickstart(data: Path | None, out: Path, max_minutes: float, device: str, log=print) -> dict[str, Any]:
    """Train, translate test2016 with best.pt, score it, and record the result in OUT/test2016.json."""
    started = time.time()
    folder = fetch_multi30k(LOCAL_COPY, data)
    cfg = build_config("small", options={"train": {"max_minutes": max_minutes, "device": device}})
    paths = TrainPaths(folder / "train.de", folder / "train.en", folder / "val.de", folder / "val.en", out)
    state = train(paths, cfg, log=log)
    hyp = out / "test2016.hyp.en"
    log(f"translating {folder / 'test2016.de'} -> {hyp}")
    translate_file(out / "best.pt", folder / "test2016.de", hyp, device)
    result = score_files(hyp, [folder / "test2016.en"])
    record = {
        "test": "multi30k test2016 de-en",
        "bleu": result["bleu"],
        "chrf": result["chrf"],
        "signature": result["signature"],
        "steps": state.step,
        "best_step": state.best_step,
        "best_valid_bleu": state.best_bleu,
        "train_minutes": round(state.elapsed_s / 60, 1),
        "wall_minutes": round((time.time() - started) / 60, 1),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
    }
    atomic_write_text(out / "test2016.json", json.dumps(record, indent=2) + "\n")
    return result
