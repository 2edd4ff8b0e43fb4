"""Decoding speed of an OPUS-MT-shaped model: mt against transformers and CTranslate2, same weights.

    python benchmarks/opus_speed.py --data ../shared/data

No OPUS-MT checkpoint can be downloaded here, so this builds one of the same shape as
Helsinki-NLP/opus-mt-en-de (d_model 512, 6+6 layers, 8 heads, FFN 2048, swish, 58,101 pieces,
scaled embeddings, sinusoidal positions, a final_logits_bias, pad = decoder start = the last id)
with random weights, saves it with save_pretrained as OPUS-MT's folders are laid out, and then:

- mt runs it as a user would: `mt import` of the folder, `mt compile` (not timed), then
  Translator (fp32, and int8 as `--precision int8` loads it: the compiled step; and int8 with
  `--engine eager`, uncompiled);
- transformers runs MarianMTModel.generate on the folder;
- CTranslate2 runs its own converter's output (`ct2-transformers-converter`, fp32 and int8).

Random weights pick any length, so </s> gets a bias of -1e4 and every system takes the same number
of decoder steps (--steps) for every sentence: mt's length limit (which counts its EOS step) and
transformers' max_new_tokens and CTranslate2's max_decoding_length are all --steps. Settings are
CTranslate2's own benchmark's: beam 4 (and greedy), batch 32, length penalty 0, here on --threads
threads. Each timed run is a fresh process importing only its own system's library
(speed_workers.py); systems take turns over rounds and keep their fastest. Output pieces are
compared with mt fp32's, position by position, over the steps every system produced.

Shortlist rows: `mt shortlist` over Multi30k's en-de training pairs (the defaults' sizes), and the
same shortlist as CTranslate2's vmap.txt. With random weights the model's favourite pieces are
mostly ones no source allows, so these rows' pieces differ from mt fp32's by design: they show
speed only (test2016 BLEU with and without a shortlist is in speed.py's table).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from results import append_section, commit, newest_run, write_table
from speed import in_worker, machine

from mt_cli.config import TokenizerConfig, TrainConfig
from mt_cli.data.tokenizer import train_sentencepiece
from mt_cli.decode.compiled import compile_checkpoint
from mt_cli.interop.ct2 import vocabulary_map
from mt_cli.interop.hf_import import import_hf
from mt_cli.model import checkpoint
from mt_cli.tools.add_shortlist import add_shortlist

VOCAB = 58_101  # opus-mt-en-de's vocab_size
BATCH = 32
# name -> (worker family, folder or checkpoint under the work folder, mt precision, CTranslate2
# vmap, mt's decode.engine). mt's default (auto) runs the compiled step, which prepare() builds as
# `mt compile` does.
SYSTEMS = {
    "mt fp32": ("mt", "imported.pt", "fp32", False, "auto"),
    "mt int8": ("mt", "imported.pt", "int8", False, "auto"),
    "mt int8, eager": ("mt", "imported.pt", "int8", False, "eager"),
    "HF generate fp32": ("hf", "opus", None, False, None),
    "CTranslate2 fp32": ("ct2", "ct2-fp32", None, False, None),
    "CTranslate2 int8": ("ct2", "ct2-int8", None, False, None),
    # The vocabulary shortlist (`mt shortlist` over Multi30k's en-de training pairs), and the same
    # one as CTranslate2's vocabulary map.
    "mt fp32, shortlist": ("mt", "listed.pt", "fp32", False, "auto"),
    "mt int8, shortlist": ("mt", "listed.pt", "int8", False, "auto"),
    "CTranslate2 fp32, vmap": ("ct2", "ct2-fp32", None, True, None),
    "CTranslate2 int8, vmap": ("ct2", "ct2-int8", None, True, None),
}


def opus_folder(folder: Path, train_lines: list[str], seed: int = 0) -> None:
    """A random-weight MarianMTModel shaped as opus-mt-en-de, with OPUS-MT's tokenizer files.
    SentencePiece is trained on real text (8k pieces: Multi30k has too few words for 58k); the
    rest of vocab.json is filler pieces, which the output layer scores like any other."""
    import transformers

    spm = train_sentencepiece(train_lines, TokenizerConfig(vocab_size=8000))
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_proto=spm)
    pieces = [
        sp.id_to_piece(i)
        for i in range(sp.get_piece_size())
        if not (sp.is_control(i) or sp.is_unknown(i))
    ]
    vocab = ["</s>", "<unk>", *pieces]
    vocab += [f"▁filler{i}" for i in range(VOCAB - 1 - len(vocab))] + ["<pad>"]
    cfg = transformers.MarianConfig(
        vocab_size=VOCAB,
        decoder_vocab_size=VOCAB,
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        max_position_embeddings=512,
        activation_function="swish",
        pad_token_id=VOCAB - 1,
        eos_token_id=0,
        decoder_start_token_id=VOCAB - 1,
        forced_eos_token_id=0,
        scale_embedding=True,
        dropout=0.1,
        share_encoder_decoder_embeddings=True,
    )
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(cfg).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)
        # <pad>, as OPUS-MT's converter writes it
        model.final_logits_bias[0, VOCAB - 1] = float("-inf")
        model.final_logits_bias[
            0, 0
        ] = -1e4  # </s>: never chosen, so every system runs --steps steps
    model.save_pretrained(folder)
    (folder / "source.spm").write_bytes(spm)
    (folder / "target.spm").write_bytes(spm)
    (folder / "vocab.json").write_text(
        json.dumps({p: i for i, p in enumerate(vocab)}), encoding="utf-8"
    )
    tc = {"unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>", "separate_vocabs": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(tc), encoding="utf-8")


def prepare(work: Path, train_lines: list[str], multi30k: Path) -> None:
    """The folder, mt's import of it with and without a shortlist, and CTranslate2's conversions
    of it (its converter, run as an OPUS-MT user runs it), with the shortlist as their vmap.txt."""
    opus_folder(work / "opus", train_lines)
    import_hf(work / "opus", work / "imported.pt")
    add_shortlist(
        work / "imported.pt",
        multi30k / "train.en",
        multi30k / "train.de",
        work / "listed.pt",
        TrainConfig.shortlist_per_source,
        TrainConfig.shortlist_frequent,
        log=lambda _: None,
    )
    vmap = vocabulary_map(checkpoint.load(work / "listed.pt"))
    for name in ("imported.pt", "listed.pt"):
        # what `mt compile` builds once; not timed, as a user's runs are not
        for q in (
            "fp32",
            "int8",
        ):
            compile_checkpoint(work / name, q)
    converter = Path(sys.executable).parent / "ct2-transformers-converter"
    for q in ("fp32", "int8"):
        cmd = [
            str(converter),
            "--model",
            str(work / "opus"),
            "--output_dir",
            str(work / f"ct2-{q}"),
        ]
        done = subprocess.run(
            cmd + ([] if q == "fp32" else ["--quantization", "int8"]),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.exit(f"ct2-transformers-converter failed:\n{done.stderr[-3000:]}")
        for name in ("source.spm", "target.spm"):  # the worker reads them from the model folder
            (work / f"ct2-{q}" / name).write_bytes((work / "opus" / name).read_bytes())
        # read only with use_vmap
        (work / f"ct2-{q}" / "vmap.txt").write_text(vmap, encoding="utf-8")


def run_systems(
    args,
    lines: list[str],
    systems: dict = SYSTEMS,
    spm: str = "opus/source.spm",
    extra: dict | None = None,
) -> list[dict]:
    """Every system on the same length-sorted batches of BATCH, taking turns over rounds; `extra`:
    more fields for every job (an M2M100 model's languages). Where the target language is forced
    first (`extra` has languages), mt's limit is one more: every system then writes the language
    and --steps pieces in --steps + 1 decoder steps (mt's first reads </s> and the language at once,
    and its last writes the </s> it ends with)."""
    offset = args.steps + (1 if extra and extra.get("languages") else 0)
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(args.work / spm))
    order = sorted(range(len(lines)), key=lambda i: len(sp.encode(lines[i])))
    batches = [[lines[i] for i in order[k : k + BATCH]] for k in range(0, len(order), BATCH)]
    rows = []
    for beam in (4, 1):
        best: dict[str, tuple[float, list[list[str]]]] = {}
        for _ in range(args.rounds):
            for name, (family, model, precision, vmap, engine) in systems.items():
                job = {
                    "kind": "decode",
                    "family": family,
                    "beam": beam,
                    "batch": BATCH,
                    "threads": args.threads,
                    "batches": batches,
                    "limits": [args.steps] * len(batches),
                    "model": str(args.work / model),
                    "precision": precision,
                    "length_penalty": 0.0,
                    "pieces": True,
                    "vmap": vmap,
                    "mt": {"max_len_ratio": 1e-9, "max_len_offset": offset, "engine": engine},
                    **(extra or {}),
                }
                got = in_worker(args, job)
                out = [p for batch in got["out"] for p in batch]
                if name not in best or got["seconds"] < best[name][0]:
                    best[name] = (got["seconds"], out)
        ref = best["mt fp32"][1]
        for name, (seconds, out) in best.items():
            same = sum(a == b for x, y in zip(out, ref) for a, b in zip(x, y))
            compared = sum(min(len(x), len(y)) for x, y in zip(out, ref))
            rows.append(
                {
                    "system": name,
                    "beam": beam,
                    "sent/s": len(lines) / seconds,
                    "steps/s": len(lines) * args.steps / seconds,
                    "pieces": sum(map(len, out)) / len(out),
                    "same": same / compared,
                }
            )
            print(f"  beam {beam} {name}: {len(lines) / seconds:.1f} sent/s", flush=True)
    return rows


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| system | beam | sent/s | decoder steps/s (x sentences) | pieces out per sentence "
        "| pieces = mt fp32's | x HF generate | x CTranslate2 same precision |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        same_beam = {x["system"]: x for x in rows if x["beam"] == r["beam"]}
        # Against CTranslate2 at the same precision: with its whole vocabulary, or for a shortlist
        # row with the same shortlist as its vmap.
        peer_name = (
            r["system"]
            .replace("mt ", "CTranslate2 ")
            .replace("shortlist", "vmap")
            .replace(", eager", "")
        )
        peer = same_beam.get(peer_name)
        vs_ct2 = (
            f"{r['sent/s'] / peer['sent/s']:.2f}" if peer and r["system"].startswith("mt ") else "-"
        )
        lines.append(
            f"| {r['system']} | {r['beam']} | {r['sent/s']:.1f} | {r['steps/s']:.0f} | "
            f"{r['pieces']:.1f} | {100 * r['same']:.1f}% | "
            f"{r['sent/s'] / same_beam['HF generate fp32']['sent/s']:.2f} | {vs_ct2} |"
        )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--n", type=int, default=500, help="test2016 English sentences to translate")
    p.add_argument(
        "--steps",
        type=int,
        default=32,
        help="decoder steps per sentence, the same for every system",
    )
    p.add_argument("--rounds", type=int, default=2, help="timed runs per system, the fastest kept")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument(
        "--no-append",
        action="store_true",
        help="print only; leave RESULTS.md and docs/speed.md alone",
    )
    args = p.parse_args()
    multi30k = args.data / "multi30k"
    if not (multi30k / "test2016.en").exists():
        sys.exit(f"{multi30k}: no Multi30k here (test2016.en, train.en, train.de); pass --data")
    measured_commit = commit()
    lines = (multi30k / "test2016.en").read_text(encoding="utf-8").splitlines()[: args.n]
    # Every other line of each side: text enough for 8k pieces, and quicker to train on.
    sides = [
        (multi30k / f).read_text(encoding="utf-8").splitlines() for f in ("train.en", "train.de")
    ]
    train = [line for side in sides for line in side[::2]]
    with tempfile.TemporaryDirectory() as tmp:
        args.work = Path(tmp)
        prepare(args.work, train, multi30k)
        rows = run_systems(args, lines)
    where = f"{machine()}, {args.threads} threads, torch {torch.__version__}"
    body = "\n".join(
        [
            "`benchmarks/opus_speed.py`: a random-weight MarianMTModel shaped as opus-mt-en-de "
            "(d512, 6+6, FFN "
            f"2048, swish, {VOCAB:,} pieces), as mt imports it, as transformers runs it and as "
            "CTranslate2's converter "
            f"writes it; the first {args.n} lines of test2016.en in length-sorted batches of "
            f"{BATCH}, {args.steps} "
            f"decoder steps each (</s> biased away), length penalty 0, {args.rounds} rounds taking "
            "turns, each system "
            f"in a fresh process of its own, fastest kept; {where}.\n",
            *table(rows),
        ]
    )
    print(body)
    if not args.no_append:
        when = append_section("OPUS-MT-shaped decoding", body, measured_commit)
        write_table("opus-speed-table", newest_run(when, body))


if __name__ == "__main__":
    main()
