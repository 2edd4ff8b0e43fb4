"""Where benchmark figures go: RESULTS.md sections and the README tables generated from them.
The standard library (and mt_cli.files) only: a load generator imports this without torch."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

from mt_cli.files import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
README = ROOT / "README.md"


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def append_section(title: str, body: str, measured_commit: str | None = None) -> None:
    """A "## TITLE, DATE, commit C" section with `body` at the end of RESULTS.md, written atomically."""
    when = f"{datetime.date.today()}, commit {measured_commit or commit()}"
    atomic_write_text(RESULTS, RESULTS.read_text(encoding="utf-8") + f"\n## {title}, {when}\n\n{body}")


def copy_newest(title: str, marker: str) -> None:
    """Put the newest "## TITLE, DATE, commit C" section of RESULTS.md between README's `marker`
    markers, as the script wrote it."""
    blocks = RESULTS.read_text(encoding="utf-8").split(f"\n## {title}, ")[1:]
    if not blocks:
        sys.exit(f"{RESULTS}: no {title!r} section recorded yet")
    when, body = blocks[-1].split("\n", 1)
    body = body.split("\n## ", 1)[0]  # up to the next section, if any follows
    replace_section(README, marker, f"Newest run ({when}):\n\n{body.strip()}")


def replace_section(path: Path, name: str, body: str) -> None:
    """Put `body` between the `<!-- NAME:start -->` and `<!-- NAME:end -->` markers of `path`."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text(encoding="utf-8")
    if start not in text or end not in text:
        sys.exit(f"{path}: no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    atomic_write_text(path, f"{head}{start}\n{body.strip()}\n{end}{tail}")
