"""The decoding plan: how search runs for one loaded model, resolved once, when it loads.

Four choices make it: the precision the step runs in on this device (decode.precision, `auto`
resolved), whether the step runs compiled (decode.engine: `compiled` builds the package where it
is missing, `auto` runs one where it is built, `eager` never), which compiled package that is (it
sits beside the checkpoint file: decode/compiled.py), and the vocabulary shortlist search scores
over (the checkpoint's, where it has one and decode.shortlist is on). The Translator, and through
it the server and validation during training, ask the plan; none of them derives these again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from mt_cli.config import DecodeConfig
from mt_cli.decode import compiled
from mt_cli.decode.engine import Engine
from mt_cli.decode.precision import packs_weights
from mt_cli.decode.shortlist import Shortlist
from mt_cli.device import decode_precision
from mt_cli.errors import MtError
from mt_cli.model.transformer import Transformer


@dataclass(frozen=True)
class Plan:
    precision: str  # fp32, bf16 or int8: what the step runs in on `device`
    # "build" (build the package where missing, then run it), "load" (run one where built), ""
    # (never)
    compiled: str
    device: torch.device
    # what search scores over (None: all)
    shortlist: Shortlist | None = field(default=None, repr=False)
    # decode.beam as loaded: with `compiled`, whether a built package runs (`_runs_compiled`)
    beam: int = 1

    def engine(self, model: Transformer, source: Path | None) -> Engine:
        """The engine search runs for `model` (its fp32 weights: build it before quantizing the
        model), with the compiled step of the checkpoint file `source` where the plan runs one."""
        runs = self.compiled == "build" or (self.compiled == "load" and self._runs_compiled(model))
        package = (
            compiled.package_path(source, self.precision) if source is not None and runs else None
        )
        engine = Engine(model, self.precision)
        if package is not None and not package.exists() and self.compiled == "build":
            compiled.build(engine, package)
        if package is not None and package.exists():
            engine.compiled = compiled.load(package)
        return engine

    def _runs_compiled(self, model: Transformer) -> bool:
        """Whether a built package beats the eager step. It does, except in int8 on CPUs whose
        int8 products use weights packed for oneDNN (precision.packs_weights: AMX), which the
        compiled step cannot hold: there the eager step won where the products outweigh the
        Python between them (d512 at beam 4, d1024 at beam 4 and greedy) and lost or tied below
        (d512 greedy, d256 at beam 5 and greedy): d_model x beam (2 at least) of 2048 or more."""
        return not (
            self.precision == "int8"
            and packs_weights()
            and model.cfg.d_model * max(self.beam, 2) >= 2048
        )


def resolve(
    cfg: DecodeConfig,
    device: torch.device,
    sources: list[Path | None],
    shortlist: Shortlist | None = None,
) -> Plan:
    """The plan for `cfg` on `device`, for models loaded from `sources` (None: a model in memory
    only, which runs uncompiled), with the checkpoint's `shortlist` where it has one."""
    precision = decode_precision(cfg.precision, device)
    if precision == "int8" and device.type != "cpu":
        raise MtError(
            "decode.precision int8 runs on the CPU only; "
            f"use device cpu, or decode.precision bf16 on {device}"
        )
    if cfg.engine == "compiled" and (device.type != "cpu" or None in sources):
        where = f"here: {device.type}" + "".join(f", {s}" for s in sources if s is not None)
        raise MtError(
            f"decode.engine compiled runs on the CPU from a checkpoint file ({where}); use "
            "decode.engine eager"
        )
    mode = {"compiled": "build", "auto": "load"}.get(cfg.engine, "") if device.type == "cpu" else ""
    return Plan(precision, mode, device, shortlist if cfg.shortlist else None, cfg.beam)
