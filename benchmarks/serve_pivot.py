"""Pivoting through English on `mt serve --models`: Multi30k de->fr by a de->en and an en->fr model
chained, against a direct de->fr model of the same recipe and minutes.

    python benchmarks/serve_pivot.py --data ../shared/data --minutes 10 --work /tmp/pivot

Three runs of configs/multi30k.yaml's recipe (de->en, en->fr, de->fr; --minutes each, one at a
time; --work keeps finished runs, so a rerun resumes). Then two servers, each in its own process:
`mt serve --models` of a folder holding the de->en and en->fr runs (de->fr goes through en), and
one holding the de->fr run. Each translates test2016.de into French through the JSON API, in
requests of 100 lines (BLEU and chrF against test2016.fr, sacreBLEU; lines per second), and
answers --singles one-line requests one after another (median and p90 time per request). The
servers take turns over --rounds rounds, each keeping its fastest. This process imports no torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import sacrebleu
from multilingual import train
from results import append_section, commit, newest_run, write_table
from serve_client import Server, connect, machine, request

CHUNK = 100  # lines per request for the test set


def models_folder(work: Path, name: str, runs: list[Path]) -> Path:
    """A models folder whose entries are the runs (linked: their compiled steps come along)."""
    folder = work / name
    folder.mkdir(exist_ok=True)
    for run in runs:
        link = folder / run.name
        if not link.exists():
            link.symlink_to(run.resolve(), target_is_directory=True)
    return folder


def translate_all(port: int, lines: list[str]) -> tuple[list[str], float]:
    conn, out = connect(port, timeout=600), []
    start = time.monotonic()
    for i in range(0, len(lines), CHUNK):
        asked = {"text": lines[i : i + CHUNK], "source_lang": "de", "target_lang": "fr"}
        status, _, body = request(port, "POST", "/translate", asked, conn, timeout=600)
        if status != 200:
            raise SystemExit(f"the server answered {status}: {body}")
        out += json.loads(body)["translations"]
    seconds = time.monotonic() - start
    conn.close()
    return out, seconds


def singles(port: int, lines: list[str]) -> list[float]:
    conn, times = connect(port), []
    for line in lines:
        start = time.monotonic()
        status = request(
            port,
            "POST",
            "/translate",
            {"text": [line], "source_lang": "de", "target_lang": "fr"},
            conn,
        )[0]
        if status == 200:
            times.append(time.monotonic() - start)
    conn.close()
    return times


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--minutes", type=float, default=10.0, help="training minutes per model")
    p.add_argument("--work", type=Path, required=True, help="where runs are kept (a rerun resumes)")
    p.add_argument("--singles", type=int, default=200, help="one-line requests timed per server")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    d = args.data / "multi30k"
    args.work.mkdir(parents=True, exist_ok=True)
    measured_commit = commit()
    budget = f"{args.minutes:g}min"
    runs = {
        (s, t): train(args.work, f"single-{s}-{t}-{budget}", [(s, t)], d, args.minutes).parent
        for s, t in (("de", "en"), ("en", "fr"), ("de", "fr"))
    }
    servers = {
        "through en (de->en, en->fr)": models_folder(
            args.work, f"pivot-{budget}", [runs["de", "en"], runs["en", "fr"]]
        ),
        "direct (de->fr)": models_folder(args.work, f"direct-{budget}", [runs["de", "fr"]]),
    }
    src = (d / "test2016.de").read_text(encoding="utf-8").splitlines()
    ref = (d / "test2016.fr").read_text(encoding="utf-8").splitlines()
    best: dict[str, dict] = {}
    for _ in range(args.rounds):
        for name, folder in servers.items():
            server = Server(folder)
            try:
                hyp, seconds = translate_all(server.port, src)
                times = singles(server.port, src[: args.singles])
            finally:
                server.stop()
            found = {
                "hyp": hyp,
                "seconds": seconds,
                "p50": statistics.median(times),
                "p90": statistics.quantiles(times, n=10)[-1],
            }
            print(name, {k: v for k, v in found.items() if k != "hyp"}, flush=True)
            if name not in best or seconds < best[name]["seconds"]:
                best[name] = found
    rows = [
        "| route | BLEU | chrF | test2016 lines/s | one line: median ms | p90 ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in best.items():
        bleu = sacrebleu.corpus_bleu(r["hyp"], [ref]).score
        chrf = sacrebleu.corpus_chrf(r["hyp"], [ref]).score
        rows.append(
            f"| {name} | {bleu:.2f} | {chrf:.2f} | {len(src) / r['seconds']:.1f} | "
            f"{1000 * r['p50']:.0f} | {1000 * r['p90']:.0f} |"
        )
    body = "\n".join(
        [
            f"`benchmarks/serve_pivot.py --minutes {args.minutes:g}`: Multi30k test2016 de->fr "
            "through `mt serve "
            f"--models` (JSON API, requests of {CHUNK} lines; then {args.singles} one-line "
            "requests one after another), "
            f"configs/multi30k.yaml's recipe for each model, {args.minutes:g} training minutes "
            "each, each server in its "
            f"own process, {args.rounds} rounds taking turns, fastest kept; {machine()}.\n",
            *rows,
        ]
    )
    print(body)
    if not args.no_append:
        when = append_section("Pivoting through English", body, measured_commit)
        write_table("pivot-table", newest_run(when, body))


if __name__ == "__main__":
    main()
