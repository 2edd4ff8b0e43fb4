"""Config files and `--set` values: YAML read with 1.2 booleans, checked for shape, with one clear
line for a file that is missing or not YAML. yaml is imported on first use: `mt translate` reads
none, and starts sooner without it."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
import types
import typing
from pathlib import Path
from typing import Any

from mt_cli.errors import MtError


def _yaml() -> Any:
    # on first use: `mt translate` reads none, and starts sooner
    return importlib.import_module("yaml")


@functools.cache
def _loader() -> Any:
    """YAML with the 1.2 booleans: only true/false. In YAML 1.1 `amp: off` would be False, not
    "off"."""
    safe, bool_tag = _yaml().SafeLoader, "tag:yaml.org,2002:bool"
    loader: Any = type("Loader", (safe,), {})
    loader.yaml_implicit_resolvers = {
        first: [r for r in resolvers if r[0] != bool_tag]
        for first, resolvers in safe.yaml_implicit_resolvers.items()
    }
    loader.add_implicit_resolver(
        bool_tag, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
    )
    return loader


def read_yaml(text: str) -> Any:
    return _yaml().load(text, Loader=_loader())  # noqa: S506 (a SafeLoader)


def parse_set(item: str) -> dict[str, Any]:
    """`model.dropout=0` -> {"model": {"dropout": 0}}; the value is read as YAML."""
    key, sep, raw = item.partition("=")
    parts = key.strip().split(".")
    if not sep or len(parts) != 2 or not all(parts):
        raise MtError(f"override {item!r}: expected SECTION.FIELD=VALUE, e.g. model.dropout=0")
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
        raise MtError(
            f"{path}: expected a mapping of sections (model, tokenizer, train, decode, data)"
        )
    return data


def build_section(cls: type, values: dict[str, Any], where: str) -> Any:
    """One config section (a dataclass) from a dict, each value checked against its field's type;
    unknown fields are errors naming the known ones."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise MtError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(names)}")
    coerced = {k: _coerce(v, hints[k], f"{where}.{k}") for k, v in values.items()}
    return cls(**coerced)


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Check a YAML value against a field's type; ints are accepted where floats are expected."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    # a nested entry (data.pairs' PairConfig)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            fields = [f.name for f in dataclasses.fields(hint)]
            raise MtError(f"{where} must be a mapping of {fields}, not {value!r}")
        return build_section(hint, value, where)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:  # tuple[int, ...]: any length
        if not isinstance(value, (list, tuple)):
            raise MtError(f"{where} must be a list, not {value!r}")
        return tuple(_coerce(v, args[0], where) for v in value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise MtError(f"{where} must be a list of {len(args)} values, not {value!r}")
        return tuple(_coerce(v, a, where) for v, a in zip(value, args))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is str and isinstance(value, bool):  # YAML reads true/false as booleans
        return "true" if value else "false"
    if hint is float and isinstance(value, str):
        try:  # YAML 1.1 reads 5e-4 (no dot) as a string
            return float(value)
        except ValueError:
            pass
    if isinstance(value, bool) != (hint is bool) or not isinstance(value, hint):
        raise MtError(f"{where} must be of type {hint.__name__}, not {value!r}")
    return value


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out
