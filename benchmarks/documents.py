"""Documents: what splitting paragraphs into sentences is worth, how well inline tags land, and
what each document type costs against plain lines.

    python benchmarks/documents.py --checkpoint /work/bench/de-en-600/best.pt

1. Paragraphs. 200 paragraphs of 3-8 consecutive German segments from a test set, joined with a
   space as a paragraph is written, with their English references joined the same way. Each
   paragraph translated three ways: as a document (`text`: split into sentences, one batch),
   its segments line by line (the ceiling splitting aims at), and whole as one line (what `mt
   translate` did before documents). BLEU and chrF per paragraph set (sacreBLEU, 13a), and the
   share of paragraphs whose split translation equals the line-by-line one. On WMT newstest2014
   (news: far from a Multi30k model's domain) and on Multi30k test2016 (in domain).
2. Tag placement. Multi30k test2016 sentences holding one of 30 common nouns with one English
   translation (Hund -> dog, ...): the noun wrapped in <b>, the sentence translated as HTML. Of
   the translations that hold the expected word, the share whose <b> holds exactly it (and holds
   it among others); with the model's alignment and with proportional placement (alignment
   withheld), to show what the alignment is worth.
3. Throughput. The same 200 Multi30k paragraphs as each document type: source words per second,
   best of --rounds, types taking turns, one Translator (the per-call cost of a type's reading
   and writing over the same decoding). Also whole `mt translate` commands on a lines file and on
   its HTML version, each in its own process.

Printed, and appended to RESULTS.md.
"""

from __future__ import annotations

import argparse
import html
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu
from results import append_section, copy_newest
from speed import machine

from mt_cli import Translator
from mt_cli.documents.aligned import Aligned

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LANG = "de"  # the sources' language, whose rules split sentences (a checkpoint may record none)
SETS = {
    "WMT newstest2014": (
        "wmt/newstest2014/newstest2014.de-en.de",
        "wmt/newstest2014/newstest2014.de-en.en",
    ),
    "Multi30k test2016": ("multi30k/test2016.de", "multi30k/test2016.en"),
}
NOUNS = {
    "Mann": "man",
    "Frau": "woman",
    "Hund": "dog",
    "Junge": "boy",
    "Mädchen": "girl",
    "Straße": "street",
    "Wasser": "water",
    "Ball": "ball",
    "Gebäude": "building",
    "Hemd": "shirt",
    "Gruppe": "group",
    "Auto": "car",
    "Strand": "beach",
    "Baum": "tree",
    "Hut": "hat",
    "Kamera": "camera",
    "Gitarre": "guitar",
    "Bühne": "stage",
    "Schnee": "snow",
    "Frauen": "women",
    "Männer": "men",
    "Hunde": "dogs",
    "Kinder": "children",
    "Pferd": "horse",
    "Boot": "boat",
    "Fahrrad": "bike",
    "Kind": "child",
    "Menge": "crowd",
    "Jacke": "jacket",
    "Brille": "glasses",
}


TITLE = "Documents: paragraphs, tag placement, throughput per type"


def paragraphs(name: str, n: int, seed: int) -> list[tuple[list[str], list[str]]]:
    src, ref = (DATA / p for p in SETS[name])
    pairs = [
        (s.strip(), r.strip())
        for s, r in zip(
            src.read_text(encoding="utf-8").splitlines(),
            ref.read_text(encoding="utf-8").splitlines(),
        )
        if s.strip() and r.strip()
    ]
    rng, out, at = random.Random(seed), [], 0
    while len(out) < n and at < len(pairs):
        k = rng.randint(3, 8)
        chunk = pairs[at : at + k]
        out.append(([s for s, _ in chunk], [r for _, r in chunk]))
        at += k
    return out


