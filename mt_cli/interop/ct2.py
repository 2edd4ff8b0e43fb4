"""CTranslate2: the Hugging Face export (Marian, or an imported M2M100/NLLB model's own layout),
converted by CTranslate2's own converter."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from mt_cli.data.m2m_vocab import M2MVocab
from mt_cli.decode.shortlist import Shortlist
from mt_cli.errors import MtError
from mt_cli.interop.hf_export import export_hf, move_into_place, refuse_non_empty
from mt_cli.model.checkpoint import Checkpoint


def export_ct2(ckpt: Checkpoint, out_dir: Path, quantization: str | None = None) -> Path:
    """Write a CTranslate2 model folder: the Marian export, converted by CTranslate2's own
    converter."""
    try:
        from ctranslate2.converters import TransformersConverter
    except ImportError:
        raise MtError(
            "export to CTranslate2 needs ctranslate2 and transformers: pip install them"
        ) from None
    out_dir = Path(out_dir)
    refuse_non_empty(out_dir)
    tok = ckpt.tokenizer
    with tempfile.TemporaryDirectory(dir=out_dir.parent) as tmp:
        hf_dir = export_hf(ckpt, Path(tmp) / "hf")
        converter = TransformersConverter(str(hf_dir))
        if isinstance(tok, M2MVocab):
            converter.load_tokenizer = _with_vocabulary(converter.load_tokenizer, tok.m2m["vocab"])
        converted = converter.convert(str(Path(tmp) / "ct2"), quantization=quantization)
        # CTranslate2 takes pieces; users need the tokenizer too
        for name in (
            ("sentencepiece.bpe.model",)
            if isinstance(tok, M2MVocab)
            else ("source.spm", "target.spm")
        ):
            shutil.copy(hf_dir / name, Path(converted) / name)
        if ckpt.shortlist is not None:
            (Path(converted) / "vmap.txt").write_text(vocabulary_map(ckpt), encoding="utf-8")
        move_into_place(Path(converted), out_dir)
    return out_dir


def _with_vocabulary(load: Any, pieces: list[str]) -> Any:
    """The converter's tokenizer loader, its tokenizer reporting the model's whole vocabulary as mt
    reads it (language tokens and unused rows included). Transformers 5's M2M100 tokenizer lists no
    language tokens among its special tokens, and the converter, which appends those, fell short."""

    class Vocabulary:
        special_tokens_map: dict[str, Any] = {}
        num_madeup_words = 0  # the unused rows are in `pieces` already

        def __init__(self, tokenizer: Any) -> None:
            self._tokenizer = tokenizer

        def get_vocab(self) -> dict[str, int]:
            return {p: i for i, p in enumerate(pieces)}

        def __getattr__(self, name: str) -> Any:
            return getattr(self._tokenizer, name)

    return lambda *args, **kwargs: Vocabulary(load(*args, **kwargs))


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
