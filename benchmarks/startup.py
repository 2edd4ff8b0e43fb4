"""How long `mt translate` takes to start, against `python -c "import torch"`, in fresh processes.

    python benchmarks/startup.py --checkpoint RUN/best.pt

Each measure is a new process, taking turns over --rounds rounds, each keeping its fastest, after
one untimed run of each (bytecode caches written, files cached, as on a user's second run):
`import torch` alone; `mt --version` (the CLI, no torch); `mt translate` of one line (imports,
loading the checkpoint, decoding one sentence); and the same in Python through `Translator`. Also
prints which modules `mt translate`'s process imported from training, plotting or `datasets`
(there should be none). The table is printed and appended to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from quality import append_section  # this folder's results helpers

PROBE = """
import runpy, sys
sys.argv = ["mt", *sys.argv[1:]]
try:
    runpy.run_module("mt_cli", run_name="__main__")
except SystemExit:
    pass
tools = ("translate_files", "line_inputs", "progress")
translating = ("mt_cli.tools", *("mt_cli.tools." + name for name in tools))
heavy = sorted(
    m for m in sys.modules
    if m.startswith(("mt_cli.train", "mt_cli.tools")) and m not in translating
    or m.split(".")[0] in ("datasets", "matplotlib", "transformers")
)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


# As a user's installed environment runs: with bytecode caches. Where PYTHONDONTWRITEBYTECODE is
# set (this workplace sets it), every start would compile the packages that pip left without a
# __pycache__ (typer, mt itself) again, and time that instead.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def seconds(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        cmd, cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    ckpt = str(args.checkpoint.resolve())
    with tempfile.TemporaryDirectory() as tmp:
        line = Path(tmp) / "one.txt"
        line.write_text("Ein Mann fährt Fahrrad.\n", encoding="utf-8")
        py = sys.executable
        api = (
            f"from mt_cli import Translator; Translator.load({ckpt!r}, "
            "'cpu').translate(['Ein Mann fährt Fahrrad.'])"
        )
        commands = {
            'python -c "import torch"': [py, "-c", "import torch"],
            "mt --version": [py, "-m", "mt_cli", "--version"],
            "mt translate (1 line, beam 5)": [
                py,
                "-m",
                "mt_cli",
                "translate",
                "--checkpoint",
                ckpt,
                str(line),
                "--device",
                "cpu",
            ],
            "Translator.load + translate (1 line)": [py, "-c", api],
        }
        best = {name: float("inf") for name in commands}
        for cmd in commands.values():  # untimed: bytecode caches written, files in the page cache
            seconds(cmd, Path(tmp))
        for _ in range(args.rounds):
            for name, cmd in commands.items():
                best[name] = min(best[name], seconds(cmd, Path(tmp)))
        probe = subprocess.run(
            [py, "-c", PROBE, "translate", "--checkpoint", ckpt, str(line), "--device", "cpu"],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=True,
        )
    heavy = next(x for x in probe.stderr.splitlines() if x.startswith("HEAVY:"))[len("HEAVY:") :]
    torch_s = best['python -c "import torch"']
    rows = ["| process | best s | over `import torch` |", "|---|---|---|"]
    rows += [f"| {name} | {s:.2f} | {s - torch_s:+.2f} |" for name, s in best.items()]
    body = "\n".join(rows) + (
        f"\n\nBest of {args.rounds} alternating rounds, each a fresh process; `{args.checkpoint}`. "
        "Modules of "
        f"training, plotting or `datasets` that `mt translate` imported: {heavy or 'none'}. "
        f"`python benchmarks/startup.py {' '.join(sys.argv[1:])}`\n"
    )
    print(body)
    if not args.no_append:
        append_section("Startup", body)


if __name__ == "__main__":
    main()
