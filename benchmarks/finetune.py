"""A pretrained Marian model in, fine-tuned on a small in-domain set, measured: `mt import` and
`mt train --init` on real data, through the commands a user runs.

    python benchmarks/finetune.py --checkpoint RUN/best.pt --data ../shared/data --minutes 5

No model can be downloaded here, so the "pretrained" model is an mt checkpoint trained on Multi30k
and exported as a Hugging Face MarianMTModel folder (`mt export`), the layout OPUS-MT publishes.

1. `mt import` of that folder; test2016 translated by the original and by the imported checkpoint:
   how many lines are identical.
2. In-domain data: the first 1,000 lines of WMT newstest2014 de-en for training, the other 2,003
   as the test set; validation (for best.pt) on newstest2021 de-en, never the test lines.
3. `mt train --init` on the 1,000 lines for --minutes, against `mt train` on the same 1,000
   lines from scratch for as long (the small preset, its own tokenizer).
4. BLEU on the 2,003 news lines and, for forgetting, on Multi30k test2016.

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
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--checkpoint", type=Path, required=True, help="the model to treat as pretrained"
    )
    p.add_argument(
        "--data", type=Path, required=True, help="the shared data folder (multi30k/, wmt/)"
    )
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    m30k, wmt = args.data / "multi30k", args.data / "wmt"
    news = wmt / "newstest2014" / "newstest2014.de-en"
    valid = [
        "--valid-src",
        wmt / "newstest2021/newstest2021.de-en.src.de",
        "--valid-tgt",
        wmt / "newstest2021/newstest2021.de-en.ref.A.en",
    ]
    schedule = [
        "--max-minutes",
        args.minutes,
        "--set",
        "train.valid_every=200",
        "--set",
        "train.warmup_steps=100",
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        split = {}
        for lang in ("de", "en"):
            lines = Path(f"{news}.{lang}").read_text(encoding="utf-8").splitlines()
            split[lang] = (t / f"train.{lang}", t / f"test.{lang}")
            split[lang][0].write_text("\n".join(lines[:1000]) + "\n", encoding="utf-8")
            split[lang][1].write_text("\n".join(lines[1000:]) + "\n", encoding="utf-8")
        data = ["--train-src", split["de"][0], "--train-tgt", split["en"][0], *valid]
        mt("export", "--checkpoint", args.checkpoint, "--out", t / "hf")
        mt("import", t / "hf", "--out", t / "imported.pt")
        original = translate(args.checkpoint, m30k / "test2016.de", t / "orig.txt")
        imported = translate(t / "imported.pt", m30k / "test2016.de", t / "imp.txt")
        same = sum(a == b for a, b in zip(original, imported))
        runs = {"imported (`mt export`, then `mt import`), not trained further": t / "imported.pt"}
        minutes = {}
        tune = ["--init", t / "imported.pt", "--set", "train.lr=3e-4"]
        trials = (
            (f"`mt train --init` on the 1,000 news lines, {args.minutes:g} min", tune),
            (
                f"`mt train` from scratch on the 1,000 news lines, {args.minutes:g} min",
                ["--preset", "small"],
            ),
        )
        for name, extra in trials:
            out = t / f"run{len(runs)}"
            start = time.perf_counter()
            mt("train", *data, "--out", out, *schedule, *extra)
            minutes[name] = (time.perf_counter() - start) / 60
            runs[name] = out / "best.pt"
        for name, ckpt in runs.items():
            news_bleu = bleu(translate(ckpt, split["de"][1], t / "news.txt"), split["en"][1])
            m30k_bleu = bleu(
                translate(ckpt, m30k / "test2016.de", t / "m.txt"), m30k / "test2016.en"
            )
            took = f" ({minutes[name]:.1f} min as a whole command)" if name in minutes else ""
            rows.append(f"| {name}{took} | {news_bleu:.2f} | {m30k_bleu:.2f} |")
    body = (
        "| model | newstest2014 de→en, lines 1,001-3,003 | Multi30k test2016 de→en "
        "|\n|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\nThe pretrained model: `{args.checkpoint}`. The imported checkpoint translates "
        f"{same} "
        "of test2016's "
        f"{len(original)} lines exactly as the original. Fine-tuning: lr 3e-4 (the recipe's peak "
        "is 1e-3), warmup "
        "100, validation on newstest2021 every 200 steps; best.pt is translated with its stored "
        "beam 5.\n\n"
        f"`python benchmarks/finetune.py --checkpoint {args.checkpoint} --data {args.data} "
        f"--minutes {args.minutes:g}`\n"
    )
    print(body)
    if not args.no_append:
        append_section("Fine-tuning an imported model", body)


if __name__ == "__main__":
    main()
