"""Serving: `mt serve`, the translation server."""

from typing import Any

from mt_cli.cli.app import SERVE, Device, app, config_options, friendly
from mt_cli.cli.decoding import BatchSize, Beam, Checkpoints, LengthPenalty, Precision, TargetLang
from mt_cli.config import DEVICE, ServeConfig

SERVE_OPTIONS = {
    "host": "Address to listen on; loopback (127.0.0.1) unless told otherwise.",
    "port": "Port to listen on (0: any free one; the URL printed says which).",
    "max_batch_tokens": "Source tokens merged into one decoding batch, across requests.",
    "max_wait_ms": "At most this long a batch waits for other requests to join it.",
    "batch_gap_ms": "A batch starts sooner once no request has come for this long.",
    "max_request_lines": "Lines one request may hold; more is refused with 413.",
    "max_body_bytes": "Bytes one request body may hold; more is refused with 413.",
    "max_queue_lines": "Lines that may wait; past this requests get 503 with Retry-After.",
}


@app.command(rich_help_panel=SERVE)
@friendly
@config_options(ServeConfig, SERVE_OPTIONS)
def serve(
    checkpoint: Checkpoints,
    beam: Beam = None,
    batch_size: BatchSize = None,
    length_penalty: LengthPenalty = None,
    precision: Precision = None,
    target_lang: TargetLang = None,
    device: Device = DEVICE,
    options: dict[str, Any] | None = None,
) -> None:
    """Serve a checkpoint over HTTP: POST /translate and /score (JSON), GET /health, /metrics, and
    a web page at /. Stops on Ctrl-C or SIGTERM, after finishing the requests in flight."""
    from mt_cli.serve.server import serve as run

    decoding = {"beam": beam, "batch_size": batch_size, "length_penalty": length_penalty, "precision": precision}
    run(checkpoint, ServeConfig(**(options or {})), device, target_lang, **decoding)
