"""Language identification: which of a model's source languages a text is in (`--source-lang auto`,
the server's "auto" and POST /detect).

lingua (lingua-language-detector) does it. It ships its models inside its wheel (96 MB; nothing is
downloaded, so it runs offline), is accurate on the short texts translation sees (single
sentences), and can be restricted to a list of languages, here the model's. fasttext's language
ID (lid.176) covers more languages, but its packages fetch the model at first use or bundle only
the compressed one, and need numpy pinned. lingua knows 75 languages: a model language it does not
know (most of NLLB's 200) is never detected, and a text in it goes to the nearest one it knows.

Each language's models load on first use: 0.5 s and a 230 MB process for two languages, 9 s and
950 MB for all 75 (benchmarks/detect_cost.py), so the detector is built once, on first use, from
the model's source languages only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from mt_cli.data.languages import short_code
from mt_cli.errors import MtError


class LanguageIdentifier:
    """lingua restricted to `codes` (the model's: de, deu_Latn, pt_BR), built on first use."""

    def __init__(self, codes: Sequence[str]) -> None:
        self.codes = list(codes)
        self._lingua: Any = None  # None after building when lingua knows none of the codes
        self._built = False
        self._known: dict[Any, str] = {}  # lingua's Language -> the model's code
        self._lock = threading.Lock()

    def confidences(self, text: str) -> dict[str, float]:
        """Each code's confidence (0-1) that `text` is in it; {} when lingua knows none of the
        codes."""
        detector = self.detector()
        if detector is None:
            return {}
        return {
            self._known[v.language]: v.value
            for v in detector.compute_language_confidence_values(text)
        }

    def best(self, texts: Sequence[str]) -> list[str]:
        """The most likely code for each text: where lingua cannot tell (no letters, or a language
        it does not know), the one most texts of the batch got, else the first code."""
        ranked = [
            max(c.items(), key=lambda kv: kv[1]) if (c := self.confidences(t)) else None
            for t in texts
        ]
        found = [r[0] for r in ranked if r is not None and r[1] > 0]
        fallback = max(set(found), key=found.count) if found else self.codes[0]
        return [r[0] if r is not None and r[1] > 0 else fallback for r in ranked]

    def known(self) -> list[str]:
        """The codes lingua knows (it is built here if it was not)."""
        self.detector()
        return list(self._known.values())

    def detector(self) -> Any:
        with self._lock:
            if not self._built:
                self._lingua, self._built = self._build(), True
            return self._lingua

    def _build(self) -> Any:
        try:
            from lingua import IsoCode639_1, Language, LanguageDetectorBuilder
        except ImportError:
            raise MtError(
                "identifying languages needs lingua-language-detector: pip install 'mt-cli[serve]'"
            ) from None
        for code in self.codes:
            short = short_code(code)  # de_AT -> de, deu_Latn -> de
            iso = getattr(IsoCode639_1, short.upper(), None) if len(short) == 2 else None
            if iso is not None:
                self._known.setdefault(Language.from_iso_code_639_1(iso), code)
        return (
            None
            if not self._known
            else LanguageDetectorBuilder.from_languages(*self._known).build()
        )
