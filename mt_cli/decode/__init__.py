"""Decoding: search over the model's `encode`/`decode` and cache, and the `Translator` every caller
uses.

Nothing here imports from `mt_cli.train`.
"""
