"""`mt evaluate`: score files (or translate with a checkpoint, then score), compare systems for
significance; `mt tune-decoding` (beam x length penalty)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mt_cli.config import DEFAULT_METRICS, DEVICE
from mt_cli.data.text import check_aligned, read_lines
from mt_cli.decode.translator import Translator
from mt_cli.decode.tuning import tune_grid, with_decoding
from mt_cli.errors import MtError
from mt_cli.metrics import paired_bootstrap, score
from mt_cli.model import checkpoint


def score_files(
    hyp_path: Path,
    ref_paths: list[Path],
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    tokenize: str | None = None,
) -> dict[str, Any]:
    """Score a hypothesis file against line-aligned reference files."""
    hyps = read_lines(hyp_path)
    refs = [read_lines(p) for p in ref_paths]
    for path, ref in zip(ref_paths, refs):
        check_aligned(hyp_path, hyps, path, ref)
    return score(hyps, refs, metrics, tokenize)


def significance(
    hyp_paths: list[Path], ref_paths: list[Path], tokenize: str | None = None, samples: int = 1000
) -> dict[str, Any]:
    """`mt evaluate --significance`: each hypothesis file after the first against the first (the
    baseline), by paired bootstrap resampling (metrics.paired_bootstrap)."""
    if len(hyp_paths) < 2:
        raise MtError(
            "a significance test compares systems: "
            "give a baseline's translations and one system's (or more)"
        )
    hyps = [read_lines(p) for p in hyp_paths]
    refs = [read_lines(p) for p in ref_paths]
    for path, hyp in zip(hyp_paths, hyps):
        for ref_path, ref in zip(ref_paths, refs):
            check_aligned(path, hyp, ref_path, ref)
    return paired_bootstrap([(str(p), h) for p, h in zip(hyp_paths, hyps)], refs, tokenize, samples)


def evaluate_run(
    hyp_path: Path | None,
    ref_paths: list[Path],
    checkpoint_path: Path | None = None,
    src_path: Path | None = None,
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    tokenize: str | None = None,
    device: str = DEVICE,
    **decoding: Any,
) -> dict[str, Any]:
    """Score a hypothesis file, or translate `src_path` with a checkpoint first (with any decoding
    settings, DecodeConfig's fields) and score that."""
    if (hyp_path is None) == (checkpoint_path is None):
        raise MtError(
            "give either translations to score, or a checkpoint and the source text it translates"
        )
    if checkpoint_path is None:
        assert hyp_path is not None
        return score_files(hyp_path, ref_paths, metrics, tokenize)
    if src_path is None:
        raise MtError(
            "a checkpoint is scored on its translations of a source text: give the source file"
        )
    translator = Translator.load(checkpoint_path, device, **decoding)
    src = read_lines(src_path)
    refs = [read_lines(p) for p in ref_paths]
    for path, ref in zip(ref_paths, refs):
        check_aligned(src_path, src, path, ref)
    return score(translator.translate(src), refs, metrics, tokenize)


def tune_decoding(
    checkpoint_path: Path,
    src_path: Path,
    ref_path: Path,
    beams: Sequence[int],
    length_penalties: Sequence[float],
    device: str = DEVICE,
    out: Path | None = None,
) -> list[dict[str, Any]]:
    """BLEU on a held-out set for every beam x length-penalty pair, best first.

    Use the validation set, never the test set. With `out`, a copy of the checkpoint whose decoding
    defaults are the best pair is written there, so `mt translate` uses them without options.
    """
    ckpt = checkpoint.load(checkpoint_path)
    translator = Translator.from_checkpoint(ckpt, device)
    src, ref = read_lines(src_path), read_lines(ref_path)
    check_aligned(src_path, src, ref_path, ref)
    rows = tune_grid(
        translator,
        [(translator.source_ids(src), ref, translator.decoder_start)],
        beams,
        length_penalties,
    )
    if out is not None:
        ckpt.config = with_decoding(
            ckpt.config, beam=rows[0]["beam"], length_penalty=rows[0]["length_penalty"]
        )
        checkpoint.save(out, ckpt)
    return rows
