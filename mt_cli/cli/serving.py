"""Serving: `mt serve`, the translation server."""

from typing import Any

from mt_cli.cli.app import SERVE, Device, app, config_options, friendly
from mt_cli.cli.decoding import Checkpoints
from mt_cli.config import DEVICE, DecodeConfig, ServeConfig


@app.command(rich_help_panel=SERVE)
@friendly
@config_options(ServeConfig, DecodeConfig)
def serve(
    checkpoint: Checkpoints,
    device: Device = DEVICE,
    options: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Serve a checkpoint over HTTP: POST /translate and /score (JSON), GET /health, /metrics, a web
    page at /, and LibreTranslate's API (/translate with q, /languages, /detect, /translate_file).
    Stops on Ctrl-C or SIGTERM, after finishing the requests in flight. The decoding options set
    the server's defaults (the checkpoint's own where absent)."""
    from mt_cli.serve.server import serve as run

    given = options or {}
    run(checkpoint, ServeConfig(**given.get("serve", {})), device, **given.get("decode", {}))
