"""What language identification (mt serve's /detect and source "auto") costs: lingua's import,
building its detector with its first call, a next call, and peak memory, for the two languages of
a de-en model and for all of lingua's, each in a fresh process (the server builds it on its first
request, from the model's source languages only).

    python benchmarks/detect_cost.py

Printed, and appended to RESULTS.md.
"""

from __future__ import annotations

import json
import subprocess
import sys

from results import append_section
from speed import machine

WORKER = """
import json, resource, sys, time
t = time.perf_counter()
from lingua import IsoCode639_1, LanguageDetectorBuilder
imported = time.perf_counter() - t
codes = sys.argv[1:]
t = time.perf_counter()
if codes:
    isos = [getattr(IsoCode639_1, c.upper()) for c in codes]
    builder = LanguageDetectorBuilder.from_iso_codes_639_1(*isos)
else:
    builder = LanguageDetectorBuilder.from_all_languages()
detector = builder.build()
detector.compute_language_confidence_values("Der Mann sieht ein rotes Haus.")
first = time.perf_counter() - t
t = time.perf_counter()
detector.compute_language_confidence_values("Ein Hund läuft über eine Wiese.")
print(json.dumps({"import": imported, "first": first, "next": time.perf_counter() - t,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    # lingua itself is imported only in the measuring processes
    from importlib.metadata import (
        version,
    )

    rows = [
        "| languages | import | detector built + first call | next call | peak memory |",
        "|---|---|---|---|---|",
    ]
    for codes in (["de", "en"], []):
        done = subprocess.run(
            [sys.executable, "-c", WORKER, *codes], check=True, capture_output=True, text=True
        )
        r = json.loads(done.stdout)
        rows.append(
            f"| {', '.join(codes) or 'all (75)'} | {r['import'] * 1000:.0f} ms | {r['first']:.2f} "
            "s | "
            f"{r['next'] * 1000:.1f} ms | {r['rss']:.0f} MB |"
        )
        print(rows[-1], flush=True)
    body = "\n".join(rows) + (
        f"\n\nlingua-language-detector {version('lingua-language-detector')}; {machine()}. "
        "`python benchmarks/detect_cost.py`\n"
    )
    append_section("Language identification cost", body)


if __name__ == "__main__":
    main()
