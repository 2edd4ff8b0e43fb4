"""The vocabulary shortlist's sizes, chosen on validation, then checked on test.

    python benchmarks/shortlist.py --checkpoint RUN/best.pt --data ../shared/data/multi30k \\
        --src de --tgt en

Builds one lexicon from the training pairs with the largest K, and cuts it to each (K per source
piece, F most frequent) of the grid: its columns are sorted best first, so the first K columns
are the lexicon of K. Each setting decodes the validation set (the checkpoint's beam and length
penalty, fp32, batches of 64), beside the whole vocabulary, in turns over --rounds rounds with
the fastest kept: BLEU, the mean shortlist size per batch and sentences/s in this one process
(speed.py's clean processes give the speed figures that count). The chosen setting is the one
with the best validation BLEU (of equal ones, the smallest); it alone is then scored on the test
sets against the whole vocabulary. Printed, appended to benchmarks/RESULTS.md, copied to
docs/speed.md.

The first runs chose the smallest shortlist within 0.1 validation BLEU of the whole vocabulary
(K 5, F 100): 1.6x smaller than the validation-best K 10, F 100, but at the edge of that margin,
and on test2017 it lost 0.50 BLEU (RESULTS.md, "The vocabulary shortlist's default").
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import sacrebleu
import torch
from results import append_section, commit, copy_newest

from mt_cli.data.lexicon import build_lexicon, pair_chunks
from mt_cli.data.pairs import Pairs
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.translator import Translator
from mt_cli.model import checkpoint

GRID = [(k, f) for k in (3, 5, 10, 20, 50) for f in (0, 100, 300)]


def cut(full: Shortlist, k: int, f: int) -> Shortlist:
    return dataclasses.replace(
        full, table=full.table[:, :k].contiguous(), frequent=full.frequent[:f]
    )


def mean_size(short: Shortlist | None, tr: Translator, lines: list[str]) -> float:
    """The mean shortlist size over the length-sorted batches of 64 decoding makes."""
    if short is None:
        return float(tr.tokenizer.tgt_vocab_size)
    ids = sorted(tr.tokenizer.encode_src(lines), key=len)
    sizes = [
        short.for_batch(torch.tensor([i for b in ids[s : s + 64] for i in b])[None])[0].numel()
        for s in range(0, len(ids), 64)
    ]
    return sum(sizes) / len(sizes)


def decode(tr: Translator, lines: list[str], refs: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    out = tr.translate(lines)
    return time.perf_counter() - start, sacrebleu.corpus_bleu(out, [refs]).score


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--data", type=Path, help="a folder with train/val/test2016... files")
    p.add_argument("--src")
    p.add_argument("--tgt")
    p.add_argument("--valid", default="val")
    p.add_argument("--tests", nargs="+", default=["test2016", "test2017"])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-append", action="store_true")
    p.add_argument(
        "--docs",
        "--readme",
        dest="docs",
        action="store_true",
        help="only copy the newest RESULTS.md run into docs/speed.md",
    )
    args = p.parse_args()
    if args.docs:
        return copy_newest("Vocabulary shortlist", "shortlist-table")
    missing = [a for a in ("checkpoint", "data", "src", "tgt") if getattr(args, a) is None]
    if missing:
        p.error("required: " + ", ".join("--" + a for a in missing))
    measured = commit()
    ckpt = checkpoint.load(args.checkpoint)

    def read(name: str, lang: str) -> list[str]:
        return (args.data / f"{name}.{lang}").read_text(encoding="utf-8").splitlines()

    tok = ckpt.tokenizer
    train = Pairs(tok.encode_src(read("train", args.src)), tok.encode_tgt(read("train", args.tgt)))
    start = time.perf_counter()
    lexicon = build_lexicon(
        pair_chunks(train),
        tok.src_vocab_size,
        tok.tgt_vocab_size,
        max(k for k, _ in GRID),
        max(f for _, f in GRID),
    )
    full = Shortlist.of(lexicon)
    build_s = time.perf_counter() - start
    base = Translator.from_checkpoint(ckpt, "cpu", batch_size=64, precision="fp32")
    settings: dict[str, Shortlist | None] = {
        "whole vocabulary": None,
        **{f"K {k}, F {f}": cut(full, k, f) for k, f in GRID},
    }
    src, refs = read(args.valid, args.src), read(args.valid, args.tgt)
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.rounds):
        for name, short in settings.items():
            tr = Translator(base.model, tok, base.cfg, shortlist=short)
            seconds, bleu = decode(tr, src, refs)
            best[name] = (min(seconds, best.get(name, (seconds, 0))[0]), bleu)
    sizes = {name: mean_size(short, base, src) for name, short in settings.items()}
    chosen = max(
        (n for n in settings if settings[n] is not None), key=lambda n: (best[n][1], -sizes[n])
    )
    run = f"{args.checkpoint.parent.name}/{args.checkpoint.name}"
    lines = [
        f"`benchmarks/shortlist.py`: {run}, {args.src}->{args.tgt}, "
        f"lexicon counted over {len(train)} training pairs in {build_s:.1f} s; validation "
        f"{args.valid} "
        f"({len(src)} lines), beam {base.cfg.beam}, fp32, batches of 64, {args.rounds} rounds in "
        "one process, "
        "fastest kept. Chosen: the best validation BLEU (of equal ones, the smallest "
        "shortlist).\n",
        "| setting | mean shortlist per batch | valid BLEU | valid sent/s |",
        "|---|---|---|---|",
    ]
    for name in settings:
        mark = " (chosen)" if name == chosen else ""
        lines.append(
            f"| {name}{mark} | {sizes[name]:.0f} | {best[name][1]:.2f} | "
            f"{len(src) / best[name][0]:.1f} |"
        )
    lines += [
        "",
        "| test set | whole vocabulary BLEU | chosen shortlist BLEU | difference |",
        "|---|---|---|---|",
    ]
    for name in args.tests:
        t_src, t_ref = read(name, args.src), read(name, args.tgt)
        got = [
            decode(Translator(base.model, tok, base.cfg, shortlist=settings[s]), t_src, t_ref)[1]
            for s in ("whole vocabulary", chosen)
        ]
        lines.append(f"| {name} | {got[0]:.2f} | {got[1]:.2f} | {got[1] - got[0]:+.2f} |")
    body = "\n".join(lines) + "\n"
    print(body)
    if not args.no_append:
        append_section("Vocabulary shortlist", body, measured)
        copy_newest("Vocabulary shortlist", "shortlist-table")


if __name__ == "__main__":
    main()
