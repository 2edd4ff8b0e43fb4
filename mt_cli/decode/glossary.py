"""Terminology: a glossary of source terms and the target terms that must render them. A line
whose text holds a source term (case-sensitive, on word boundaries: "Hund" matches in
"Der Hund." but not in "Hunde") must be translated with its target term, which becomes a lexical
constraint of the search (constraints.py). Blank lines and lines starting with "#" are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

from mt_cli.errors import MtError
from mt_cli.files import check_readable


class Glossary:
    def __init__(self, entries: list[tuple[str, str]]) -> None:
        self.entries = entries  # (source term, target term), in file order
        # Word boundaries as \w sees them (Unicode letters, digits, _), so "Hund" is not found in
        # "Hunde".
        self._patterns = [re.compile(rf"(?<!\w){re.escape(src)}(?!\w)") for src, _ in entries]

    def terms_for(self, line: str) -> list[str]:
        """The target terms whose source term occurs in `line`, each once, in glossary order."""
        found: list[str] = []
        for pattern, (_, tgt) in zip(self._patterns, self.entries):
            if tgt not in found and pattern.search(line):
                found.append(tgt)
        return found


def load_glossary(path: Path) -> Glossary:
    """Read a glossary TSV (blank lines and lines starting with "#" are skipped); a malformed line
    is one error naming the file, the line and the fix."""
    check_readable(path, "glossary file")
    entries = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise MtError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip("\r")
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            got = "no tab" if len(fields) == 1 else f"{len(fields) - 1} tabs"
            raise MtError(
                f"{path}:{n}: {got}; write one entry per line as `source term<TAB>target term`"
            )
        src, tgt = (f.strip() for f in fields)
        if not src or not tgt:
            raise MtError(
                f"{path}:{n}: empty {'source' if not src else 'target'} term; give both sides"
            )
        entries.append((src, tgt))
    return Glossary(entries)
