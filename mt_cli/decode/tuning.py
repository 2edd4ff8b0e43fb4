"""Decoding settings chosen on a held-out set: beam size x length penalty (the grid behind
`mt tune-decoding` and the end of `mt train`: train.tune_beams, train.tune_length_penalties), and
whether int8 keeps the quality of fp32 (train.tune_precision).

Only ever give it validation data: a choice made on a test set makes that test's score a guess
at nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mt_cli.config import Config
from mt_cli.data.text import check_aligned, read_lines
from mt_cli.decode.search import as_requests
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.metrics import score
from mt_cli.model import checkpoint
from mt_cli.model.checkpoint import Checkpoint

# A held-out set: source ids (each ending in EOS), references, and the ids the decoder reads after
# its start token (an M2M100 model's target language; none for most models).
HeldOut = tuple[list[list[int]], list[str], tuple[int, ...]]


def tune_grid(
    translator: Translator,
    sets: Sequence[HeldOut],
    beams: Sequence[int],
    length_penalties: Sequence[float],
) -> list[dict[str, Any]]:
    """BLEU of every beam x length-penalty pair on the held-out sets (their mean, where there are
    several directions), best first; a tie keeps the grid's order (the smaller beam first when
    beams are listed rising)."""
    rows = []
    for beam in beams:
        for alpha in length_penalties if beam > 1 else length_penalties[:1]:  # greedy ignores alpha
            bleu = held_out_bleu(translator.with_options(beam=beam, length_penalty=alpha), sets)
            rows.append({"beam": beam, "length_penalty": alpha, "bleu": bleu})
    rows.sort(key=lambda r: -r["bleu"])
    return rows


def held_out_bleu(translator: Translator, sets: Sequence[HeldOut]) -> float:
    """BLEU of the translator's decoding on the held-out sets (their mean, where there are
    several)."""
    bleus = []
    for src_ids, refs, start in sets:
        found = translator.search_requests(as_requests(src_ids, start))
        bleus.append(score([hyps[0].text for hyps in found], [refs], ("bleu",))["bleu"])
    return sum(bleus) / len(bleus)


@dataclass(frozen=True)
class HeldOutText:
    """A held-out set as text: source lines, their references, and the direction to translate
    in (language codes; None: the model's own), for a model outside a training run."""

    src: list[str]
    refs: list[str]
    languages: tuple[str | None, str | None] = (None, None)


def tune_precision(
    ckpt: Checkpoint, sets: Sequence[HeldOut] | HeldOutText, tolerance: float
) -> dict[str, Any]:
    """The held-out BLEU of int8 and fp32 decoding on the CPU, each loaded from `ckpt` as a user's
    `mt translate` loads it, and the precision to record: auto (int8 on a CPU with VNNI or AMX)
    where int8 loses at most `tolerance` BLEU, else fp32."""
    bleu = {}
    for p in ("fp32", "int8"):
        translator = Translator.from_checkpoint(ckpt, "cpu", precision=p)
        if isinstance(sets, HeldOutText):  # read as this model reads text, in its direction
            translator = translator.for_languages(*sets.languages)
            ids = translator.source_ids(sets.src)
            bleu[p] = held_out_bleu(translator, [(ids, sets.refs, translator.decoder_start)])
        else:
            bleu[p] = held_out_bleu(translator, sets)
    return {**bleu, "precision": "auto" if bleu["int8"] >= bleu["fp32"] - tolerance else "fp32"}


def tune_precision_file(
    path: Path,
    src_path: Path,
    ref_path: Path,
    tolerance: float,
    out: Path | None = None,
    languages: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """`mt tune-precision`, and `mt import` given a dev set: tune_precision on a source file and
    its references, translated in `languages` (source, target; None: the model's own), the
    verdict written into a copy of the checkpoint at `out` (which may be `path` itself)."""
    src, refs = read_lines(src_path), read_lines(ref_path)
    check_aligned(src_path, src, ref_path, refs)
    if not src:
        raise MtError(f"{src_path}: no lines; the dev set int8 is checked on needs some")
    ckpt = checkpoint.load(path)
    row = tune_precision(ckpt, HeldOutText(src, refs, languages), tolerance)
    if out is not None:
        ckpt.config = with_decoding(ckpt.config, precision=row["precision"])
        checkpoint.save(out, ckpt)
    return row


def precision_verdict(row: dict[str, Any], what: str, held_out: str) -> str:
    """One line on tune_precision's `row`: both BLEUs on `held_out` and what `what` (a checkpoint's
    name) decodes in now."""
    verdict = (
        "int8 on a CPU with VNNI or AMX (decode.precision auto)"
        if row["precision"] == "auto"
        else "fp32: int8 lost quality"
    )
    return (
        f"int8 decoding: {held_out} BLEU {row['int8']:.2f} against fp32's {row['fp32']:.2f}; "
        f"{what} decodes in {verdict}"
    )


def with_decoding(cfg: Config, **fields: Any) -> Config:
    """`cfg` with these decoding defaults (a tuning row's beam and length_penalty, a precision)."""
    return dataclasses.replace(cfg, decode=dataclasses.replace(cfg.decode, **fields))
