"""What a server can translate before it loads anything: each checkpoint's languages, read from
its recorded config and tokenizer (checkpoint.load maps the weights without reading them), so that
`mt serve --models DIR` lists and routes every pair at once and loads a model only when a request
needs it.

A folder holds models as `NAME.pt` files and as run folders (`RUN/best.pt`, the run's best). A
checkpoint's languages are those `mt train` and `mt import` record (model.source_langs and
target_langs), else those its tokenizer is told by tokens (a multi-target model's >>xx<<, M2M100's
and NLLB's), else those its file or run folder is named for (`de-en.pt`, `de-en/best.pt`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mt_cli.errors import MtError
from mt_cli.serve.served_languages import Languages

PAIR_NAME = re.compile(
    r"^([A-Za-z]{2,3}(?:[_-][A-Za-z]{4})?)[-_]([A-Za-z]{2,3}(?:[_-][A-Za-z]{4})?)$"
)


@dataclass(frozen=True)
class Described:
    """A model the server may load: its checkpoint file(s) (several: an ensemble), what it
    translates, its own beam (what a request's cost is counted with), and its size on disk (what
    serve.max_memory_mb counts until it is loaded)."""

    paths: tuple[Path, ...]
    languages: Languages
    beam: int
    size: int

    @property
    def name(self) -> str:
        return ", ".join(_shown(p) for p in self.paths)


def _shown(path: Path) -> str:
    """A checkpoint as /health shows it: its file name, with its run folder's for a run's best.pt
    (never the whole path, which says where the server's files lie)."""
    return (
        f"{path.parent.name}/{path.name}"
        if path.name == "best.pt" and path.parent.name
        else path.name
    )


def found_in(folder: Path) -> list[Path]:
    """The checkpoints of a models folder: its *.pt files and its run folders' best.pt, by name."""
    if not folder.is_dir():
        raise MtError(f"serve.models {folder}: no such folder")
    files = sorted(p for p in folder.glob("*.pt") if p.is_file())
    runs = sorted(p for p in folder.glob("*/best.pt") if p.is_file())
    if not files and not runs:
        raise MtError(
            f"serve.models {folder}: holds no checkpoint (NAME.pt, or a run folder with best.pt)"
        )
    return files + runs


def describe(paths: Sequence[Path]) -> Described:
    """A checkpoint (several: an ensemble of one tokenizer) as the catalog lists it."""
    from mt_cli.model import checkpoint  # torch: only servers that read checkpoints import it

    first = checkpoint.load(paths[0])
    model = first.config.model
    told_sources, told_targets = (tuple(c) for c in first.tokenizer.languages())
    sources = tuple(model.source_langs) or told_sources
    targets = tuple(model.target_langs) or told_targets
    if not sources or not targets:
        named = PAIR_NAME.match(
            paths[0].stem if paths[0].name != "best.pt" else paths[0].parent.name
        )
        if named is None:
            raise MtError(
                f"{paths[0]}: records no languages; name the file (or its run folder) for its "
                "pair, as de-en.pt"
            )
        sources, targets = sources or (named[1],), targets or (named[2],)
    size = sum(p.stat().st_size for p in paths)
    languages = Languages(sources, targets, bool(told_targets), bool(told_sources))
    return Described(tuple(paths), languages, first.config.decode.beam, size)


def catalog(folder: Path | None, checkpoints: Sequence[Path]) -> list[Described]:
    """Every model of a folder, and checkpoints given one by one, each a model of its own. Two
    models for the same languages: refused, naming both."""
    paths = list(checkpoints) + (found_in(folder) if folder is not None else [])
    seen: dict[tuple[tuple[str, ...], tuple[str, ...]], Described] = {}
    for path in paths:
        model = describe([path])
        key = (model.languages.sources, model.languages.targets)
        if key in seen:
            raise MtError(
                f"{model.name} and {seen[key].name} both translate {_pair(key)}; keep one of them"
            )
        seen[key] = model
    return list(seen.values())


def _pair(key: tuple[tuple[str, ...], tuple[str, ...]]) -> str:
    return f"{', '.join(key[0][:5])} -> {', '.join(key[1][:5])}"
