"""`mt report RUN`: what a run did, in one Markdown file with its curves beside it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from mt_cli.errors import MtError
from mt_cli.files import atomic_write_text
from mt_cli.tools.plot import draw_curves, read_log


def _scores(entries: list[dict[str, Any]]) -> list[str]:
    valid = [e for e in entries if "valid_bleu" in e and "averaged" not in e]
    if not valid:
        return ["No validation yet."]
    best, last = max(valid, key=lambda e: e["valid_bleu"]), valid[-1]
    averaged = [e for e in entries if "averaged" in e]
    taken = bool(averaged) and averaged[-1].get("chosen", False)  # then best.pt holds the average
    lines = [
        f"- best validation BLEU: **{best['valid_bleu']:.2f}** at step {best['step']}"
        f" (`{'best-step.pt' if taken else 'best.pt'}`)",
        f"- final validation: BLEU {last['valid_bleu']:.2f}, loss {last['valid_loss']:.3f} at step "
        f"{last['step']}",
    ]
    if averaged:
        a = averaged[-1]
        where = "`best.pt`" if taken else "`averaged.pt`; best.pt kept the single step"
        what = f"- average of {', '.join(a['averaged'])}"
        lines.append(f"{what}: validation BLEU {a['valid_bleu']:.2f} ({where})")
    tuned = [e["tuned"] for e in entries if "tuned" in e]
    if tuned:
        top = tuned[-1][0]
        lines.append(
            f"- decoding tuned on validation ({len(tuned[-1])} settings): beam {top['beam']}, "
            "length penalty"
            f" {top['length_penalty']:g}, BLEU {top['bleu']:.2f}: best.pt's defaults"
        )
    checked = [e["int8_checked"] for e in entries if "int8_checked" in e]
    if checked:
        c = checked[-1]
        kept = "int8 on a CPU" if c["precision"] == "auto" else "fp32"
        lines.append(
            f"- int8 decoding checked on validation: BLEU {c['int8']:.2f} against fp32's "
            f"{c['fp32']:.2f}; best.pt decodes in {kept}"
        )
    return lines


def _training(entries: list[dict[str, Any]]) -> list[str]:
    train = [e for e in entries if "tokens_per_s" in e]
    if not train:
        return ["No training steps logged yet."]
    last = train[-1]
    minutes, step = last["elapsed_s"] / 60, last["step"]
    rate = statistics.median(e["tokens_per_s"] for e in train)
    lines = [
        f"- steps: {max(e['step'] for e in entries)}, epochs begun: {last['epoch']}",
        f"- training time: {minutes:.1f} min to step {step} (validation excluded)",
        f"- throughput: median {rate:,.0f} target tokens/s",
        f"- last logged training loss {last['loss']:.3f}, learning rate {last['lr']:.2e} "
        f"(step {step})",
    ]
    if all("mfu" in e for e in train):
        mfu = 100 * statistics.median(e["mfu"] for e in train)
        lines.append(f"- model FLOPs utilisation: median {mfu:.1f}%")
    skipped = sum(1 for e in entries if "skipped" in e)
    if skipped:
        lines.append(f"- {skipped} steps skipped (loss or gradient not finite)")
    return lines


def _data_and_environment(run: Path) -> list[str]:
    info_path = run / "run.json"
    if not info_path.is_file():
        return [
            "## Data and environment",
            "",
            f"`{info_path}` is missing (runs before mt 0.1 did not write it).",
        ]
    info = json.loads(info_path.read_text(encoding="utf-8"))
    lines = [
        "## Data",
        "",
        "| split | source | pairs used | left out | fingerprint |",
        "|---|---|---|---|---|",
    ]
    for split, d in info["data"].items():
        left = ", ".join(f"{k} {v}" for k, v in d.get("left_out", {}).items()) or "-"
        lines.append(
            f"| {split} | `{d['source']}` | {d['pairs']} | {left} | `{d['fingerprint'][:16]}` |"
        )
    lines += ["", "## Environment", ""] + [f"- {k}: {v}" for k, v in info["environment"].items()]
    return lines


def write_report(run: Path, out: Path) -> Path:
    """RUN's report as Markdown at `out`, with the curves as `<out stem>-curves.png` beside it."""
    run, out = Path(run), Path(out)
    if not (run / "config.yaml").is_file():
        raise MtError(
            f"{run}: not a run folder (no config.yaml); give the folder a `mt train` run wrote"
        )
    entries = read_log(run, with_averaged=True)
    curves = draw_curves([run], out.with_name(f"{out.stem}-curves.png"))
    lines = [
        f"# Run report: {run.name}",
        "",
        f"Run folder: `{run}`",
        "",
        "## Scores",
        "",
        *_scores(entries),
    ]
    lines += ["", "## Training", "", *_training(entries), "", *_data_and_environment(run)]
    lines += ["", "## Curves", "", f"![training curves]({curves.name})", ""]
    config = (run / "config.yaml").read_text(encoding="utf-8")
    lines += ["## Config", "", "```yaml", config.rstrip(), "```", ""]
    atomic_write_text(out, "\n".join(lines))
    return out
