"""Sentence splitters compared on paragraphs whose sentence boundaries are known.

    python benchmarks/sentence_split.py

Paragraphs are 3-8 consecutive segments of the WMT test sets (../shared/data/wmt: one segment per
line) joined as a paragraph is written: with a space, or nothing for Chinese. A splitter should
find every join (recall) and split little inside a segment. A segment may itself hold two
sentences, so a split inside one is counted apart ("extra per 100 segments"), not as wrong: the
splitters are compared on the same segments. Also: paragraphs recovered exactly, and speed in
segments/s (best of --rounds). Splitters that need a download at run time (minisbd fetches its
ONNX models) cannot run here and are listed as such. Printed, and appended to RESULTS.md.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from pathlib import Path

from quality import append_section  # this folder's results helpers

WMT = Path(__file__).resolve().parents[2] / "shared" / "data" / "wmt"
SETS = {
    "en": "newstest2014/newstest2014.de-en.en",
    "de": "newstest2014/newstest2014.de-en.de",
    "fr": "newstest2014/newstest2014.fr-en.fr",
    "zh": "newstest2021/newstest2021.zh-en.src.zh",
}


def paragraphs(lang: str, n: int, seed: int) -> list[list[str]]:
    lines = [
        x.strip() for x in (WMT / SETS[lang]).read_text(encoding="utf-8").splitlines() if x.strip()
    ]
    rng, out, at = random.Random(seed), [], 0
    while len(out) < n and at < len(lines):
        k = rng.randint(3, 8)
        out.append(lines[at : at + k])
        at += k
    return out


def splitters(lang: str) -> dict[str, Callable[[str], list[str]]]:
    import pysbd
    import sentencex

    seg = pysbd.Segmenter(language=lang, clean=False)
    return {
        "pysbd 0.3.4": seg.segment,
        "sentencex 1.0.32": lambda text: list(sentencex.segment(lang, text)),
    }


def score(
    split: Callable[[str], list[str]], paras: list[list[str]], joiner: str
) -> dict[str, float]:
    found = recall = extra = exact = segments = 0
    for para in paras:
        text = joiner.join(para)
        got = [s.strip() for s in split(text) if s.strip()]

        # Boundaries as character offsets in the text without spaces: where each piece ends.
        def ends(pieces: list[str]) -> set[int]:
            out, at = set(), 0
            for p in pieces:
                at += len(p.replace(" ", ""))
                out.add(at)
            return out

        gold, mine = ends(para), ends(got)
        found += len(gold & mine) - 1  # the paragraph's end is no join
        recall += len(gold) - 1
        extra += len(mine - gold)
        exact += mine == gold
        segments += len(para)
    return {"recall": found / recall, "extra": 100 * extra / segments, "exact": exact / len(paras)}


def speed(
    split: Callable[[str], list[str]], paras: list[list[str]], joiner: str, rounds: int
) -> float:
    texts = [joiner.join(p) for p in paras]
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for t in texts:
            split(t)
        best = min(best, time.perf_counter() - start)
    return sum(len(p) for p in paras) / best


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--paragraphs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    rows = [
        "| language | splitter | joins found | extra splits per 100 segments | paragraphs exact | "
        "segments/s |",
        "|---|---|---|---|---|---|",
    ]
    for lang in SETS:
        paras = paragraphs(lang, args.paragraphs, args.seed)
        joiner = "" if lang == "zh" else " "
        for name, split in splitters(lang).items():
            s = score(split, paras, joiner)
            rate = speed(split, paras, joiner, args.rounds)
            rows.append(
                f"| {lang} | {name} | {s['recall']:.3f} | {s['extra']:.1f} | {s['exact']:.3f} | "
                f"{rate:,.0f} |"
            )
            print(rows[-1], flush=True)
    import platform

    body = "\n".join(rows) + (
        f"\n\n{args.paragraphs} paragraphs of 3-8 consecutive segments per language "
        f"({', '.join(SETS.values())}), "
        "joined with a space (zh: nothing); best of "
        f"{args.rounds} rounds for speed; {platform.processor() or platform.machine()}. minisbd "
        "could not run: it "
        "downloads its ONNX models at run time (no network here, and nothing a wheel ships). "
        "`python benchmarks/sentence_split.py`\n"
    )
    print(body)
    if not args.no_append:
        append_section("Sentence splitters on joined WMT segments", body)


if __name__ == "__main__":
    main()
