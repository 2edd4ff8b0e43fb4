"""CTranslate2: the Hugging Face Marian export, converted by CTranslate2's own converter."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from mt_cli.decode.shortlist import Shortlist
from mt_cli.errors import MtError
from mt_cli.interop.marian import export_hf, move_into_place, refuse_non_empty
from mt_cli.model.checkpoint import Checkpoint


def export_ct2(ckpt: Checkpoint, out_dir: Path, quantization: str | None = None) -> Path:
    """Write a CTranslate2 model folder: the Marian export, converted by CTranslate2's own converter."""
    try:
        from ctranslate2.converters import TransformersConverter
    except ImportError:
        raise MtError("--format ct2 needs CTranslate2 and transformers: pip install ctranslate2 transformers") from None
    out_dir = Path(out_dir)
    refuse_non_empty(out_dir)
    with tempfile.TemporaryDirectory(dir=out_dir.parent) as tmp:
        hf_dir = export_hf(ckpt, Path(tmp) / "hf")
        converted = TransformersConverter(str(hf_dir)).convert(str(Path(tmp) / "ct2"), quantization=quantization)
        for name in ("source.spm", "target.spm"):  # CTranslate2 takes pieces; users need the tokenizer too
            shutil.copy(hf_dir / name, Path(converted) / name)
        if ckpt.shortlist is not None:
            (Path(converted) / "vmap.txt").write_text(vocabulary_map(ckpt), encoding="utf-8")
        move_into_place(Path(converted), out_dir)
    return out_dir


def vocabulary_map(ckpt: Checkpoint) -> str:
    """The checkpoint's shortlist as CTranslate2's vocabulary map (vmap.txt, read with
    `use_vmap=True`): a line `SOURCE_PIECE<TAB>TARGET_PIECE ...` per source piece, and the
    always-allowed pieces after an empty source. CTranslate2 then restricts its output layer per
    batch as mt does (it adds UNK, BOS and EOS itself)."""
    assert ckpt.shortlist is not None
    short = Shortlist.from_state(ckpt.shortlist, "the checkpoint")
    src, tgt = ckpt.tokenizer.vocabulary("source"), ckpt.tokenizer.vocabulary("target")
    lines = ["\t" + " ".join(tgt[i] for i in short.frequent.tolist())]
    for piece, row in zip(src, short.table.tolist()):
        if targets := [tgt[i] for i in row if i >= 0]:
            lines.append(f"{piece}\t{' '.join(targets)}")
    return "".join(line + "\n" for line in lines)
