"""Translate a file with Hugging Face transformers as its user would: the whole-process peer of
`mt translate FILE`.

    python benchmarks/peers/hf_translate.py HF_FOLDER SRC OUT [--beam 5] [--batch 64]

HF_FOLDER is `mt export --format hf` output. Imports torch and transformers only. Batches are
length-sorted, and each gets mt's length limit (1.5 x the longest source in tokens + EOS, + 10),
so both do the same work.
"""

import argparse

import torch
import transformers

p = argparse.ArgumentParser()
p.add_argument("folder")
p.add_argument("src")
p.add_argument("out")
p.add_argument("--beam", type=int, default=5)
p.add_argument("--batch", type=int, default=64)
args = p.parse_args()

tok = transformers.MarianTokenizer.from_pretrained(args.folder)
model = transformers.MarianMTModel.from_pretrained(args.folder).eval()
with open(args.src, encoding="utf-8") as f:
    lines = f.read().splitlines()
lengths = [len(ids) for ids in tok(lines)["input_ids"]]  # EOS included
order = sorted(range(len(lines)), key=lambda i: lengths[i])
out = [""] * len(lines)
for start in range(0, len(order), args.batch):
    idx = order[start : start + args.batch]
    enc = tok([lines[i] for i in idx], return_tensors="pt", padding=True)
    limit = int(max(lengths[i] for i in idx) * 1.5) + 10
    with torch.inference_mode():
        ids = model.generate(
            **enc,
            num_beams=args.beam,
            do_sample=False,
            early_stopping=True,
            length_penalty=1.0,
            max_new_tokens=limit,
        )
    for i, text in zip(idx, tok.batch_decode(ids, skip_special_tokens=True)):
        out[i] = text
with open(args.out, "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in out))
