"""Training curves from RUN/log.jsonl: loss, validation loss, validation BLEU and learning rate
against step, several runs overlaid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mt_cli.errors import MtError
from mt_cli.files import atomic_open

PANELS = [  # (title, log field)
    ("training loss (label-smoothed, per token)", "loss"),
    ("validation loss", "valid_loss"),
    ("validation BLEU", "valid_bleu"),
    ("learning rate", "lr"),
]


def read_log(run: Path, with_averaged: bool = False) -> list[dict[str, Any]]:
    """The entries of RUN/log.jsonl; a line cut short by a kill is skipped, and so is the averaged
    model's validation (not a point on the curve) unless `with_averaged`."""
    path = Path(run) / "log.jsonl"
    if not path.is_file():
        raise MtError(f"{path}: not found; give a run folder written by `mt train`")
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and (with_averaged or "averaged" not in entry):
            entries.append(entry)
    return entries


def series(entries: list[dict[str, Any]], field: str) -> tuple[list[int], list[float]]:
    points = [(e["step"], e[field]) for e in entries if field in e]
    return [s for s, _ in points], [v for _, v in points]


def draw_curves(runs: list[Path], out: Path) -> Path:
    """One PNG with a panel per curve and a line per run (labelled by its folder name)."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no display needed

    logs = {Path(run): read_log(run) for run in runs}
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    for i, (title, field) in enumerate(PANELS, start=1):
        ax = fig.add_subplot(2, 2, i)
        for run, entries in logs.items():
            steps, values = series(entries, field)
            if steps:
                ax.plot(
                    steps,
                    values,
                    marker="o" if field.startswith("valid") else None,
                    markersize=3,
                    label=run.name,
                )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if field == "lr":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        if len(logs) > 1 and ax.lines:
            ax.legend(fontsize=8)
    with atomic_open(Path(out), "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    return Path(out)
