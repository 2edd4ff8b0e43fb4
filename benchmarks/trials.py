"""Compare training runs: what each changed against the first, and the validation BLEU it reached.

    python benchmarks/trials.py checkpoints/trials/A checkpoints/trials/B ...

Each argument is a run folder written by `mt train` (config.yaml and log.jsonl). The "change"
column lists the config fields that differ from the first run's, so the table cannot disagree
with what was run. Prints a Markdown table; figures come from the logs, never by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from mt_cli.config import Config, to_dict

# Filled in from the tokenizer, or bookkeeping: never a choice worth a column.
IGNORED = {"model.src_vocab_size", "model.tgt_vocab_size", "model.shared_vocab"}


def flat(config: dict[str, Any]) -> dict[str, Any]:
    return {f"{section}.{k}": v for section, fields in config.items() for k, v in fields.items()}


def summary(run: Path) -> dict[str, Any]:
    """Validation BLEU (last and best), steps and minutes of one run, from its log."""
    entries = [
        json.loads(line) for line in (run / "log.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    valid = [e for e in entries if "valid_bleu" in e and "averaged" not in e]
    averaged = [e["valid_bleu"] for e in entries if "averaged" in e]
    timed = [e for e in entries if "elapsed_s" in e]
    return {
        "last": valid[-1]["valid_bleu"] if valid else float("nan"),
        "nll": valid[-1].get("valid_nll", float("nan")) if valid else float("nan"),
        "best": max((e["valid_bleu"] for e in valid), default=float("nan")),
        "averaged": averaged[-1] if averaged else None,
        "steps": valid[-1]["step"] if valid else 0,
        "minutes": timed[-1]["elapsed_s"] / 60 if timed else 0.0,
        "tokens_per_s": sum(e["tokens_per_s"] for e in timed) / len(timed) if timed else 0.0,
    }


def shown(key: str, value: Any) -> Any:
    """A field's value for the change column: a corpus list as its directions (de-en, fr-en),
    each with its weight where it is not 1, and a star where the pair is validated."""
    if key != "data.pairs":
        return value
    names = []
    for pair in value:
        name = f"{Path(pair['src']).suffix[1:]}-{Path(pair['tgt']).suffix[1:]}"
        name += "*" if pair.get("valid_src") else ""
        names.append(name + (f" x{pair['weight']:g}" if pair.get("weight", 1) != 1 else ""))
    return "[" + ", ".join(names) + "]"


def table(runs: list[Path]) -> str:
    # A run saved before a field existed trained with its default: today's default fills it in.
    defaults = flat(to_dict(Config()))
    configs = [
        {**defaults, **flat(yaml.safe_load((r / "config.yaml").read_text(encoding="utf-8")))}
        for r in runs
    ]
    base = configs[0]
    lines = [
        "| run | change (vs first) | steps | train min | tok/s | valid NLL (last) | valid BLEU "
        "(last) | best | averaged |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run, cfg in zip(runs, configs):
        diff = [
            f"{k}={shown(k, cfg[k])}" for k in cfg if k not in IGNORED and cfg[k] != base.get(k)
        ]
        s = summary(run)
        avg = f"{s['averaged']:.2f}" if s["averaged"] is not None else "-"
        cells = [
            run.name,
            ", ".join(diff) or "(baseline)",
            str(s["steps"]),
            f"{s['minutes']:.1f}",
            f"{s['tokens_per_s']:.0f}",
            f"{s['nll']:.3f}",
            f"{s['last']:.2f}",
            f"{s['best']:.2f}",
            avg,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("runs", type=Path, nargs="+", help="run folders; the first is the baseline")
    print(table(p.parse_args().runs))


if __name__ == "__main__":
    main()
