"""Terminology on real data: does a glossary get its terms into the output, and at what cost?

    python benchmarks/terminology.py --checkpoint RUN/best.pt --data ../shared/data/multi30k

The glossary: German nouns with an English rendering that is right but not the one Multi30k's
references (and so the model) use: Mann -> gentleman, Hund -> canine, Fahrrad -> bike, ... The
renderings are written by hand below (a glossary is); the script keeps the 50 nouns of that table
most frequent in train.de, after dropping any whose rendering the model already gives in half or
more of the validation lines holding it (chosen on validation, never on the test set).

Since the references use the usual word, the glossary must cost BLEU. For scale, a last row takes
the output without the glossary and substitutes the glossary's term for every occurrence of the
usual rendering in lines holding the source term: a naive find-and-replace, which also replaces
occurrences the reference keeps and misses lines where the model used another word.

Then test2016 is translated (beam 5) with and without the glossary, in turns over --rounds rounds,
each keeping its fastest. Reported: the term-usage rate (of the (line, term) pairs whose source
term occurs, the share whose target term is in the output as a word, case-insensitive), BLEU on all
lines and on the lines holding a term, and sentences/s. Appended to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import sacrebleu
from quality import append_section  # this folder's results helpers

from mt_cli import Translator
from mt_cli.decode.glossary import Glossary
from mt_cli.tools.line_inputs import load_glossary

# German noun -> (the usual English rendering, a correct one the references do not usually use).
ALTERNATIVES = {
    "Mann": ("man", "gentleman"),
    "Frau": ("woman", "lady"),
    "Männer": ("men", "gentlemen"),
    "Frauen": ("women", "ladies"),
    "Junge": ("boy", "lad"),
    "Mädchen": ("girl", "lass"),
    "Kind": ("child", "kid"),
    "Kinder": ("children", "kids"),
    "Hund": ("dog", "canine"),
    "Hunde": ("dogs", "canines"),
    "Straße": ("street", "road"),
    "Gruppe": ("group", "crowd"),
    "Menschen": ("people", "folks"),
    "Leute": ("people", "folks"),
    "Personen": ("people", "individuals"),
    "Person": ("person", "individual"),
    "Fahrrad": ("bicycle", "bike"),
    "Auto": ("car", "automobile"),
    "Gebäude": ("building", "structure"),
    "Hut": ("hat", "cap"),
    "Mütze": ("hat", "beanie"),
    "Jacke": ("jacket", "coat"),
    "Strand": ("beach", "shore"),
    "Stadt": ("city", "town"),
    "Baby": ("baby", "infant"),
    "Tisch": ("table", "desk"),
    "Bühne": ("stage", "platform"),
    "Boot": ("boat", "vessel"),
    "Feld": ("field", "meadow"),
    "Berg": ("mountain", "peak"),
    "Felsen": ("rock", "boulder"),
    "Fußball": ("soccer", "football"),
    "Geschäft": ("store", "shop"),
    "Laden": ("store", "shop"),
    "Markt": ("market", "bazaar"),
    "Arbeiter": ("worker", "laborer"),
    "Gras": ("grass", "turf"),
    "Wiese": ("grass", "lawn"),
    "Fluss": ("river", "stream"),
    "Wald": ("woods", "forest"),
    "Kleid": ("dress", "gown"),
    "Brille": ("glasses", "spectacles"),
    "Sonnenbrille": ("sunglasses", "shades"),
    "Bürgersteig": ("sidewalk", "pavement"),
    "Gehweg": ("sidewalk", "pavement"),
    "Kleidung": ("clothing", "attire"),
    "Restaurant": ("restaurant", "diner"),
    "Essen": ("food", "meal"),
    "Publikum": ("audience", "spectators"),
    "Zuschauer": ("spectators", "onlookers"),
    "Menge": ("crowd", "throng"),
    "Gebiet": ("area", "region"),
    "Bereich": ("area", "zone"),
    "Pferd": ("horse", "steed"),
    "Rucksack": ("backpack", "knapsack"),
    "Tasche": ("bag", "satchel"),
    "Anzug": ("suit", "outfit"),
    "Fahrer": ("driver", "motorist"),
    "Radfahrer": ("cyclist", "biker"),
    "Sportler": ("athlete", "sportsman"),
    "Mannschaft": ("team", "squad"),
    "Hose": ("pants", "trousers"),
    "Schuhe": ("shoes", "footwear"),
    "Ozean": ("ocean", "sea"),
    "Tür": ("door", "doorway"),
    "Treppe": ("stairs", "staircase"),
    "Himmel": ("sky", "heavens"),
    "Musiker": ("musician", "performer"),
    "Sänger": ("singer", "vocalist"),
    "Sängerin": ("singer", "vocalist"),
    "Polizist": ("officer", "cop"),
    "Polizisten": ("officers", "cops"),
    "Arzt": ("doctor", "physician"),
    "Koch": ("cook", "chef"),
    "Verkäufer": ("vendor", "salesman"),
    "Händler": ("vendor", "merchant"),
    "Touristen": ("tourists", "travelers"),
}


def word(term: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(term)}(?!\w)", re.IGNORECASE)


def usage(glossary: Glossary, src: list[str], out: list[str]) -> tuple[int, int]:
    """(pairs whose target term is in the output, (line, term) pairs whose source term occurs)."""
    hits = total = 0
    for line, text in zip(src, out):
        for tgt in glossary.terms_for(line):
            total += 1
            hits += bool(word(tgt).search(text))
    return hits, total


def swap(text: str, line: str, glossary: Glossary) -> str:
    """The usual rendering of each glossary term in `line` replaced by the term, keeping a
    capital."""
    usual = {alt: ALTERNATIVES[src][0] for src, alt in glossary.entries}
    for term in glossary.terms_for(line):
        text = word(usual[term]).sub(
            lambda m, t=term: t.capitalize() if m.group(0)[0].isupper() else t, text
        )
    return text


def choose(tr: Translator, data: Path, n: int) -> Glossary:
    train = (data / "train.de").read_text(encoding="utf-8")
    freq = {src: len(re.findall(rf"(?<!\w){re.escape(src)}(?!\w)", train)) for src in ALTERNATIVES}
    ranked = sorted(ALTERNATIVES, key=lambda s: -freq[s])
    val_src = (data / "val.de").read_text(encoding="utf-8").splitlines()
    kept: list[tuple[str, str]] = []
    for src in ranked:
        lines = [line for line in val_src if Glossary([(src, "x")]).terms_for(line)][:40]
        out = tr.translate(lines) if lines else []
        alternative = ALTERNATIVES[src][1]
        if lines and sum(bool(word(alternative).search(t)) for t in out) * 2 >= len(lines):
            print(
                f"dropped {src} -> {alternative}: the model already uses it on validation",
                flush=True,
            )
            continue
        kept.append((src, alternative))
        if len(kept) == n:
            break
    return Glossary(kept)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="the Multi30k folder (train, val, test2016 .de/.en)",
    )
    p.add_argument("--terms", type=int, default=50)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    tr = Translator.load(args.checkpoint, "cpu", beam=args.beam)
    glossary = choose(tr, args.data, args.terms)
    with tempfile.TemporaryDirectory() as tmp:  # through the file format users write
        tsv = Path(tmp) / "glossary.tsv"
        tsv.write_text("".join(f"{s}\t{t}\n" for s, t in glossary.entries), encoding="utf-8")
        glossary = load_glossary(tsv)
    src = (args.data / "test2016.de").read_text(encoding="utf-8").splitlines()
    ref = (args.data / "test2016.en").read_text(encoding="utf-8").splitlines()
    terms = [glossary.terms_for(line) for line in src]
    runs = {"without glossary": None, "with glossary": terms}
    best: dict[str, tuple[float, list[str]]] = {}
    for _ in range(args.rounds):
        for name, constraints in runs.items():
            start = time.perf_counter()
            out = [h[0].text for h in tr.search(src, constraints=constraints)]
            took = time.perf_counter() - start
            best[name] = (min(took, best[name][0]) if name in best else took, out)
            print(f"{name}: {len(src) / took:.1f} sent/s", flush=True)
    report(args, glossary, src, ref, terms, best)


def report(args, glossary, src, ref, terms, best) -> None:  # noqa: ANN001
    with_terms = [i for i, t in enumerate(terms) if t]
    rows = []
    for name, (seconds, out) in best.items():
        hits, total = usage(glossary, src, out)
        bleu = sacrebleu.corpus_bleu(out, [ref]).score
        sub = sacrebleu.corpus_bleu(
            [out[i] for i in with_terms], [[ref[i] for i in with_terms]]
        ).score
        rows.append(
            f"| {name} | {hits}/{total} ({100 * hits / total:.1f}%) | {bleu:.2f} | {sub:.2f} "
            f"| {len(src) / seconds:.1f} |"
        )
    plain = best["without glossary"][1]
    swapped = [swap(text, line, glossary) for text, line in zip(plain, src)]
    hits, total = usage(glossary, src, swapped)
    swapped_terms, ref_terms = [swapped[i] for i in with_terms], [ref[i] for i in with_terms]
    rows.append(
        f"| without, usual word swapped for the term | {hits}/{total} ({100 * hits / total:.1f}%) "
        f"| {sacrebleu.corpus_bleu(swapped, [ref]).score:.2f} "
        f"| {sacrebleu.corpus_bleu(swapped_terms, [ref_terms]).score:.2f} | - |"
    )
    same = sum(
        a == b
        for a, b, t in zip(best["without glossary"][1], best["with glossary"][1], terms)
        if not t
    )
    entries = ", ".join(f"{s} → {t}" for s, t in glossary.entries)
    body = (
        "| run | term usage | BLEU (all) | BLEU (lines with a term) | sent/s "
        "|\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\n{len(src)} lines of test2016 de→en, {len(with_terms)} with at least one term; of "
        "the "
        f"{len(src) - len(with_terms)} without, {same} translate identically with the glossary. "
        f"Beam {args.beam}, "
        f"`{args.checkpoint}`, best of {args.rounds} alternating rounds. Glossary "
        f"({len(glossary.entries)}): "
        f"{entries}.\n\n`python benchmarks/terminology.py --checkpoint {args.checkpoint} --data "
        f"{args.data}`\n"
    )
    print(body)
    if not args.no_append:
        append_section("Terminology", body)


if __name__ == "__main__":
    main()