def paragraph_rows(tr: Translator, name: str, n: int, seed: int) -> list[str]:
    from mt_cli.documents.sentences import split

    # Without the shortlist: it is built per batch, so with it a sentence's translation depends on
    # which sentences share its batch, and "split equals line by line" could not be checked.
    tr = tr.with_options(shortlist=False)
    paras = paragraphs(name, n, seed)
    refs = [" ".join(r) for _, r in paras]
    flat = [s for src, _ in paras for s in src]
    # Line by line as `mt translate` does it (protected spans carried the same way as in
    # paragraphs).
    found, ways = (
        iter(tr.translate_document("\n".join(flat), "lines", source_lang=LANG).split("\n")),
        {},
    )
    ways["line by line"] = [" ".join(next(found) for _ in src) for src, _ in paras]
    ways["paragraph, split into sentences"] = [
        tr.translate_document(" ".join(src), "text", source_lang=LANG) for src, _ in paras
    ]
    ways["paragraph as one line (no splitting)"] = tr.translate([" ".join(src) for src, _ in paras])
    found_all = [[s.text for s in split(" ".join(src), LANG)] == src for src, _ in paras]
    pairs = zip(ways["line by line"], ways["paragraph, split into sentences"], found_all)
    same = sum(a == b for a, b, ok in pairs if ok) / max(sum(found_all), 1)
    rows = []
    for way, hyps in ways.items():
        bleu, chrf = (
            sacrebleu.corpus_bleu(hyps, [refs]).score,
            sacrebleu.corpus_chrf(hyps, [refs]).score,
        )
        note = (
            f"all segments found in {sum(found_all)} paragraphs; of those, {same:.0%} identical to "
            "line by line"
            if way.startswith("paragraph, split")
            else ""
        )
        rows.append(f"| {name} | {way} | {bleu:.1f} | {chrf:.1f} | {note} |")
        print(rows[-1], flush=True)
    return rows


class WithoutAlignment:
    """The translator with its alignment withheld: tags then go where their words' share of the
    sentence says."""

    def __init__(self, tr: Translator) -> None:
        self.tr = tr

    def translate_aligned(self, lines, alignment=False):  # type: ignore[no-untyped-def]
        return [Aligned(a.text) for a in self.tr.translate_aligned(lines)]


def tag_rows(tr: Translator, limit: int) -> list[str]:
    from mt_cli.config import DocumentConfig
    from mt_cli.documents import translate_document

    lines = (DATA / SETS["Multi30k test2016"][0]).read_text(encoding="utf-8").splitlines()
    cases = []
    for line in lines:
        hit = next((w for w in line.rstrip(".").split() if w in NOUNS), None)
        if hit and len(cases) < limit:
            cases.append((re.sub(rf"\b{hit}\b", f"<b>{hit}</b>", line, count=1), NOUNS[hit]))
    rows = []
    for way, engine in (
        ("alignment", tr),
        ("proportional (alignment withheld)", WithoutAlignment(tr)),
    ):
        doc = "\n".join(f"<p>{c}</p>" for c, _ in cases)
        out = translate_document(engine, doc, "html", DocumentConfig(), LANG).split("\n")
        held = exact = inside = 0
        for got, (_, word) in zip(out, cases):
            plain = re.sub(r"<[^>]+>", "", got).lower()
            if not re.search(rf"\b{word}\b", plain):
                continue
            held += 1
            bold = " ".join(re.findall(r"<b>(.*?)</b>", got)).lower()
            exact += re.sub(r"[^\w ]", "", bold).strip() == word
            inside += bool(re.search(rf"\b{word}\b", bold))
        rows.append(
            f"| {way} | {len(cases)} | {held} | {exact / max(held, 1):.1%} | "
            f"{inside / max(held, 1):.1%} |"
        )
        print(rows[-1], flush=True)
    return rows


def as_types(paras: list[list[str]]) -> dict[str, str]:
    """The same sentences as each document type."""
    flat = [s for p in paras for s in p]
    bold = [re.sub(r"^(\S+)", r"<b>\1</b>", html.escape(" ".join(p), quote=False)) for p in paras]
    stars = [re.sub(r"^(\S+)", r"**\1**", " ".join(p)) for p in paras]

    def cue(k: int, comma: str) -> str:
        return f"00:00:{k % 60:02d}{comma}000 --> 00:00:{k % 60:02d}{comma}900"

    po = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    return {
        "lines": "\n".join(flat) + "\n",
        "text": "\n\n".join(" ".join(p) for p in paras) + "\n",
        "html": "<html><body>\n" + "\n".join(f"<p>{b}</p>" for b in bold) + "\n</body></html>\n",
        "markdown": "\n\n".join(stars) + "\n",
        "srt": "\n".join(f"{k + 1}\n{cue(k, ',')}\n{s}\n" for k, s in enumerate(flat)),
        "vtt": "WEBVTT\n\n" + "\n".join(f"{cue(k, '.')}\n{s}\n" for k, s in enumerate(flat)),
        "po": po
        + "\n".join(f'msgid "{s.replace(chr(34), chr(92) + chr(34))}"\nmsgstr ""\n' for s in flat),
    }


