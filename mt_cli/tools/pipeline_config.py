"""The pipeline commands' own config sections from their options and --set: clean.* (`mt clean`),
and distill.* beside the student's config (`mt distill`)."""

from __future__ import annotations

from typing import Any

from mt_cli.config.pipeline import CleanConfig, DistillConfig
from mt_cli.config.yaml_files import build_section, parse_set
from mt_cli.errors import MtError


def clean_config(given: dict[str, Any], sets: list[str]) -> CleanConfig:
    """clean.* from the command's options and --set clean.FIELD=VALUE (a list as YAML, [a, b], or a,
    b)."""
    values = dict(given)
    for item in sets:
        for section, fields in parse_set(item).items():
            if section != "clean":
                raise MtError(f"{item}: mt clean takes clean.* fields only")
            values.update(fields)
    for name in ("rules", "language_others"):
        if isinstance(values.get(name), str):
            values[name] = [x.strip() for x in values[name].split(",") if x.strip()]
    return build_section(CleanConfig, values, "clean")


def split_sets(sets: list[str], given: dict[str, Any]) -> tuple[list[str], DistillConfig]:
    """`mt distill`'s --set items: the distill.* ones make DistillConfig (over the options given),
    the rest are the student's config."""
    values, rest = dict(given), []
    for item in sets:
        parsed = parse_set(item)
        if "distill" in parsed:
            values.update(parsed["distill"])
        else:
            rest.append(item)
    return rest, build_section(DistillConfig, values, "distill")
