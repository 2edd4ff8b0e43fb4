"""Decoding speed of NLLB-200- and M2M100-shaped models: mt against transformers and CTranslate2,
same weights.

    python benchmarks/m2m_speed.py --data ../shared/data [--shapes nllb m2m100]

No NLLB or M2M100 checkpoint can be downloaded here, so this builds models of their shapes with
random weights: nllb-200-distilled-600M's (d_model 1024, 12+12 layers, 16 heads, FFN 4096, ReLU,
pre-norm, 256,206 pieces) and m2m100_418M's (the same layers, 128,112 pieces), with their
tokenizers' layouts (NLLB's tokenizer.json and deu_Latn codes; M2M100's vocab.json and __de__
codes) around a SentencePiece model trained on Multi30k, and the rest of the vocabulary filler
pieces, which the output layer scores like any other. Then:

- mt runs it as a user would: `mt import` of the folder, `mt compile` (not timed), then Translator
  with --source-lang en --target-lang de (fp32; int8, the compiled step; int8 with --engine eager);
- transformers runs M2M100ForConditionalGeneration.generate with forced_bos_token_id;
- CTranslate2 runs `mt export --format ct2` of the checkpoint (CTranslate2's own converter with
  the vocabulary passed in: its M2M100 loader misses the language tokens under transformers 5),
  fp32 and int8, the target language as the target prefix.

Random weights pick any length, so </s> is kept from ever winning (its row of the tied output
layer points against a dimension the decoder's last layer norm holds at 100) and every system
writes the target language and then --steps pieces for every sentence. Beam 4 and greedy, batch
32, length penalty 0, --threads threads. Each timed run is a fresh process importing only its own
system's library (speed_workers.py); systems take turns over rounds and keep their fastest.
Output pieces are compared with mt fp32's.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
from opus_speed import run_systems, table
from results import append_section, commit, newest_run, write_table
from speed import machine

from mt_cli.decode.compiled import compile_checkpoint
from mt_cli.interop.ct2 import export_ct2
from mt_cli.interop.hf_import import import_hf
from mt_cli.model import checkpoint

# name -> (pieces, tokenizer flavour, source and target codes, their tokens)
SHAPES = {
    "nllb": (256_206, "nllb", ("eng_Latn", "deu_Latn"), ("eng_Latn", "deu_Latn")),
    "m2m100": (128_112, "m2m100", ("en", "de"), ("__en__", "__de__")),
}
SYSTEMS = {
    "mt fp32": ("mt", "imported.pt", "fp32", False, "auto"),
    "mt int8": ("mt", "imported.pt", "int8", False, "auto"),
    "mt int8, eager": ("mt", "imported.pt", "int8", False, "eager"),
    "HF generate fp32": ("hf", "hf", None, False, None),
    "CTranslate2 fp32": ("ct2", "ct2-fp32", None, False, None),
    "CTranslate2 int8": ("ct2", "ct2-int8", None, False, None),
}


def spm_model(lines: list[str]) -> bytes:
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=8000,
        model_type="bpe",
        minloglevel=2,
    )
    return model.getvalue()


def tokenizer_files(folder: Path, flavour: str, size: int, spm: bytes) -> None:
    """The flavour's tokenizer files, the vocabulary filled to `size` ids with filler pieces."""
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sentencepiece.bpe.model").write_bytes(spm)
    if flavour == "m2m100":
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_proto=spm)
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for i in range(sp.get_piece_size()):
            if not (sp.is_control(i) or sp.is_unknown(i)):
                vocab.setdefault(sp.id_to_piece(i), len(vocab))
        for i in range(size - 100 - 8 - len(vocab)):  # then 100 __xx__ tokens and 8 made-up words
            vocab[f"▁filler{i}"] = len(vocab)
        (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        tok = transformers.M2M100Tokenizer(
            str(folder / "vocab.json"), str(folder / "sentencepiece.bpe.model")
        )
        tok.save_pretrained(folder)
        return
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "NllbTokenizer"}))
    transformers.NllbTokenizer.from_pretrained(
        folder, extra_special_tokens=FAIRSEQ_LANGUAGE_CODES
    ).save_pretrained(folder)
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    used = len(data["model"]["vocab"]) + sum(
        t["id"] >= len(data["model"]["vocab"]) for t in data["added_tokens"]
    )
    for i in range(size - 2 - used):  # NLLB's model has 2 rows more than its tokenizer
        data["model"]["vocab"][f"▁filler{i}"] = used + i
    (folder / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def model_folder(
    folder: Path, shape: str, train_lines: list[str], small: bool = False, seed: int = 0
) -> None:
    import transformers

    size, flavour, _, _ = SHAPES[shape]
    tokenizer_files(folder, flavour, size, spm_model(train_lines))
    d, layers = (256, 2) if small else (1024, 12)
    cfg = transformers.M2M100Config(
        vocab_size=size,
        d_model=d,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=d // 64,
        decoder_attention_heads=d // 64,
        encoder_ffn_dim=4 * d,
        decoder_ffn_dim=4 * d,
        max_position_embeddings=1024,
        activation_function="relu",
        scale_embedding=True,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        **({"tokenizer_class": "NllbTokenizer"} if flavour == "nllb" else {}),
    )
    torch.manual_seed(seed)
    model = transformers.M2M100ForConditionalGeneration(cfg).eval()
    # </s>'s logit = 100 * -100: never chosen, so every system runs --steps steps
    with torch.no_grad():
        model.model.decoder.layer_norm.weight[0], model.model.decoder.layer_norm.bias[0] = (
            0.0,
            100.0,
        )
        model.model.shared.weight[
            2, 0
        ] = -100.0  # the one matrix of embeddings and output layer (tied)
    model.save_pretrained(folder)


def prepare(work: Path, shape: str, train_lines: list[str], small: bool) -> None:
    """The folder, mt's import of it, its compiled steps, and its CTranslate2 exports."""
    model_folder(work / "hf", shape, train_lines, small)
    import_hf(work / "hf", work / "imported.pt")
    for q in ("fp32", "int8"):  # what `mt compile` builds once; not timed, as a user's runs are not
        compile_checkpoint(work / "imported.pt", q)
    ckpt = checkpoint.load(work / "imported.pt")
    for q in ("fp32", "int8"):
        export_ct2(ckpt, work / f"ct2-{q}", None if q == "fp32" else "int8")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    # One batch of 32, 12 pieces each: a 600M-parameter model's beam-4 run takes minutes per system
    # on 2 cores.
    p.add_argument("--n", type=int, default=32, help="test2016 English sentences to translate")
    p.add_argument(
        "--steps",
        type=int,
        default=12,
        help="pieces written per sentence, the same for every system",
    )
    p.add_argument("--rounds", type=int, default=2, help="timed runs per system, the fastest kept")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument(
        "--no-append", action="store_true", help="print only; leave RESULTS.md and docs alone"
    )
    p.add_argument(
        "--small",
        action="store_true",
        help="2+2 layers of 256 (the same vocabulary): to try the script",
    )
    args = p.parse_args()
    if args.small and not args.no_append:
        sys.exit(
            "--small is for trying the script: add --no-append (its figures are not the shapes')"
        )
    multi30k = args.data / "multi30k"
    if not (multi30k / "test2016.en").exists():
        sys.exit(f"{multi30k}: no Multi30k here (test2016.en, train.en, train.de); pass --data")
    measured_commit = commit()
    lines = (multi30k / "test2016.en").read_text(encoding="utf-8").splitlines()[: args.n]
    sides = [
        (multi30k / f).read_text(encoding="utf-8").splitlines() for f in ("train.en", "train.de")
    ]
    train = [line for side in sides for line in side[::2]]
    bodies = []
    for shape in args.shapes:
        size, _, codes, tokens = SHAPES[shape]
        with tempfile.TemporaryDirectory() as tmp:
            args.work = Path(tmp)
            print(f"{shape}: building, importing, compiling and converting", flush=True)
            prepare(args.work, shape, train, args.small)
            extra = {"languages": list(codes), "language_tokens": list(tokens)}
            rows = run_systems(args, lines, SYSTEMS, "hf/sentencepiece.bpe.model", extra)
        where = f"{machine()}, {args.threads} threads, torch {torch.__version__}"
        bodies.append(
            "\n".join(
                [
                    "`benchmarks/m2m_speed.py`: a random-weight M2M100ForConditionalGeneration "
                    f"shaped as {shape} (d1024, "
                    f"12+12, 16 heads, FFN 4096, ReLU, pre-norm, {size:,} pieces), en -> de: as mt "
                    "imports it, as "
                    "transformers runs it (forced_bos_token_id) and as `mt export --format ct2` "
                    "writes it for CTranslate2; "
                    f"the first {args.n} lines of test2016.en in length-sorted batches of 32, the "
                    "target language and then "
                    f"{args.steps} pieces each (</s> kept from winning), length penalty 0, "
                    f"{args.rounds} rounds taking "
                    f"turns, each system in a fresh process of its own, fastest kept; {where}.\n",
                    *table(rows),
                ]
            )
        )
        print(bodies[-1], flush=True)
    if not args.no_append:
        body = "\n\n".join(bodies)
        when = append_section("NLLB- and M2M100-shaped decoding", body, measured_commit)
        write_table("m2m-speed-table", newest_run(when, body))


if __name__ == "__main__":
    main()
