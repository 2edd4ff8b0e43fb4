"""Translate a file with CTranslate2 as its user would: the whole-process peer of
`mt translate FILE`.

    python benchmarks/peers/ct2_translate.py CT2_FOLDER SRC OUT [--beam 5] [--batch 64] \\
        [--length-penalty 1]

CT2_FOLDER is `mt export --format ct2` output (it holds source.spm and target.spm). Imports
CTranslate2 and SentencePiece only. Batches are length-sorted, and each gets mt's length limit
(1.5 x the longest source in pieces + EOS, + 10), so both do the same work. Prints
{"load_s": ..., "decode_s": ...}: the model's load, then reading, tokenizing and translating.
"""

import argparse
import json
import os
import time

start = time.perf_counter()

import ctranslate2  # noqa: E402 (its import is part of the load)
import sentencepiece as spm  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("folder")
p.add_argument("src")
p.add_argument("out")
p.add_argument("--beam", type=int, default=5)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--length-penalty", type=float, default=1.0)  # CTranslate2's own default, as mt's
args = p.parse_args()

src = spm.SentencePieceProcessor(model_file=os.path.join(args.folder, "source.spm"))
tgt = spm.SentencePieceProcessor(model_file=os.path.join(args.folder, "target.spm"))
translator = ctranslate2.Translator(args.folder, device="cpu", intra_threads=os.cpu_count() or 1)
loaded = time.perf_counter()  # decoding's time includes tokenizing, as mt's does
with open(args.src, encoding="utf-8") as f:
    pieces = [src.encode(line, out_type=str) + ["</s>"] for line in f.read().splitlines()]
order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
out = [""] * len(pieces)
for start in range(0, len(order), args.batch):
    idx = order[start : start + args.batch]
    limit = int(max(len(pieces[i]) for i in idx) * 1.5) + 10
    results = translator.translate_batch(
        [pieces[i] for i in idx],
        beam_size=args.beam,
        max_decoding_length=limit,
        length_penalty=args.length_penalty,
    )
    for i, r in zip(idx, results):
        out[i] = tgt.decode_pieces(r.hypotheses[0])
done = time.perf_counter()
with open(args.out, "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in out))
print(json.dumps({"load_s": loaded - start, "decode_s": done - loaded}))
