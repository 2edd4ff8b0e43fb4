"""A search that steps aside: a Searchable that calls a function before each encoder call and each
decoder step of the model it wraps.

A server decoding a large request and a one-line one on the same cores has them share the CPU,
so the one line runs at half speed or less behind the large one. With this wrapper the large
search calls a function of the server's before each step, which waits while an urgent search
runs: the one line then has the cores to itself, after at most one step of the large search.
The function is the only thing added; the model, its cache and its results are untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from mt_cli.decode.hypothesis import Searchable


class Yielding:
    """`model`, calling `before()` ahead of each encode and decode."""

    def __init__(self, model: Searchable, before: Callable[[], None]) -> None:
        self.model, self.before = model, before

    def encode(self, src: Tensor, src_mask: Tensor) -> Any:
        self.before()
        return self.model.encode(src, src_mask)

    def decode(
        self,
        tgt: Tensor,
        memory: Any,
        src_mask: Tensor | None,
        cache: Any = None,
        vocab: Tensor | None = None,
    ) -> tuple[Tensor, Any]:
        self.before()
        return self.model.decode(tgt, memory, src_mask, cache, vocab)

    # cfg, start_token, training, parameters(), eval(), ...
    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)
