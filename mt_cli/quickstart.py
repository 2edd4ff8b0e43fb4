"""The quickstart: Multi30k German->English, small preset, trained, translated and scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mt_cli.config import build_config
from mt_cli.data import fetch_multi30k
from mt_cli.evaluate import score_files
from mt_cli.train import TrainPaths, train
from mt_cli.translate import translate_file

LOCAL_COPY = Path("data/multi30k")  # where hub downloads are written (git-ignored)


def run_quickstart(data: Path | None, out: Path, max_minutes: float, device: str, log=print) -> dict[str, Any]:
    folder = fetch_multi30k(LOCAL_COPY, data)
    cfg = build_config("small", options={"train": {"max_minutes": max_minutes, "device": device}})
    paths = TrainPaths(folder / "train.de", folder / "train.en", folder / "val.de", folder / "val.en", out)
    train(paths, cfg, log=log)
    hyp = out / "test2016.hyp.en"
    log(f"translating {folder / 'test2016.de'} -> {hyp}")
    translate_file(out / "best.pt", folder / "test2016.de", hyp, device)
    return score_files(hyp, [folder / "test2016.en"])
