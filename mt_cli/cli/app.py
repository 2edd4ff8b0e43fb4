"""The `mt` app and what its commands share: one-line errors, config options, common option types."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from mt_cli import __version__
from mt_cli.errors import MtError

# `mt --help` lists the commands by the stage of the work they belong to.
DATA, TRAIN, DECODE, INSPECT, INTEROP = STAGES = ("Data", "Train", "Decode", "Inspect", "Interop")

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


def config_options(section: type, given: dict[str, Any]) -> dict[str, Any]:
    """The options of a command that are named after fields of a config section and were given:
    the command's parameters are the fields, so an option is added in one place, its signature."""
    return {f.name: given[f.name] for f in dataclasses.fields(section) if given.get(f.name) not in (None, False)}


def err(message: str) -> None:
    typer.echo(message, err=True)


ExistingFile = Annotated[Path, typer.Option(help="A UTF-8 text file, one sentence per line.")]
Device = Annotated[str, typer.Option(help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps.")]
