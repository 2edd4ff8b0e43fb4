"""`mt score` against `mt translate --length-penalty 0`: does forced decoding give a hypothesis its
search score back, and how often does a hypothesis's text re-encode to other pieces?

    python benchmarks/score_roundtrip.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de

Every finished hypothesis of beam search (not only the best) is detokenized, re-encoded with the
target SentencePiece model and, where the pieces are the same, scored by forced decoding. Prints
the share that re-encodes differently and the largest score difference, and appends them to
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from quality import append_section  # this folder's results helpers

from mt_cli import Translator


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--src-file", type=Path, required=True)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    tr = Translator.load(args.checkpoint, "cpu", beam=args.beam, length_penalty=0.0)
    lines = [
        line for line in args.src_file.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    found = tr.search(lines)
    pairs = [(line, h) for line, hyps in zip(lines, found) for h in hyps]
    same = [(line, h) for line, h in pairs if tr.tokenizer.encode_tgt([h.text])[0] == h.tokens]
    best_differs = sum(
        tr.tokenizer.encode_tgt([hyps[0].text])[0] != hyps[0].tokens for hyps in found
    )
    forced = tr.score([line for line, _ in same], [h.text for _, h in same])
    worst = max(abs(f.score - h.score) for f, (_, h) in zip(forced, same))
    body = (
        "| hypotheses | re-encode to other pieces | of the best ones | largest \\|score - forced "
        "score\\| |\n"
        f"|---|---|---|---|\n"
        f"| {len(pairs)} (beam {args.beam}, {len(lines)} lines of {args.src_file.name}) "
        f"| {len(pairs) - len(same)} ({100 * (len(pairs) - len(same)) / len(pairs):.1f}%) "
        f"| {best_differs} ({100 * best_differs / len(lines):.1f}%) | {worst:.2e} |\n\n"
        f"`{args.checkpoint}`, length penalty 0. `python benchmarks/score_roundtrip.py "
        f"--checkpoint {args.checkpoint} "
        f"--src-file {args.src_file}`\n"
    )
    print(body)
    if not args.no_append:
        append_section("Score round trip", body)


if __name__ == "__main__":
    main()
