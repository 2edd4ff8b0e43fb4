"""Serving: `mt serve`, the translation server."""

from typing import Any

from mt_cli.cli.app import SERVE, Device, app, config_options, friendly
from mt_cli.cli.decoding import Checkpoints, TargetLang
from mt_cli.config import DEVICE, DecodeConfig, ServeConfig


@app.command(rich_help_panel=SERVE)
@friendly
@config_options(ServeConfig, DecodeConfig)
def serve(
    checkpoint: Checkpoints,
    target_lang: TargetLang = None,
    device: Device = DEVICE,
    options: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Serve a checkpoint over HTTP: POST /translate and /score (JSON), GET /health, /metrics, and
    a web page at /. Stops on Ctrl-C or SIGTERM, after finishing the requests in flight. The
    decoding options set the server's defaults (the checkpoint's own where absent)."""
    from mt_cli.serve.server import serve as run

    given = options or {}
    run(checkpoint, ServeConfig(**given.get("serve", {})), device, target_lang, **given.get("decode", {}))
