"""`mt serve`: listen, load the model, serve until SIGINT or SIGTERM, then finish what is in flight.

The socket is bound before anything loads, so the address is known (and printed) at once, and a
port in use is one line, not a traceback. The model then loads in a thread while /health says
503. On SIGTERM or SIGINT uvicorn stops accepting connections, lets the requests in flight finish
(up to ServeConfig.shutdown_s), and the decoding thread drains its queue; the exit status is 0.
"""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mt_cli.config import DEVICE, ServeConfig
from mt_cli.decode.translator import Translator
from mt_cli.device import set_threads
from mt_cli.errors import MtError
from mt_cli.serve.app import create_app


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets that say they are TCP, and accepted sockets inherit this one's protocol. Without it
    # a response's body, written after its headers, waited for the client's delayed ACK: 40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise MtError(f"cannot listen on {host}:{port}: {e.strerror}; pick another serve.port or serve.host") from None
    # Listening now, not when uvicorn starts: a client that reads the printed URL and connects at
    # once waits in the backlog instead of being refused.
    sock.listen(2048)
    return sock


def serve(
    checkpoints: Sequence[Path], cfg: ServeConfig = ServeConfig(), device: str = DEVICE, **overrides: Any
) -> None:
    """Serve the checkpoint (several: an ensemble) until SIGINT or SIGTERM; serve.target_lang (a
    multi-target model's >>xx<< token) and serve.source_lang are applied once it loads (app.py)."""
    import uvicorn

    for path in checkpoints:
        if not Path(path).is_file():
            raise MtError(f"{path}: checkpoint not found")
    paths = list(checkpoints)
    name = ", ".join(str(p) for p in paths)

    def load() -> Translator:
        set_threads(cfg.threads)  # for every thread: torch's thread count is process-wide
        return Translator.load(paths, device, **overrides)  # several: an ensemble

    app = create_app(load, name, cfg)
    sock = bind(cfg.host, cfg.port)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=int(cfg.shutdown_s) or 1
    )
    server = uvicorn.Server(config)
    model = app.state.model
    model.on_error = lambda: setattr(server, "should_exit", True)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"mt serve: listening on http://{shown}:{port}/ (model {name}; loading)", flush=True)
    # uvicorn raises the signal that stopped it again once it has shut down; with these handlers
    # in place that second delivery is a no-op, and the exit status is 0, not death by signal.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    server.run(sockets=[sock])
    if model.error:
        raise MtError(f"{name}: {model.error}")
    print("mt serve: stopped", file=sys.stderr, flush=True)
