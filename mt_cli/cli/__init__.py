"""The `mt` command: one thin Typer command per verb, each calling one library function, in one
module per stage of the work (data, training, decoding, serving, inspection and interop)."""

# Each module registers its commands on import.
from mt_cli.cli import data, decoding, inspection, pipeline, serving, training  # noqa: F401
from mt_cli.cli.app import STAGES, app

# `mt --help` lists the panels in the order their first command was registered: the stages' order.
app.registered_commands.sort(key=lambda command: STAGES.index(command.rich_help_panel))

__all__ = ["app", "main"]


def main() -> None:
    app(prog_name="mt")
