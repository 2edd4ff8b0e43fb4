"""The `mt` app and what its commands share: one-line errors, config options, common option
types."""

import dataclasses
import functools
import inspect
import logging
import re
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from mt_cli import __version__
from mt_cli.errors import MtError

# `mt --help` lists the commands by the stage of the work they belong to.
DATA, TRAIN, DECODE, SERVE, INSPECT, INTEROP = STAGES = (
    "Data",
    "Train",
    "Decode",
    "Serve",
    "Inspect",
    "Interop",
)

app = typer.Typer(
    help="mt: train, run and score Transformer translation models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
tokenizer_app = typer.Typer(help="SentencePiece tokenizers.", no_args_is_help=True)
app.add_typer(tokenizer_app, name="tokenizer", rich_help_panel=DATA)

F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S")


def _versions(value: bool) -> None:
    if value:
        # Imported here: importlib.metadata would slow every other command's start.
        from importlib.metadata import PackageNotFoundError, version

        try:
            torch_version = version("torch")
        except PackageNotFoundError:
            torch_version = "not installed"
        typer.echo(f"mt {__version__} (torch {torch_version}, Python {sys.version.split()[0]})")
        raise typer.Exit()


@app.callback()
def main_options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_versions, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """mt: train, run and score Transformer translation models."""
    # The library says what long work it starts (a compile, say) through `logging`; a command shows
    # it on stderr.
    library = logging.getLogger("mt_cli")
    if not any(isinstance(h, _Say) for h in library.handlers):
        library.addHandler(_Say())
    library.setLevel(logging.INFO)
    library.propagate = False


class _Say(logging.Handler):
    """The library's log lines as `mt: ...` on stderr (whatever sys.stderr is at the time)."""

    def emit(self, record: logging.LogRecord) -> None:
        typer.echo(f"mt: {record.getMessage()}", err=True)


def friendly(fn: F) -> F:
    """Turn the library's MtError into one line on stderr and exit code 1, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MtError as e:
            typer.echo(f"mt: error: {e}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("mt: interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class Given:
    """The config fields a command's user gave as options, by section: only those given, so each
    goes over the config's own default (or the checkpoint's, or a config file's)."""

    fields: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    def of(self, section: type) -> dict[str, Any]:
        """The fields given of one section, by name."""
        return dict(self.fields.get(_section(section), {}))

    def build(self, section: type[S]) -> S:
        """The section with the given fields over its defaults (checked as it is built)."""
        return section(**self.of(section))


NOTHING_GIVEN = Given()


def config_options(
    *sections: type,
    only: tuple[str, ...] = (),
    flags: dict[str, str] | None = None,
    types: dict[str, type] | None = None,
) -> Callable[[F], F]:
    """Give a command one option per field of each config section that is marked `cli` (or per field
    named in `only`), with the field's help, typed as the field is (a tuple as comma-separated
    values, a bool as --x/--no-x) unless `types` says otherwise, flagged `--max-steps` for max_steps
    unless the field or `flags` names another. The command gets those the user gave as
    `options`, a `Given` (`options.build(TrainConfig)`). A library error naming one of these fields
    (`train.max_steps`) is printed with its flag (`--max-steps`). Adding an option is adding a
    field."""
    fields = _option_fields(sections, only)
    flag_of = {
        f.name: (flags or {}).get(f.name) or f.metadata["flag"] or "--" + f.name.replace("_", "-")
        for _, f in fields
    }

    def wrap(fn: F) -> F:
        extra = [
            _option_parameter(f, flag_of[f.name], (types or {}).get(f.name)) for _, f in fields
        ]
        kept = _own_parameters(fn, {f.name for _, f in fields})

        @functools.wraps(fn)
        def command(**given: Any) -> Any:
            options: dict[str, dict[str, Any]] = {_section(cls): {} for cls in sections}
            for cls, f in fields:
                value = given.pop(f.name)
                if value is not None:  # `is not`: an option given as 0 (--port 0) is given
                    options[_section(cls)][f.name] = (
                        _parse_tuple(value, f.type) if isinstance(value, str) else value
                    )
            try:
                return fn(options=Given(options), **given)
            except MtError as e:
                raise MtError(_with_flags(str(e), sections, flag_of)) from None

        shown = inspect.signature(fn).replace(parameters=kept + extra)
        command.__signature__ = shown  # type: ignore[attr-defined]
        return command  # type: ignore[return-value]

    return wrap


def _option_fields(
    sections: tuple[type, ...], only: tuple[str, ...]
) -> list[tuple[type, dataclasses.Field]]:
    """(section, field) of each option: the fields marked `cli`, or those named in `only`."""
    fields = [
        (cls, f)
        for cls in sections
        for f in dataclasses.fields(cls)
        if (f.name in only if only else f.metadata["cli"])
    ]
    names = [f.name for _, f in fields]
    if len(set(names)) != len(names):
        # a programming error, caught by tests
        raise AssertionError(f"two sections give the same option: {names}")
    return fields


def _own_parameters(fn: Callable[..., Any], options: set[str]) -> list[inspect.Parameter]:
    """The command's own parameters with their annotations resolved (they are strings under
    `from __future__ import annotations`, and Typer reads this signature as it is)."""
    own = typing.get_type_hints(fn, include_extras=True)
    kept = [
        p.replace(annotation=own[p.name])
        for p in inspect.signature(fn).parameters.values()
        if p.name != "options"
    ]
    clash = {p.name for p in kept} & options
    if clash:
        raise AssertionError(f"{fn.__name__}: parameters named like config fields: {sorted(clash)}")
    return kept


def _section(cls: type) -> str:
    # Every config section names itself; mypy sees only a type.
    return str(getattr(cls, "section"))  # noqa: B009


def _option_parameter(f: dataclasses.Field, flag: str, kind: type | None) -> inspect.Parameter:
    """The Typer parameter for one config field: None when not given, so the config's own default
    (or the checkpoint's) stands."""
    hint = kind or _FIELD_TYPES.get(str(f.type)) or str
    if hint is bool and "/" not in flag:
        flag = f"{flag}/--no-{flag[2:]}"
    annotation: Any = Annotated[
        hint | None, typer.Option(flag, help=f.metadata["help"], show_default=False)
    ]
    return inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
    )


# A field's annotation (a string under `from __future__ import annotations`) -> the option's type;
# tuples travel as comma-separated text.
_FIELD_TYPES: dict[str, type] = {
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "float | None": float,
}


def _parse_tuple(value: str, annotation: Any) -> Any:
    """`1,4,5` for a tuple[int, ...] field; any other string as it is."""
    kind = {"tuple[int, ...]": int, "tuple[float, ...]": float}.get(str(annotation))
    if kind is None:
        return value
    try:
        return tuple(kind(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise MtError(f"{value!r}: expected comma-separated numbers") from None


def _with_flags(message: str, sections: tuple[type, ...], flag_of: dict[str, str]) -> str:
    """`decode.beam` -> `--beam` in an error, for the fields this command takes as options: the
    user's remedy is the flag."""
    for cls in sections:
        for name, flag in flag_of.items():
            message = re.sub(rf"\b{_section(cls)}\.{name}\b", flag.split("/")[0], message)
    return message


def err(message: str) -> None:
    typer.echo(message, err=True)


ExistingFile = Annotated[Path, typer.Option(help="A UTF-8 text file, one sentence per line.")]
Device = Annotated[
    str, typer.Option(help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps.")
]
