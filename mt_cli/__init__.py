"""mt: a command-line machine-translation toolkit built on the Transformer."""

__version__ = "0.1.0"
