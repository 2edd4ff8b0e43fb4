"""Many models on one `mt serve --models`: the server's memory, and one model's single-line time,
as more models load and decode beside it.

    python benchmarks/serve_models.py --models /tmp/pivot/all-10min --data ../shared/data/multi30k

--models is a folder of models for different pairs (serve_pivot.py's runs, linked into one folder,
serve three: de->en, en->fr, de->fr). The server starts with none loaded. The first model loads
(one request); then --singles one-line requests to it, one after another (median and p90); its
resident memory. Then each further model loads and translates --lines lines (so that it has
decoded a batch), and the first model's single lines are timed again. Test sentences come from
--data's test2016.<source language>.

--against REV also runs the server as the code was at commit REV (a git worktree of it, put first
on the server's PYTHONPATH), the two taking turns over --rounds rounds, each keeping its fastest.
This process imports no torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from results import ROOT, append_section, commit, copy_newest
from serve_client import Server, connect, machine, request

TITLE = "Many models on one server"


def singles(port: int, lines: list[str], pair: tuple[str, str]) -> list[float]:
    conn, times = connect(port), []
    for line in lines:
        start = time.monotonic()
        asked = {"text": [line], "source_lang": pair[0], "target_lang": pair[1]}
        if request(port, "POST", "/translate", asked, conn, timeout=600)[0] == 200:
            times.append(time.monotonic() - start)
    conn.close()
    return times


def translate(port: int, lines: list[str], pair: tuple[str, str]) -> None:
    status, _, body = request(
        port,
        "POST",
        "/translate",
        {"text": lines, "source_lang": pair[0], "target_lang": pair[1]},
        timeout=600,
    )
    if status != 200:
        raise SystemExit(f"the server answered {status}: {body}")


def measure(
    folder: Path, data: Path, singles_n: int, lines_n: int, env: dict[str, str]
) -> list[dict]:
    """One server: a row per number of models loaded."""
    Server.env = env
    server = Server(folder)
    try:
        models = request(server.port, "GET", "/health")[2]
        pairs = [(m["source"][0], m["target"][0]) for m in json.loads(models)["models"]]
        text = {
            lang: (data / f"test2016.{lang}").read_text(encoding="utf-8").splitlines()
            for lang, _ in pairs
        }
        first = pairs[0]
        rows = []
        for k, pair in enumerate(pairs):
            # loads it
            translate(server.port, text[pair[0]][:lines_n] if k else text[pair[0]][:1], pair)
            times = singles(server.port, text[first[0]][:singles_n], first)
            rows.append(
                {
                    "loaded": k + 1,
                    "pair": pair,
                    "rss": server.rss_mb(),
                    "p50": statistics.median(times),
                    "p90": statistics.quantiles(times, n=10)[-1],
                }
            )
            print(env.get("PYTHONPATH", "this tree"), rows[-1], flush=True)
        return rows
    finally:
        server.stop()
        Server.env = {}


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", type=Path, required=True)
    p.add_argument("--data", type=Path, default=Path("../shared/data/multi30k"))
    p.add_argument(
        "--singles", type=int, default=100, help="one-line requests timed after each load"
    )
    p.add_argument(
        "--lines", type=int, default=200, help="lines each further model translates as it loads"
    )
    p.add_argument("--against", help="a commit whose server runs too, for comparison")
    p.add_argument("--name", default="this tree", help="what the table calls this tree's server")
    p.add_argument("--against-name", help="what it calls --against's (default: commit REV)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    measured_commit = commit()
    with tempfile.TemporaryDirectory() as tmp:
        servers: dict[str, dict[str, str]] = {args.name: {}}
        if args.against:
            tree = Path(tmp) / "against"
            subprocess.run(
                ["git", "worktree", "add", "--detach", "-q", str(tree), args.against],
                cwd=ROOT,
                check=True,
            )
            servers[args.against_name or f"commit {args.against}"] = {"PYTHONPATH": str(tree)}
        try:
            best: dict[str, list[dict]] = {}
            for _ in range(args.rounds):
                for name, env in servers.items():
                    rows = measure(args.models, args.data, args.singles, args.lines, env)
                    kept = best.setdefault(name, rows)
                    for i, row in enumerate(rows):
                        if row["p50"] < kept[i]["p50"]:
                            kept[i] = row
        finally:
            if args.against:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False
                )
    out = [
        "| server | models loaded (the last) | resident MB | first model's one line: median ms | "
        "p90 ms |",
        "|---|---|---|---|---|",
    ]
    for name, rows in best.items():
        for r in rows:
            out.append(
                f"| {name} | {r['loaded']} ({r['pair'][0]}->{r['pair'][1]}) | {r['rss']:.0f} "
                f"| {1000 * r['p50']:.0f} | {1000 * r['p90']:.0f} |"
            )
    body = "\n".join(
        [
            "`benchmarks/serve_models.py --models "
            f"{args.models.name}{' --against ' + args.against if args.against else ''}"
            f"`: `mt serve --models` of {len(rows)} models "
            f"(started with none loaded; each further model loaded by a request of {args.lines} "
            "lines), then "
            f"{args.singles} one-line requests to the first model, one after another; each server "
            "in its own "
            f"process, {args.rounds} rounds taking turns, fastest kept; {machine()}.\n",
            *out,
        ]
    )
    print(body)
    if not args.no_append:
        append_section(TITLE, body, measured_commit)
        copy_newest(TITLE, "models-table")


if __name__ == "__main__":
    main()
