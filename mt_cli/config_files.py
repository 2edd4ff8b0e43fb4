"""Config files and `--set` values: YAML read with 1.2 booleans, checked for shape, with one clear
line for a file that is missing or not YAML. yaml is imported on first use: `mt translate` reads
none, and starts sooner without it."""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path
from typing import Any

from mt_cli.errors import MtError


def _yaml() -> Any:
    return importlib.import_module("yaml")  # on first use: `mt translate` reads none, and starts sooner


@functools.cache
def _loader() -> Any:
    """YAML with the 1.2 booleans: only true/false. In YAML 1.1 `amp: off` would be False, not "off"."""
    safe, bool_tag = _yaml().SafeLoader, "tag:yaml.org,2002:bool"
    loader: Any = type("Loader", (safe,), {})
    loader.yaml_implicit_resolvers = {
        first: [r for r in resolvers if r[0] != bool_tag] for first, resolvers in safe.yaml_implicit_resolvers.items()
    }
    loader.add_implicit_resolver(bool_tag, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    return loader


def read_yaml(text: str) -> Any:
    return _yaml().load(text, Loader=_loader())  # noqa: S506 (a SafeLoader)


def parse_set(item: str) -> dict[str, Any]:
    """`model.dropout=0` -> {"model": {"dropout": 0}}; the value is read as YAML."""
    key, sep, raw = item.partition("=")
    parts = key.strip().split(".")
    if not sep or len(parts) != 2 or not all(parts):
        raise MtError(f"--set {item!r}: expected SECTION.FIELD=VALUE, e.g. --set model.dropout=0")
    try:
        value = read_yaml(raw)
    except _yaml().YAMLError:
        value = raw
    return {parts[0]: {parts[1]: value}}


def load_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise MtError(f"{path}: config file not found")
    try:
        data = read_yaml(path.read_text(encoding="utf-8")) or {}
    except _yaml().YAMLError as e:
        raise MtError(f"{path}: not valid YAML ({e})".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise MtError(f"{path}: expected a mapping of sections (model, tokenizer, train, decode)")
    return data
