"""A pretrained Marian model in, fine-tuned, measured: the whole of `mt import` and `mt train --init`
on real data, through the commands a user runs.

    python benchmarks/finetune.py --checkpoint RUN/best.pt --data ../shared/data --minutes 5

No model can be downloaded here, so the "pretrained" model is an mt checkpoint exported as a
Hugging Face MarianMTModel folder (`mt export`), the layout OPUS-MT publishes. Then:

1. `mt import` of that folder; test2016 translated by the original and the imported checkpoint:
   how many lines are identical.
2. `mt train --init` on news (WMT newstest2014 de-en, 3,003 pairs; validation newstest2021,
   1,000), --max-minutes M: domain adaptation from Multi30k's image captions to news.
3. BLEU before and after on generaltest2022 de-en (ref A, never used for a choice), and on
   Multi30k test2016 (what the adaptation costs in the old domain).

The table is printed and appended to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu
from quality import append_section  # this folder's results helpers

MT = [sys.executable, "-m", "mt_cli"]


def mt(*args: object) -> None:
    subprocess.run([*MT, *map(str, args)], check=True)


def translate(ckpt: Path, src: Path, out: Path) -> list[str]:
    mt("translate", "--checkpoint", ckpt, src, "--output", out)
    return out.read_text(encoding="utf-8").splitlines()


def bleu(hyp: list[str], ref: Path) -> float:
    return sacrebleu.corpus_bleu(hyp, [ref.read_text(encoding="utf-8").splitlines()]).score


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True, help="the model to treat as pretrained")
    p.add_argument("--data", type=Path, required=True, help="the shared data folder (multi30k/, wmt/)")
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    m30k, wmt = args.data / "multi30k", args.data / "wmt"
    news_test = (
        wmt / "generaltest2022/generaltest2022.de-en.src.de",
        wmt / "generaltest2022/generaltest2022.de-en.ref.A.en",
    )
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        mt("export", "--checkpoint", args.checkpoint, "--out", t / "hf")
        mt("import", t / "hf", "--out", t / "imported.pt")
        original = translate(args.checkpoint, m30k / "test2016.de", t / "orig.txt")
        imported = translate(t / "imported.pt", m30k / "test2016.de", t / "imp.txt")
        same = sum(a == b for a, b in zip(original, imported))
        before_news = bleu(translate(t / "imported.pt", news_test[0], t / "news0.txt"), news_test[1])
        start = time.perf_counter()
        mt("train", "--init", t / "imported.pt", "--train-src", wmt / "newstest2014/newstest2014.de-en.de",
           "--train-tgt", wmt / "newstest2014/newstest2014.de-en.en",
           "--valid-src", wmt / "newstest2021/newstest2021.de-en.src.de",
           "--valid-tgt", wmt / "newstest2021/newstest2021.de-en.ref.A.en", "--out", t / "run",
           "--max-minutes", args.minutes, "--set", "train.valid_every=200", "--set", "train.lr=3e-4",
           "--set", "train.warmup_steps=100")  # fmt: skip
        took = (time.perf_counter() - start) / 60
        after_news = bleu(translate(t / "run" / "best.pt", news_test[0], t / "news1.txt"), news_test[1])
        after_m30k = bleu(translate(t / "run" / "best.pt", m30k / "test2016.de", t / "m1.txt"), m30k / "test2016.en")
        before_m30k = bleu(imported, m30k / "test2016.en")
    body = (
        f"| model | generaltest2022 de→en (news) | test2016 de→en (Multi30k) |\n|---|---|---|\n"
        f"| imported (`mt export`, then `mt import`) | {before_news:.2f} | {before_m30k:.2f} |\n"
        f"| fine-tuned on newstest2014, {args.minutes:g} min (`mt train --init`) "
        f"| {after_news:.2f} | {after_m30k:.2f} |\n"
        f"\nThe imported checkpoint translates {same} of test2016's {len(original)} lines exactly as the original. "
        f"Fine-tuning (lr 3e-4, warmup 100, validation on newstest2021 every 200 steps) took {took:.1f} minutes "
        f"as a whole command. `{args.checkpoint}`.\n\n`python benchmarks/finetune.py --checkpoint {args.checkpoint} "
        f"--data {args.data} --minutes {args.minutes:g}`\n"
    )
    print(body)
    if not args.no_append:
        append_section("Fine-tuning an imported model", body)


if __name__ == "__main__":
    main()
