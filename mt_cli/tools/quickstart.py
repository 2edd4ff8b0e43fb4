"""The quickstart: Multi30k German->English, small preset, trained, translated and scored."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mt_cli.config import QuickstartConfig, build_config
from mt_cli.config.yaml_files import merge
from mt_cli.errors import MtError
from mt_cli.files import atomic_write_text
from mt_cli.tools.evaluate import score_files
from mt_cli.tools.translate_files import translate_file
from mt_cli.train.inputs import DataSpec
from mt_cli.train.loop import train

# The quickstart's recipe, over the small preset. configs/multi30k-de-en.yaml spells the same
# (a test keeps them equal), so `mt train --config configs/multi30k-de-en.yaml` trains this model.
# warmup-stable-decay ends a short run annealed; dropout stays at 0.1, which learns faster early
# in a short run; the length penalty is tuned on validation when training ends.
RECIPE: dict[str, dict[str, Any]] = {
    "train": {
        "max_minutes": QuickstartConfig.max_minutes,
        "lr_schedule": "wsd",
        "lr_cooldown": 0.2,
        "tune_length_penalties": [0.6, 0.8, 1.0, 1.2],
    },
}
LOCAL_COPY = Path("data/multi30k")  # where hub downloads are written (git-ignored)

# Multi30k as the quickstart gets it: hub split -> file stem used by the local copy.
MULTI30K_HUB = "bentrevett/multi30k"
MULTI30K_SPLITS = {"train": "train", "validation": "val", "test": "test2016"}


def fetch_multi30k(
    out_dir: Path, local_dir: Path | None = None, dataset: str = MULTI30K_HUB
) -> Path:
    """Return a folder holding {train,val,test2016}.{de,en}.

    With `local_dir` the text files are used where they lie. Otherwise `dataset` (a hub name, or a
    local folder in the same layout) is loaded through `datasets` and written to `out_dir` once.
    """
    wanted = [f"{stem}.{lang}" for stem in MULTI30K_SPLITS.values() for lang in ("de", "en")]
    if local_dir is not None:
        missing = [name for name in wanted if not (Path(local_dir) / name).is_file()]
        if missing:
            raise MtError(
                f"{local_dir}: missing {', '.join(missing)}; expected Multi30k text files"
            )
        return Path(local_dir)
    if all((out_dir / name).is_file() for name in wanted):
        return out_dir
    import datasets

    try:
        ds = datasets.load_dataset(dataset)
    except Exception as e:  # network and hub errors come in many types; all mean the same here
        raise MtError(
            f"could not load {dataset} through `datasets` ({type(e).__name__}: {str(e)[:200]}); "
            "give the local folder of Multi30k text files instead"
        ) from None
    for split, stem in MULTI30K_SPLITS.items():
        if split not in ds:
            raise MtError(f"{dataset}: has no {split!r} split (found {', '.join(ds)})")
        for lang in ("de", "en"):
            lines = [" ".join(text.split()) for text in ds[split][lang]]
            atomic_write_text(out_dir / f"{stem}.{lang}", "\n".join(lines) + "\n")
    return out_dir


def run_quickstart(
    data: Path | None, settings: QuickstartConfig, device: str, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Train, translate test2016 with best.pt, score it, and record the result in
    OUT/test2016.json."""
    started = time.time()
    folder = fetch_multi30k(LOCAL_COPY, data)
    out, minutes = Path(settings.out), settings.max_minutes
    cfg = build_config(
        "small", options=merge(RECIPE, {"train": {"max_minutes": minutes, "device": device}})
    )
    spec = DataSpec.text_files(
        folder / "train.de", folder / "train.en", folder / "val.de", folder / "val.en"
    )
    state = train(spec, out, cfg, log=log)
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
        "machine": (
            f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}"
        ),
    }
    atomic_write_text(out / "test2016.json", json.dumps(record, indent=2) + "\n")
    return result
