"""BLEU of each decoding precision on several test sets: what bf16 and int8 cost in quality.

    python benchmarks/precision_bleu.py --checkpoint RUN/best.pt --data ../shared/data/multi30k \\
        [--src de --tgt en] [--sets test2016 test2017 test2018] [--beam 5] [--no-append]

Every precision (fp32, bf16 where the CPU has bf16 arithmetic, int8) translates each test set
with the checkpoint's decoding settings, through the decoder step run op by op (decode.engine
eager) and compiled (decode.engine compiled, built first where it is not); sacreBLEU's BLEU and
chrF, and the difference from fp32 eager, the reference. The table is printed and appended to
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from results import append_section  # this folder's results helpers
from speed import machine  # the CPU and its flags, as every speed table names them

from mt_cli.decode.translator import Translator
from mt_cli.device import cpu_has_bf16
from mt_cli.metrics import score


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--src", default="de")
    p.add_argument("--tgt", default="en")
    p.add_argument("--sets", nargs="+", default=["test2016", "test2017", "test2018"])
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    precisions = ["fp32", "bf16", "int8"] if cpu_has_bf16() else ["fp32", "int8"]
    rows = [
        "| precision, engine | "
        + " | ".join(f"{s} BLEU (vs fp32) | {s} chrF" for s in args.sets)
        + " |",
        "|---|" + "---|---|" * len(args.sets),
    ]
    fp32: dict[str, float] = {}
    for precision, engine in [(p, e) for p in precisions for e in ("eager", "compiled")]:
        tr = Translator.load(
            args.checkpoint, "cpu", beam=args.beam, precision=precision, engine=engine
        )
        cells = []
        for name in args.sets:
            src = (args.data / f"{name}.{args.src}").read_text(encoding="utf-8").splitlines()
            ref = (args.data / f"{name}.{args.tgt}").read_text(encoding="utf-8").splitlines()
            got = score(tr.translate(src), [ref], ("bleu", "chrf"))
            fp32.setdefault(name, got["bleu"])
            cells.append(f"{got['bleu']:.2f} ({got['bleu'] - fp32[name]:+.2f}) | {got['chrf']:.2f}")
        rows.append(f"| {precision}, {engine} | " + " | ".join(cells) + " |")
    body = (
        f"`{args.checkpoint}`, {args.src}→{args.tgt}, beam {args.beam}; {machine()}. "
        f"`python benchmarks/precision_bleu.py --checkpoint {args.checkpoint} --data "
        f"{args.data}`\n\n" + "\n".join(rows)
    )
    print(body)
    if not args.no_append:
        append_section("Quality of each decoding precision", body + "\n")


if __name__ == "__main__":
    main()
