"""Language identification for POST /detect and source "auto": lingua, restricted to the languages
the model reads.

lingua (lingua-language-detector, in the serve extra) ships its models in its wheel (96 MB; 100 MB
installed); importing it takes milliseconds, and each language's models load on first use: 0.5 s
and a 230 MB process for two languages, 9 s and 950 MB for all 75 (benchmarks/detect_cost.py).
So the detector is built on the first request, from the model's source languages only. With
several it ranks them. With one, there is nothing to choose, but lingua still tells whether the
text can be that language at all (a Cyrillic text is not German): the answer is that language,
with confidence 100 when it can be and 0 when it cannot.
"""

from __future__ import annotations

import threading
from typing import Any

from mt_cli.data.languages import short_code
from mt_cli.serve.guard import ApiError
from mt_cli.serve.languages import Languages

Detection = dict[str, Any]  # {"confidence": 0-100, "language": code}


class Detector:
    def __init__(self, languages: Languages) -> None:
        self.sources = languages.sources
        self._lingua: Any = None  # built on first use; None after it when lingua knows none of them
        self._built = False
        self._codes: dict[Any, str] = {}  # lingua's Language -> the model's code
        self._lock = threading.Lock()

    def detect(self, texts: list[str]) -> list[Detection]:
        """The model's source languages that the texts may be in, most likely first (at most 3),
        each language's confidence averaged over the texts; the first source with confidence 0
        when none fits."""
        if not self.sources:
            raise ApiError(400, "cannot detect: the model records no source language; start mt serve with "
                                "--source-lang")  # fmt: skip
        detector = self._detector()
        if detector is None:  # lingua knows none of the model's languages: nothing to check against
            return [{"confidence": 100.0, "language": self.sources[0]}]
        totals: dict[str, float] = {}
        for text in texts:
            for value in detector.compute_language_confidence_values(text):
                code = self._codes[value.language]
                totals[code] = totals.get(code, 0.0) + value.value / max(len(texts), 1)
        ranked = sorted(totals.items(), key=lambda kv: -kv[1])
        if len(self._codes) == 1:  # one language: lingua said whether the text can be it
            ranked = [(ranked[0][0], 1.0 if ranked[0][1] > 0 else 0.0)]
        found = [{"confidence": round(100 * v, 1), "language": c} for c, v in ranked[:3] if v > 0]
        return found or [{"confidence": 0.0, "language": self.sources[0]}]

    def _detector(self) -> Any:
        with self._lock:
            if not self._built:
                self._lingua, self._built = self._build(), True
            return self._lingua

    def _build(self) -> Any:
        try:
            from lingua import IsoCode639_1, Language, LanguageDetectorBuilder
        except ImportError:
            raise ApiError(500, "language detection needs lingua-language-detector: pip install "
                                "'mt-cli[serve]'") from None  # fmt: skip
        for code in self.sources:
            short = short_code(code)  # de_AT -> de, deu_Latn -> de
            iso = getattr(IsoCode639_1, short.upper(), None) if len(short) == 2 else None
            if iso is not None:
                self._codes.setdefault(Language.from_iso_code_639_1(iso), code)
        return None if not self._codes else LanguageDetectorBuilder.from_languages(*self._codes).build()
