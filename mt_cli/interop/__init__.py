"""Other toolkits' formats: Hugging Face Marian and M2M100 (both directions of the mapping) and
CTranslate2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mt_cli.config import ModelConfig, TrainConfig
from mt_cli.errors import MtError
from mt_cli.model.checkpoint import Checkpoint


def import_folder(
    folder: Path,
    out: Path,
    log: Callable[[str], None] = lambda _: None,
    dev: tuple[Path, Path] | None = None,
    tolerance: float = TrainConfig.int8_tolerance,
    languages: tuple[str | None, str | None] = (None, None),
) -> Path:
    """`mt import`: a Hugging Face folder (MarianMTModel, M2M100, NLLB-200) or hub id, or a Marian
    folder as Bergamot / Firefox Translations ship their students, written as a checkpoint at `out`.
    It decodes in fp32 unless `dev` (source and reference files, translated in `languages`) shows
    int8 within `tolerance` BLEU of it. A student's decoder step is compiled for this CPU as it
    imports (about 20 s, as `mt compile`): one line at a time, the eager step's Python is most of
    its latency."""
    student = (
        folder.is_dir() and not (folder / "config.json").is_file() and any(folder.glob("*.yml"))
    )
    if student:
        from mt_cli.interop.marian_folder import read_folder
        from mt_cli.model import checkpoint

        checkpoint.save(out, read_folder(folder))
    else:
        from mt_cli.interop.hf_import import import_hf

        import_hf(folder, out)
    if dev is None:
        log(
            f"{out} decodes in fp32; int8, faster on a CPU, is unchecked: `mt tune-precision "
            f"--checkpoint {out} --src DEV.src --ref DEV.ref --out {out}` checks it on your data"
        )
    else:
        from mt_cli.decode.tuning import precision_verdict, tune_precision_file

        row = tune_precision_file(out, *dev, tolerance, out, languages)
        log(precision_verdict(row, str(out), str(dev[0])))
    if student:
        from mt_cli.decode.compiled import compile_or_say

        compile_or_say(out, "its", log)
    return out


def export_refusal(model: ModelConfig, fmt: str) -> str | None:
    """Why a model of this config cannot be written as `fmt` (hf, ct2), or None where it can."""
    toolkit = {"hf": "Hugging Face", "ct2": "CTranslate2"}.get(fmt)
    if toolkit is None:  # not a format these limits apply to (export names the formats it has)
        return None
    if model.decoder_autoreg == "ssru":
        return (
            "this model's decoder has an SSRU in place of self-attention (model.decoder_autoreg "
            "ssru), which no"
            f" {toolkit} model holds; translate it with mt (a student distilled from it with a "
            "self-attention"
            " decoder exports)"
        )
    if model.positions == "tensor2tensor":
        return (
            "this model adds Marian's own sinusoids (model.positions tensor2tensor), which a "
            f"{toolkit} Marian"
            " model computes another way; translate it with mt"
        )
    return None


def export(ckpt: Checkpoint, out_dir: Path, fmt: str, quantization: str | None = None) -> Path:
    refusal = export_refusal(ckpt.config.model, fmt)
    if refusal is not None:
        raise MtError(refusal)
    if fmt == "hf":
        if quantization:
            raise MtError("quantization applies to the ct2 format only")
        from mt_cli.interop.hf_export import export_hf

        # an imported M2M100 or NLLB model goes back to its own layout
        return export_hf(ckpt, out_dir)
    if fmt == "ct2":
        from mt_cli.interop.ct2 import export_ct2

        return export_ct2(ckpt, out_dir, quantization)
    raise MtError(f"format {fmt!r}: choose hf (Hugging Face MarianMTModel) or ct2 (CTranslate2)")
