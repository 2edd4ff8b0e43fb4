"""Terminology: a glossary of source terms and the target terms that must render them. A line
whose text holds a source term (case-sensitive, on word boundaries: "Hund" matches in
"Der Hund." but not in "Hunde") must be translated with its target term, which becomes a lexical
constraint of the search (constraints.py). Blank lines and lines starting with "#" are skipped.
"""

from __future__ import annotations

import re


class Glossary:
    def __init__(self, entries: list[tuple[str, str]]) -> None:
        self.entries = entries  # (source term, target term), in file order
        # Word boundaries as \w sees them (Unicode letters, digits, _), so "Hund" is not found in "Hunde".
        self._patterns = [re.compile(rf"(?<!\w){re.escape(src)}(?!\w)") for src, _ in entries]

    def terms_for(self, line: str) -> list[str]:
        """The target terms whose source term occurs in `line`, each once, in glossary order."""
        found: list[str] = []
        for pattern, (_, tgt) in zip(self._patterns, self.entries):
            if tgt not in found and pattern.search(line):
                found.append(tgt)
        return found
