"""POST /detect and LibreTranslate's source "auto": the model's source languages ranked by
data/language_id.py (lingua, restricted to them).

With several source languages it ranks them. With one, there is nothing to choose, but lingua
still tells whether the text can be that language at all (a Cyrillic text is not German): the
answer is that language, with confidence 100 when it can be and 0 when it cannot.
"""

from __future__ import annotations

from typing import Any

from mt_cli.data.language_id import LanguageIdentifier
from mt_cli.errors import MtError
from mt_cli.serve.guard import ApiError
from mt_cli.serve.served_languages import Languages

Detection = dict[str, Any]  # {"confidence": 0-100, "language": code}


class Detector:
    def __init__(self, languages: Languages) -> None:
        self.sources = languages.sources
        self.identifier = LanguageIdentifier(self.sources)

    def detect(self, texts: list[str]) -> list[Detection]:
        """The model's source languages that the texts may be in, most likely first (at most 3),
        each language's confidence averaged over the texts; the first source with confidence 0
        when none fits."""
        if not self.sources:
            raise ApiError(
                400,
                "cannot detect: the model records no source language; name it in serve.source_lang",
            )
        try:
            known = self.identifier.known()
        except MtError as e:  # lingua is not installed
            raise ApiError(500, str(e)) from None
        if not known:  # lingua knows none of the model's languages: nothing to check against
            return [{"confidence": 100.0, "language": self.sources[0]}]
        totals: dict[str, float] = {}
        for text in texts:
            for code, value in self.identifier.confidences(text).items():
                totals[code] = totals.get(code, 0.0) + value / max(len(texts), 1)
        ranked = sorted(totals.items(), key=lambda kv: -kv[1])
        if len(known) == 1:  # one language: lingua said whether the text can be it
            ranked = [(ranked[0][0], 1.0 if ranked[0][1] > 0 else 0.0)]
        found = [{"confidence": round(100 * v, 1), "language": c} for c, v in ranked[:3] if v > 0]
        return found or [{"confidence": 0.0, "language": self.sources[0]}]
