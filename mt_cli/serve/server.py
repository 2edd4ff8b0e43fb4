"""`mt serve`: listen, load the model, serve until SIGINT or SIGTERM, then finish what is in flight.

The socket is bound before anything loads, so the address is known (and printed) at once, and a
port in use is one line, not a traceback. The model then loads in a thread while /health says
503 (with a folder of models: their languages are read, and each loads when first asked for). On
SIGTERM or SIGINT uvicorn stops accepting connections, lets the requests in flight finish (up to
ServeConfig.shutdown_s), and the decoding threads drain their queues; the exit status is 0.
"""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mt_cli.config import DEVICE, ServeConfig
from mt_cli.decode.translator import Translator
from mt_cli.device import set_threads
from mt_cli.errors import MtError
from mt_cli.serve.catalog import Described, catalog
from mt_cli.serve.models import Entry
from mt_cli.serve.served_languages import Languages
from mt_cli.serve.web_app import create_app, create_server


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets that say they are TCP, and accepted sockets inherit this one's protocol. Without it
    # a response's body, written after its headers, waits for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise MtError(
            f"cannot listen on {host}:{port}: {e.strerror}; pick another serve.port or serve.host"
        ) from None
    # Listening now, not when uvicorn starts: a client that reads the printed URL and connects at
    # once waits in the backlog instead of being refused.
    sock.listen(2048)
    return sock


def serve(
    checkpoints: Sequence[Path],
    cfg: ServeConfig = ServeConfig(),
    device: str = DEVICE,
    **overrides: Any,
) -> None:
    """Serve the checkpoint (several: an ensemble), or with serve.models every model of a folder
    (and the checkpoints given, each a model of its own), until SIGINT or SIGTERM. serve.target_lang
    (a multi-target model's >>xx<< token) and serve.source_lang apply to a server of one model."""
    import uvicorn

    for path in checkpoints:
        if not Path(path).is_file():
            raise MtError(f"{path}: checkpoint not found")
    if not checkpoints and not cfg.models:
        raise MtError("nothing to serve: give a checkpoint, or a folder of models (serve.models)")
    paths = list(checkpoints)
    name = cfg.models or ", ".join(str(p) for p in paths)

    def load(paths: Sequence[Path]) -> Translator:
        set_threads(cfg.threads)  # for every thread: torch's thread count is process-wide
        return Translator.load(list(paths), device, **overrides)  # several: an ensemble

    if cfg.models:
        app = create_server(lambda: _entries(paths, cfg, load), cfg)
    else:
        app = create_app(lambda: load(paths), name, cfg)
    sock = bind(cfg.host, cfg.port)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(cfg.shutdown_s) or 1,
    )
    server = uvicorn.Server(config)
    models = app.state.models
    models.on_error = lambda: setattr(server, "should_exit", True)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"mt serve: listening on http://{shown}:{port}/ (models {name}; loading)", flush=True)
    # uvicorn raises the signal that stopped it again once it has shut down; with these handlers
    # in place that second delivery is a no-op, and the exit status is 0, not death by signal.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    server.run(sockets=[sock])
    if models.error:
        raise MtError(f"{name}: {models.error}")
    print("mt serve: stopped", file=sys.stderr, flush=True)


def _entries(
    paths: list[Path], cfg: ServeConfig, load: Callable[[Sequence[Path]], Translator]
) -> list[Entry]:
    """The models of serve.models and the checkpoints given, each loaded when first needed."""
    entries = []
    for found in catalog(Path(cfg.models), paths):
        cap = cfg.max_memory_mb * 2**20
        if cap and found.size > cap:
            raise MtError(
                f"{found.name}: {found.size / 2**20:.0f} MB, more than serve.max_memory_mb "
                f"{cfg.max_memory_mb} holds alone; raise it"
            )
        entries.append(
            Entry(found.name, _loader(found, load), found.languages, found.beam, found.size)
        )
    return entries


def _loader(
    found: Described, load: Callable[[Sequence[Path]], Translator]
) -> Callable[[], tuple[Translator, Languages]]:
    return lambda: (load(found.paths), found.languages)
