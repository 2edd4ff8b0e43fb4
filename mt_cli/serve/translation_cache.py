"""The translation cache (serve.cache_size): an exact repeat of a text, for the same model(s),
languages and options, is answered from memory instead of decoded again. Least recently used
first out; hits and misses are counted in /metrics. It holds translations, never logs them, and is
the only thing the server keeps between requests."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from prometheus_client import Counter


class Cache:
    def __init__(self, size: int, hits: Counter, misses: Counter) -> None:
        self.size, self.hits, self.misses = size, hits, misses
        self._found: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            found = self._found.get(key)
            if found is None:
                self.misses.inc()
                return None
            self._found.move_to_end(key)
            self.hits.inc()
            return found

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._found[key] = value
            self._found.move_to_end(key)
            while len(self._found) > self.size:
                self._found.popitem(last=False)
