"""Serving: `mt serve`, the translation server."""

from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.app import NOTHING_GIVEN, SERVE, Device, Given, app, config_options, friendly
from mt_cli.config import DEVICE, DecodeConfig, ServeConfig

Served = Annotated[
    list[Path],
    typer.Option(
        "--checkpoint",
        help=(
            "A checkpoint written by `mt train` (best.pt); repeat for an ensemble (with "
            "--models: another model)."
        ),
        readable=False,
    ),
]


@app.command(rich_help_panel=SERVE)
@friendly
@config_options(ServeConfig, DecodeConfig)
def serve(
    checkpoint: Served = [],  # noqa: B006 - typer reads the default, never mutates it
    device: Device = DEVICE,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Serve a checkpoint, or a folder of models (--models), over HTTP: POST /translate and /score
    (JSON), GET /health, /metrics, a web page at /, LibreTranslate's API (/translate with q,
    /languages, /detect, /translate_file) and DeepL's (/v2/translate, /v2/languages, /v2/usage).
    Stops on Ctrl-C or SIGTERM, after finishing the requests in flight. The decoding options set
    the server's defaults (the checkpoint's own where absent)."""
    from mt_cli.serve.server import serve as run

    run(checkpoint, options.build(ServeConfig), device, **options.of(DecodeConfig))
