"""Decoding settings chosen on a held-out set: beam size x length penalty (the grid behind
`mt tune-decoding` and the end of `mt train`: train.tune_beams, train.tune_length_penalties), and
whether int8 keeps the quality of fp32 (train.tune_precision).

Only ever give it validation data: a choice made on a test set makes that test's score a guess
at nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from mt_cli.config import Config
from mt_cli.decode.search import as_requests
from mt_cli.decode.translator import Translator
from mt_cli.metrics import score
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


def tune_precision(ckpt: Checkpoint, sets: Sequence[HeldOut], tolerance: float) -> dict[str, Any]:
    """The held-out BLEU of int8 and fp32 decoding on the CPU, each loaded from `ckpt` as a user's
    `mt translate` loads it, and the precision to record: auto (int8 on a CPU) where int8 loses at
    most `tolerance` BLEU, else fp32."""
    bleu = {
        p: held_out_bleu(Translator.from_checkpoint(ckpt, "cpu", precision=p), sets)
        for p in ("fp32", "int8")
    }
    return {**bleu, "precision": "auto" if bleu["int8"] >= bleu["fp32"] - tolerance else "fp32"}


def with_decoding(cfg: Config, **fields: Any) -> Config:
    """`cfg` with these decoding defaults (a tuning row's beam and length_penalty, a precision)."""
    return dataclasses.replace(cfg, decode=dataclasses.replace(cfg.decode, **fields))
