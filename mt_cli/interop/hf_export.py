"""Export to Hugging Face transformers: the folder layout of the model's kind (MarianMTModel, or
M2M100 for an imported M2M100 or NLLB model), written whole or not at all."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from mt_cli.data.m2m_vocab import M2MVocab
from mt_cli.errors import MtError
from mt_cli.files import temp_dir
from mt_cli.model.checkpoint import Checkpoint


def export_hf(ckpt: Checkpoint, out_dir: Path) -> Path:
    """A Hugging Face folder of the checkpoint at out_dir. An existing non-empty folder is refused,
    so an earlier export is never half overwritten."""
    out_dir = Path(out_dir)
    if isinstance(ckpt.tokenizer, M2MVocab):  # an imported M2M100 or NLLB model: its own layout
        from mt_cli.interop.m2m100 import export_m2m100

        return export_m2m100(ckpt, out_dir)
    from mt_cli.interop.marian import export_marian

    return export_marian(ckpt, out_dir)


def write_folder(out_dir: Path, write: Callable[[Path], None]) -> Path:
    """A folder whole or not at all: `write` fills a temporary folder beside it, whose files are
    synced and which is then renamed into place. An existing non-empty `out_dir` is refused."""
    refuse_non_empty(out_dir)
    tmp = temp_dir(out_dir.parent, f".{out_dir.name}.")
    try:
        write(tmp)
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        move_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def refuse_non_empty(out_dir: Path) -> None:
    if out_dir.exists() and any(out_dir.iterdir()):
        raise MtError(
            f"{out_dir}: folder exists and is not empty; choose a new output folder or remove it"
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)


def move_into_place(done: Path, out_dir: Path) -> None:
    if out_dir.exists():
        out_dir.rmdir()  # empty: refuse_non_empty checked it
    done.rename(out_dir)
