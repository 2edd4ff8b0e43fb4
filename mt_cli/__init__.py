"""mt: a command-line machine-translation toolkit built on the Transformer.

The Python API is the decoding object every mt command uses:

    from mt_cli import Translator
    tr = Translator.load("RUN/best.pt", device="cpu", beam=5)
    tr.translate(["Ein Mann fährt Fahrrad."])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Hypothesis", "Translator", "__version__"]

if TYPE_CHECKING:
    from mt_cli.decode.search import Hypothesis
    from mt_cli.decode.translator import Translator


def __getattr__(name: str) -> Any:
    # Imported on first use, so that `import mt_cli` (and `mt --version`) stay light: no torch yet.
    if name == "Translator":
        from mt_cli.decode.translator import Translator

        return Translator
    if name == "Hypothesis":
        from mt_cli.decode.search import Hypothesis

        return Hypothesis
    raise AttributeError(f"module 'mt_cli' has no attribute {name!r}")
