"""A running batch against whole batches, without a server: what the engine gives C clients that
each keep one line in flight.

    python benchmarks/running_batch.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

- Whole batches: `Translator.translate` on the lines in arrival-order chunks of C lines, one call
  each (a server that forms a batch of its C clients' lines and answers them when it ends).
- Running: C lines join a running batch (decode/running_batch.py); as each ends, the next line
  joins at the next step (C clients, each sending its next line as soon as it has its answer).
- All: `Translator.translate` on all the lines at once (length-sorted batches): offline decoding.

Lines/s for each C and beam, both in this process, taking turns over --rounds, best kept; the
translations of the two ways compared line by line. Appended to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results import append_section, commit  # noqa: E402
from speed import machine  # noqa: E402

from mt_cli import Translator  # noqa: E402


def whole(tr: Translator, lines: list[str], clients: int) -> tuple[float, list[str]]:
    start, out = time.perf_counter(), []
    for i in range(0, len(lines), clients):
        out += tr.translate(lines[i : i + clients])
    return time.perf_counter() - start, out


def running(tr: Translator, lines: list[str], clients: int) -> tuple[float, list[str], float]:
    """Seconds, translations, and mean rows per step."""
    batch = tr.running_batch()
    assert batch is not None, "this translator's search has no running batch"
    start = time.perf_counter()
    requests = tr.requests(lines)
    found: list = [None] * len(lines)
    waiting = iter(range(len(lines)))
    steps = rows = 0

    def send(n: int) -> None:
        """The next n lines join, in one call (blank ones answered at once)."""
        joining: list[int] = []
        while len(joining) < n and (i := next(waiting, None)) is not None:
            if requests[i] is None:
                found[i] = []
            else:
                joining.append(i)
        batch.add([requests[i] for i in joining], joining)

    send(clients)
    while len(batch):
        steps, rows = steps + 1, rows + batch.rows
        ended = batch.step()
        for i, hyps in ended:
            found[i] = hyps
        send(len(ended))
    texts = [h[0].text if h else "" for h in tr.with_text([f or [] for f in found], 1)]
    return time.perf_counter() - start, texts, rows / max(steps, 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--beam", type=int, nargs="+", default=[0], help="0: the checkpoint's")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    measured = commit()
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    rows, steps = [], ""
    for beam in args.beam:
        tr = Translator.load(args.checkpoint, device="cpu", **({"beam": beam} if beam else {}))
        steps = "compiled" if getattr(tr.engine, "compiled", None) is not None else "eager"
        tr.translate(lines[:8])
        offline = min(whole(tr, lines, len(lines))[0] for _ in range(args.rounds))
        for c in args.clients:
            best_w = best_r = float("inf")
            for _ in range(args.rounds):
                w, by_batch = whole(tr, lines, c)
                r, by_running, occupancy = running(tr, lines, c)
                best_w, best_r = min(best_w, w), min(best_r, r)
            same = sum(a == b for a, b in zip(by_batch, by_running))
            rows.append((tr.cfg.beam, c, len(lines) / best_w, len(lines) / best_r, occupancy, same))
            print(
                f"  beam {tr.cfg.beam}, {c} clients: whole {len(lines) / best_w:.1f}, "
                f"running {len(lines) / best_r:.1f} lines/s, {same}/{len(lines)} the same"
            )
        rows.append((tr.cfg.beam, 0, len(lines) / offline, 0.0, 0.0, len(lines)))
    body = [
        f"`benchmarks/running_batch.py`: {args.checkpoint.parent.name}/{args.checkpoint.name}, the "
        f"first {len(lines)} lines of {args.src_file.name}, C clients each keeping one line in "
        f"flight, in this process (no server), {args.rounds} rounds taking turns, best kept; "
        f"whole batches run the {steps} step, the running batch the eager one; "
        f"{machine()}.\n",
        "| beam | clients | whole batches of C lines, lines/s | running batch, lines/s | x | "
        "rows per step | translations the same |",
        "|---|---|---|---|---|---|---|",
    ]
    for beam, c, w, r, occ, same in rows:
        if c == 0:
            body.append(f"| {beam} | all at once (offline) | {w:.1f} | | | | |")
        else:
            body.append(
                f"| {beam} | {c} | {w:.1f} | {r:.1f} | {r / w:.2f} | {occ:.1f} | "
                f"{same}/{len(lines)} |"
            )
    text = "\n".join(body) + "\n"
    print(text)
    if not args.no_append:
        append_section("A running batch against whole batches", text, measured)


if __name__ == "__main__":
    main()
