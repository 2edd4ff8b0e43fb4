"""How protected spans are best carried through the model: placeholders, URLs and e-mail
addresses put into real sentences, translated each way mt can carry them.

    python benchmarks/protect.py --checkpoint /work/bench/de-en-600/best.pt

500 Multi30k test sentences (../shared/data/multi30k, German -> English) each get one to three
spans (printf and brace placeholders, URLs, e-mail addresses) at random places. Each way is scored
on: the share of spans the model itself wrote exactly once (before mt's repair, which puts a
dropped span in where its source position says and removes repeats, so that after it every span is
always there exactly once: also checked), and BLEU of the rest of the translation (every span taken
out of output and reference) against the same sentences translated with no spans at all, which
shows how much the spans disturb the words around them. Ways: the spans left in the sentence
without protection; the span itself as its own placeholder; a number (7001, ...); a letter code
(XZA, ...); the number and the code also asked of beam search as terms it must write. Printed,
and appended to RESULTS.md.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from pathlib import Path

import sacrebleu
from results import append_section, copy_newest
from speed import machine

from mt_cli import Translator
from mt_cli.data.tokenizer import UNK
from mt_cli.documents.protect import Protector, marker_regex

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"
SPANS = [
    "%s",
    "%d",
    "%(name)s",
    "{count}",
    "{0}",
    "{user_name}",
    "https://example.org/docs?id=42",
    "www.example.com",
    "anna.schmidt@example.de",
    "support@mt.example",
    "%1$s",
]
# name: (protector style or None for no protection, ask beam search to write the placeholders)
WAYS = {
    "no protection": (None, False),
    "span as its own placeholder": ("verbatim", False),
    "span as its own placeholder, forced": ("verbatim", True),
    "number placeholder": ("number", False),
    "number placeholder, forced": ("number", True),
    "letter-code placeholder": ("code", False),
    "letter-code placeholder, forced": ("code", True),
}


TITLE = "Protected spans: how they are carried"


def with_spans(lines: list[str], seed: int) -> list[str]:
    rng, out = random.Random(seed), []
    for line in lines:
        words = line.split()
        for span in rng.sample(SPANS, rng.randint(1, 3)):
            words.insert(rng.randint(0, len(words)), span)
        out.append(" ".join(words))
    return out


def strip_spans(line: str) -> str:
    for span in sorted(SPANS, key=len, reverse=True):
        line = line.replace(span, " ")
    return " ".join(line.split())


def _spellable(tr: Translator, markers: tuple[str, ...]) -> list[str]:
    """The placeholders the target vocabulary can write (a term it cannot is refused)."""
    return [m for m in markers if UNK not in tr.tokenizer.encode_tgt([m])[0]]


def run_way(
    tr: Translator, sources: list[str], style: str | None, forced: bool
) -> dict[str, float]:
    start = time.perf_counter()
    if style is None:
        raw = [a.text for a in tr.translate_aligned(sources)]
        final, markers = raw, [[s for s in SPANS if s in src] for src in sources]
    else:
        p = Protector(style=style)
        masked = [p.mask(s) for s in sources]
        terms = [_spellable(tr, m.markers) for m in masked] if forced else None
        raw = [hyps[0].text for hyps in tr.search([m.text for m in masked], constraints=terms)]
        final = [p.restore(t, m) if m.spans else t for t, m in zip(raw, masked)]
        markers = [list(m.markers) for m in masked]
    seconds = time.perf_counter() - start
    total = sum(len(m) for m in markers)
    kept = sum(len(marker_regex(x).findall(t)) == 1 for t, ms in zip(raw, markers) for x in ms)
    whole = sum(
        final_line.count(s) == src.count(s)
        for final_line, src in zip(final, sources)
        for s in SPANS
        if s in src
    )
    return {"kept": kept / total, "whole": whole / total, "seconds": seconds, "final": final}  # type: ignore[dict-item]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--lines", type=int, default=500)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--no-append", action="store_true")
    p.add_argument(
        "--docs",
        action="store_true",
        help="only put the newest recorded run into docs/documents.md",
    )
    args = p.parse_args()
    if args.docs:
        return copy_newest(TITLE, "protect-table")
    if args.checkpoint is None:
        p.error("--checkpoint is required unless --docs is given")
    plain = (DATA / "test2016.de").read_text(encoding="utf-8").splitlines()[: args.lines]
    sources = with_spans(plain, args.seed)
    tr = Translator.load(args.checkpoint, device="cpu")
    ceiling = tr.translate(plain)
    rows = [
        "| way | spans the model wrote exactly once | after repair | BLEU of the rest vs no spans "
        "| s |",
        "|---|---|---|---|---|",
    ]
    for name, (style, forced) in WAYS.items():
        r = run_way(tr, sources, style, forced)
        rest = [strip_spans(t) for t in r["final"]]  # type: ignore[union-attr]
        bleu = sacrebleu.corpus_bleu(rest, [[strip_spans(c) for c in ceiling]]).score
        rows.append(
            f"| {name} | {r['kept']:.1%} | {r['whole']:.1%} | {bleu:.1f} | {r['seconds']:.1f} |"
        )
        print(rows[-1], flush=True)
    spans = sum(len(re.findall("|".join(map(re.escape, SPANS)), s)) for s in sources)
    body = "\n".join(rows) + (
        f"\n\n{args.lines} Multi30k test2016 German sentences with {spans} spans put in (seed "
        f"{args.seed}); "
        f'`{args.checkpoint.name}` ({tr.cfg.search_method}, beam {tr.cfg.beam}); "forced": the '
        "placeholders "
        "asked of beam search as terms. BLEU compares each translation, spans taken out, with the "
        "same "
        f"sentence translated without spans. {machine()}. "
        f"`python benchmarks/protect.py --checkpoint {args.checkpoint}`\n"
    )
    print(body)
    if not args.no_append:
        append_section(TITLE, body)
        copy_newest(TITLE, "protect-table")


if __name__ == "__main__":
    main()
