"""Beam size x length penalty on a held-out set: the grid behind `mt tune-decoding` and the end of
`mt train` (train.tune_beams, train.tune_length_penalties).

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

# A held-out set: source ids (each ending in EOS), references, and the ids the decoder reads after
# its start token (an M2M100 model's target language; none for most models).
HeldOut = tuple[list[list[int]], list[str], tuple[int, ...]]


def tune_grid(
    translator: Translator, sets: Sequence[HeldOut], beams: Sequence[int], length_penalties: Sequence[float]
) -> list[dict[str, Any]]:
    """BLEU of every beam x length-penalty pair on the held-out sets (their mean, where there are
    several directions), best first; a tie keeps the grid's order (the smaller beam first when
    beams are listed rising)."""
    rows = []
    for beam in beams:
        for alpha in length_penalties if beam > 1 else length_penalties[:1]:  # greedy ignores alpha
            tr = translator.with_options(beam=beam, length_penalty=alpha)
            bleus = []
            for src_ids, refs, start in sets:
                found = tr.search_requests(as_requests(src_ids, start))
                bleus.append(score([hyps[0].text for hyps in found], [refs], ("bleu",))["bleu"])
            rows.append({"beam": beam, "length_penalty": alpha, "bleu": sum(bleus) / len(bleus)})
    rows.sort(key=lambda r: -r["bleu"])
    return rows


def with_decoding(cfg: Config, row: dict[str, Any]) -> Config:
    """`cfg` whose decoding defaults are a tuning row's beam and length penalty."""
    decode = dataclasses.replace(cfg.decode, beam=row["beam"], length_penalty=row["length_penalty"])
    return dataclasses.replace(cfg, decode=decode)