def speed_rows(tr: Translator, checkpoint: Path, n: int, seed: int, rounds: int) -> list[str]:
    paras = [src for src, _ in paragraphs("Multi30k test2016", n, seed)]
    words = sum(len(s.split()) for p in paras for s in p)
    docs, best = as_types(paras), {}
    for _ in range(rounds):
        for kind, doc in docs.items():
            start = time.perf_counter()
            tr.translate_document(doc, kind, source_lang=LANG)
            best[kind] = min(best.get(kind, float("inf")), time.perf_counter() - start)
    rows = [f"| {kind} | {words / s:,.0f} | {s / best['lines']:.2f} |" for kind, s in best.items()]
    with tempfile.TemporaryDirectory() as tmp:
        for kind, suffix in (("lines", ".txt"), ("html", ".html")):
            path = Path(tmp) / f"doc{suffix}"
            path.write_text(docs[kind], encoding="utf-8")
            cmd = [
                "mt",
                "translate",
                str(path),
                "--checkpoint",
                str(checkpoint),
                "--output",
                str(path) + ".out",
                "--source-lang",
                LANG,
            ]
            took = []
            for _ in range(2):
                start = time.perf_counter()
                subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
                took.append(time.perf_counter() - start)
            rows.append(
                f"| `mt translate doc{suffix}` (whole process) | {words / min(took):,.0f} | |"
            )
    for row in rows:
        print(row, flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--paragraphs", type=int, default=200)
    p.add_argument("--tag-sentences", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-append", action="store_true")
    p.add_argument(
        "--docs",
        action="store_true",
        help="only put the newest recorded run into docs/documents.md",
    )
    args = p.parse_args()
    if args.docs:
        return copy_newest(TITLE, "documents-table")
    if args.checkpoint is None:
        p.error("--checkpoint is required unless --docs is given")
    tr = Translator.load(args.checkpoint, device="cpu")
    para = ["| test set | input | BLEU | chrF | |", "|---|---|---|---|---|"]
    for name in SETS:
        para += paragraph_rows(tr, name, args.paragraphs, args.seed)
    tags = [
        "| placement | sentences | translations holding the word | <b> is the word | <b> holds the "
        "word |",
        "|---|---|---|---|---|",
        *tag_rows(tr, args.tag_sentences),
    ]
    speed = [
        "| document type | source words/s | time against lines |",
        "|---|---|---|",
        *speed_rows(tr, args.checkpoint, args.paragraphs, args.seed, args.rounds),
    ]
    body = (
        "\n".join(para)
        + f"\n\n{args.paragraphs} paragraphs of 3-8 segments per test set (seed {args.seed}), "
        "decoded without\n"
        "the shortlist (built per batch, it makes a translation depend on the sentences beside "
        "it).\n\n"
        + "\n".join(tags)
        + f"\n\nMulti30k test2016 sentences with one of {len(NOUNS)} nouns in <b>.\n\n"
        + "\n".join(speed)
        + f"\n\nThe {args.paragraphs} Multi30k paragraphs as each type; best of {args.rounds} "
        f"rounds. `{args.checkpoint}` ({tr.cfg.search_method}, beam {tr.cfg.beam}); {machine()}; "
        "torch threads: "
        f"default. `{' '.join([Path(sys.argv[0]).name, *sys.argv[1:]])}`\n"
    )
    print(body)
    if not args.no_append:
        append_section(TITLE, body)
        copy_newest(TITLE, "documents-table")


if __name__ == "__main__":
    main()
