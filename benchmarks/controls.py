"""What each decoding control costs against plain beam search, on real data.

    python benchmarks/controls.py --checkpoint RUN/best.pt --second-checkpoint OTHER/best.pt \\
        --data ../shared/data/multi30k

test2016 de→en through the Translator, beam 5 unless the control says otherwise: plain; jsonl
with a 5-best list; jsonl with token scores and alignment; `score` (forced decoding of plain's
output); a target prefix per line (the reference's first two words, as an interactive
translator would type them); the 50-term glossary of benchmarks/terminology.py; no repeated
trigram; sampling (top-k 10); an ensemble of the two checkpoints. The controls take turns for
--rounds rounds and each keeps its fastest. Sentences/s, the ratio to plain, and BLEU of the best
output (where there is one) are printed and appended to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable
from pathlib import Path

import sacrebleu
from quality import append_section  # this folder's results helpers
from terminology import choose

from mt_cli import Translator
from mt_cli.config import OutputConfig
from mt_cli.tools.translate_files import translate_stream


def controls(
    args: argparse.Namespace, src: list[str], ref: list[str]
) -> dict[str, Callable[[], list[str] | None]]:
    tr = Translator.load(args.checkpoint, "cpu", beam=5)
    plain = tr.translate(src)
    glossary = choose(tr, args.data, 50)
    terms = [glossary.terms_for(line) for line in src]
    prefixes = [" ".join(r.split()[:2]) for r in ref]

    def jsonl(output: OutputConfig) -> Callable[[], None]:
        return lambda: (translate_stream(tr, src, io.StringIO(), output), None)[1]

    runs: dict[str, Callable[[], list[str] | None]] = {
        "plain beam 5": lambda: tr.translate(src),
        "jsonl, --nbest 5": jsonl(OutputConfig("jsonl", nbest=5)),
        "jsonl, --token-scores --alignment": jsonl(
            OutputConfig("jsonl", token_scores=True, alignment=True)
        ),
        "score (forced decoding of plain's output)": lambda: (tr.score(src, plain), None)[1],
        "--prefix-file (reference's first 2 words)": lambda: [
            h[0].text for h in tr.search(src, prefixes=prefixes)
        ],
        "--glossary (50 terms)": lambda: [h[0].text for h in tr.search(src, constraints=terms)],
        "--no-repeat-ngram 3": lambda: tr.with_options(no_repeat_ngram=3).translate(src),
        "sampling, --sampling-topk 10": lambda: tr.with_options(sampling_topk=10, seed=1).translate(
            src
        ),
    }
    if args.second_checkpoint is not None:
        pair = Translator.load([args.checkpoint, args.second_checkpoint], "cpu", beam=5)
        other = Translator.load(args.second_checkpoint, "cpu", beam=5)
        runs["second checkpoint alone"] = lambda: other.translate(src)
        runs["ensemble of the 2 checkpoints"] = lambda: pair.translate(src)
    return runs


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--second-checkpoint", type=Path, help="for the ensemble (the same tokenizer)")
    p.add_argument("--data", type=Path, required=True, help="the Multi30k folder")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    src = (args.data / "test2016.de").read_text(encoding="utf-8").splitlines()
    ref = (args.data / "test2016.en").read_text(encoding="utf-8").splitlines()
    runs = controls(args, src, ref)
    best: dict[str, tuple[float, list[str] | None]] = {}
    for _ in range(args.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            out = run()
            took = time.perf_counter() - start
            best[name] = (min(took, best[name][0]) if name in best else took, out)
            print(f"{name}: {len(src) / took:.1f} sent/s", flush=True)
    base = best["plain beam 5"][0]

    def row(name: str, seconds: float, out: list[str] | None) -> str:
        bleu = f"{sacrebleu.corpus_bleu(out, [ref]).score:.2f}" if out is not None else "-"
        return f"| {name} | {len(src) / seconds:.1f} | {base / seconds:.2f}x | {bleu} |"

    rows = [row(name, seconds, out) for name, (seconds, out) in best.items()]
    body = (
        "| control | sent/s | vs plain | BLEU |\n|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\n{len(src)} lines of "
        f"test2016 de→en, `{args.checkpoint}`"
        + (f" and `{args.second_checkpoint}`" if args.second_checkpoint else "")
        + f", best of {args.rounds} alternating rounds in one process. The prefix row's BLEU is "
        "helped by the "
        f"reference words it is given.\n\n`python benchmarks/controls.py {' '.join(_argv(args))}`\n"
    )
    print(body)
    if not args.no_append:
        append_section("Decoding controls", body)


def _argv(args: argparse.Namespace) -> list[str]:
    out = ["--checkpoint", str(args.checkpoint), "--data", str(args.data)]
    return out + (
        ["--second-checkpoint", str(args.second_checkpoint)] if args.second_checkpoint else []
    )


if __name__ == "__main__":
    main()
