"""A request's way to the models that translate it: a model's own part of a route (a Hop), the
model of fewest languages for a pair, and every pair the server's models reach (pivots included).
models.py's `Models.route` chooses among them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mt_cli.serve.api_request import Names
from mt_cli.serve.guard import ApiError
from mt_cli.serve.served_languages import Languages, public_code

if TYPE_CHECKING:  # models.py routes through this module; an entry is only a type here
    from mt_cli.serve.models import Entry


@dataclass(frozen=True)
class Hop:
    """One model's part of a route: the entry and the codes it is told ("": the model's own, for a
    model not told its languages by tokens)."""

    entry: Entry
    source: str | None
    target: str | None
    lang: str = ""  # the source language (the model's code) whose rules split sentences; "" unknown


def own_hop(
    entry: Entry, source: str | None, target: str | None, names: Names, describe: Callable[[], str]
) -> Hop:
    """The one model, a side the request leaves out as the model has it (serve.source_lang and
    target_lang, or its only language); a side it names must be one of the model's."""
    languages = entry.languages
    assert languages is not None  # the one model is loaded before the server is ready
    src = languages.source(source) if source else None
    tgt = languages.target(target) if target else None
    # identified per line by the model's translator
    if source == "auto" and languages.told_source:
        src = "auto"
    field = (
        names.source if source and src is None else names.target if target and tgt is None else None
    )
    if field is not None:
        raise ApiError(
            422,
            f"{field}: {source} -> {target} is not supported: {describe()}",
            field=field,
        )
    lang = (
        src
        if src not in (None, "auto")
        else (languages.sources[0] if len(languages.sources) == 1 else "")
    )
    return Hop(
        entry,
        src if languages.told_source else None,
        tgt if languages.tokens else None,
        lang or "",
    )


def direct_hop(entries: list[Entry], source: str, target: str) -> Hop | None:
    """The model of fewest languages that translates source -> target itself."""
    fitting = []
    for entry in entries:
        languages = entry.languages
        if languages is None or entry.error:
            continue
        src, tgt = languages.source(source), languages.target(target)
        if src is not None and tgt is not None and public_code(src) != public_code(tgt):
            told = (src if languages.told_source else None, tgt if languages.tokens else None)
            fitting.append(
                (len(languages.sources) * len(languages.targets), Hop(entry, *told, src))
            )
    return min(fitting, key=lambda f: f[0])[1] if fitting else None


def reach(entries: list[Entry], pivot: str) -> dict[str, list[str]]:
    """Each source language (as clients send it) and the targets it reaches, through `pivot` too."""
    reach: dict[str, set[str]] = {}
    for entry in entries:
        if entry.languages is None or entry.error:
            continue
        sources = Languages.public(entry.languages.sources)
        targets = Languages.public(entry.languages.targets)
        for s in sources:
            reach.setdefault(s, set()).update(t for t in targets if t != s)
    if pivot and pivot in {t for ts in reach.values() for t in ts}:
        onward = reach.get(pivot, set())
        for s, ts in reach.items():
            if pivot in ts and s != pivot:
                ts.update(t for t in onward if t != s)
    return {s: sorted(ts) for s, ts in sorted(reach.items())}
