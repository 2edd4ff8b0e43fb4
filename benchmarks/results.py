"""Where benchmark figures go: RESULTS.md sections, and the tables of the user guide's docs/ pages
generated from them (each between `<!-- NAME:start -->` and `<!-- NAME:end -->` markers in the page
that `PAGES` names). The standard library (and mt_cli.files) only: a load generator imports this
without torch."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

from mt_cli.files import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
DOCS = ROOT / "docs"
# Each generated table: its marker name -> the docs page that holds it.
PAGES = {
    "quality-table": DOCS / "quality.md",  # benchmarks/quality.py
    "speed-table": DOCS / "speed.md",  # benchmarks/speed.py
    "levers-table": DOCS / "speed.md",  # benchmarks/levers.py --append
    "opus-speed-table": DOCS / "speed.md",  # benchmarks/opus_speed.py
    "m2m-speed-table": DOCS / "pretrained.md",  # benchmarks/m2m_speed.py
    "multilingual-table": DOCS / "training.md",  # benchmarks/multilingual.py
    "shortlist-table": DOCS / "speed.md",  # benchmarks/shortlist.py
    "serve-table": DOCS / "serving.md",  # benchmarks/serve_load.py
    "neighbour-table": DOCS / "serving.md",  # benchmarks/serve_neighbour.py
    "pivot-table": DOCS / "serving.md",  # benchmarks/serve_pivot.py
    "models-table": DOCS / "serving.md",  # benchmarks/serve_models.py
    "cache-table": DOCS / "serving.md",  # benchmarks/serve_cache.py
    "data-scale": DOCS / "training.md",  # benchmarks/data_scale.py --docs
    "documents-table": DOCS / "documents.md",  # benchmarks/documents.py
    "protect-table": DOCS / "documents.md",  # benchmarks/protect.py
    "office-table": DOCS / "documents.md",  # benchmarks/office.py
    "clean-table": DOCS / "pipeline.md",  # benchmarks/distill.py clean
    "distill-de-en-table": DOCS / "pipeline.md",  # benchmarks/distill.py distill
    "distill-en-de-table": DOCS / "pipeline.md",  # benchmarks/distill.py distill --direction en-de
}


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def append_section(title: str, body: str, measured_commit: str | None = None) -> str:
    """A "## TITLE, DATE, commit C" section with `body` at the end of RESULTS.md, written
    atomically; returns its "DATE, commit C". `measured_commit`: the commit read before the run (the
    tree may change while it runs)."""
    when = f"{datetime.date.today()}, commit {measured_commit or commit()}"
    body = body if body.endswith("\n") else body + "\n"
    atomic_write_text(
        RESULTS, RESULTS.read_text(encoding="utf-8") + f"\n## {title}, {when}\n\n{body}"
    )
    return when


def newest_run(when: str, body: str) -> str:
    """A RESULTS.md run as a docs page shows it: its date and body. The commit stays in RESULTS.md
    (the user guide names no commits)."""
    return (
        f"Newest run ({when.split(', commit ')[0]}; every run: "
        f"`benchmarks/RESULTS.md`):\n\n{body.strip()}"
    )


def write_table(marker: str, body: str) -> None:
    """Put `body` between the `marker` markers of the docs page that holds that table."""
    replace_section(PAGES[marker], marker, body)


def copy_newest(title: str, marker: str) -> None:
    """Put the newest "## TITLE, DATE, commit C" section of RESULTS.md between the `marker` markers
    of its docs page, as the script wrote it."""
    blocks = RESULTS.read_text(encoding="utf-8").split(f"\n## {title}, ")[1:]
    if not blocks:
        sys.exit(f"{RESULTS}: no {title!r} section recorded yet")
    when, body = blocks[-1].split("\n", 1)
    body = body.split("\n## ", 1)[0]  # up to the next section, if any follows
    write_table(marker, newest_run(when, body))


def replace_section(path: Path, name: str, body: str) -> None:
    """Put `body` between the `<!-- NAME:start -->` and `<!-- NAME:end -->` markers of `path`."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text(encoding="utf-8")
    if start not in text or end not in text:
        sys.exit(f"{path}: no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    atomic_write_text(path, f"{head}{start}\n{body.strip()}\n{end}{tail}")
