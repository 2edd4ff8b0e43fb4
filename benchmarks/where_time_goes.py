"""Where the time goes: torch profiler tables for mt training steps and one beam-5 batch on
Multi30k.

python benchmarks/where_time_goes.py RUN/best.pt [DATA_DIR]
"""

import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from mt_cli.config import DecodeConfig
from mt_cli.data.collate import collate
from mt_cli.data.pairs import Pairs, make_batches
from mt_cli.decode.search import search_ids
from mt_cli.model import checkpoint
from mt_cli.model.loss import label_smoothed_loss

ck = checkpoint.load(sys.argv[1])
D = sys.argv[2] if len(sys.argv) > 2 else "../shared/data/multi30k"
src = open(f"{D}/train.de").read().splitlines()[:5000]
tgt = open(f"{D}/train.en").read().splitlines()[:5000]
pairs = Pairs(ck.tokenizer.encode_src(src), ck.tokenizer.encode_tgt(tgt))
batches = make_batches(pairs.src_lens, pairs.tgt_lens, 2048, seed=0)[:8]
model = ck.build_model().train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)


def step(b):
    s, ti, to = collate(*pairs.take(b), model.start_token)
    loss = label_smoothed_loss(model(s, ti), to, 0.1)[0]
    n = int((to != 0).sum())
    (loss / n).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return n


for b in batches[:2]:
    step(b)
t = time.perf_counter()
n = sum(step(b) for b in batches[2:6])
print(f"train: {n / (time.perf_counter() - t):.0f} tgt tok/s")
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for b in batches[6:8]:
        step(b)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
model.eval()
lines = open(f"{D}/test2016.de").read().splitlines()[:128]
ids = ck.tokenizer.encode_src(lines)
cfg = DecodeConfig(beam=5, batch_size=64)
search_ids(model, ids[:64], cfg)
t = time.perf_counter()
out = [h[0].tokens for h in search_ids(model, ids, cfg)]
dt = time.perf_counter() - t
print(f"beam5: {len(ids) / dt:.1f} sent/s, {sum(len(o) + 1 for o in out) / dt:.0f} tok/s")
with profile(activities=[ProfilerActivity.CPU]) as prof:
    search_ids(model, ids[:64], cfg)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
