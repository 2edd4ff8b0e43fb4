"""The `mt` app and what its commands share: one-line errors, config options, common option types."""

import functools
import inspect
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from mt_cli import __version__
from mt_cli.errors import MtError

# `mt --help` lists the commands by the stage of the work they belong to.
DATA, TRAIN, DECODE, SERVE, INSPECT, INTEROP = STAGES = ("Data", "Train", "Decode", "Serve", "Inspect", "Interop")

app = typer.Typer(
    help="mt: train, run and score Transformer translation models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
tokenizer_app = typer.Typer(help="SentencePiece tokenizers.", no_args_is_help=True)
app.add_typer(tokenizer_app, name="tokenizer", rich_help_panel=DATA)

F = TypeVar("F", bound=Callable[..., Any])


def _versions(value: bool) -> None:
    if value:
        # Imported here: importlib.metadata costs every other command 20 ms of its start.
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
        bool, typer.Option("--version", callback=_versions, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """mt: train, run and score Transformer translation models."""


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


def config_options(
    section: type, helps: dict[str, str], flags: dict[str, str] | None = None, types: dict[str, type] | None = None
) -> Callable[[F], F]:
    """Give a command one option per field of a config section named in `helps` (`--max-steps`
    for max_steps, typed as the field is unless `types` says otherwise), and hand it those the
    user gave as one dict, `options`. Adding such an option is one line: its help."""
    hints = typing.get_type_hints(section)

    def wrap(fn: F) -> F:
        extra = []
        for name, text in helps.items():
            kind, flag = (types or {}).get(name, hints[name]), (flags or {}).get(name, "--" + name.replace("_", "-"))
            optional = kind is not bool  # a flag (False: not given), else a value (None: not given)
            value: Any = kind | None if optional else kind
            annotation: Any = Annotated[value, typer.Option(flag, help=text)]
            extra.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None if optional else False,
                                           annotation=annotation))  # fmt: skip
        signature, own = inspect.signature(fn), typing.get_type_hints(fn, include_extras=True)
        # The command's own parameters with their annotations resolved (they are strings under
        # `from __future__ import annotations`, and Typer reads this signature as it is).
        kept = [p.replace(annotation=own[p.name]) for p in signature.parameters.values() if p.name != "options"]

        @functools.wraps(fn)
        def command(**given: Any) -> Any:
            values = {name: given.pop(name) for name in helps}
            # `is`, not `in`: 0 == False, and an option given as 0 (--port 0) is given.
            return fn(options={k: v for k, v in values.items() if v is not None and v is not False}, **given)

        command.__signature__ = signature.replace(parameters=kept + extra)  # type: ignore[attr-defined]
        return command  # type: ignore[return-value]

    return wrap


def err(message: str) -> None:
    typer.echo(message, err=True)


ExistingFile = Annotated[Path, typer.Option(help="A UTF-8 text file, one sentence per line.")]
Device = Annotated[str, typer.Option(help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps.")]
