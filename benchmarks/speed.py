"""Speed of mt against Hugging Face transformers and CTranslate2 on the same weights, in one run.

    python benchmarks/speed.py --checkpoint RUN/best.pt --src-file ../shared/data/multi30k/test2016.de \\
        --ref-file ../shared/data/multi30k/test2016.en --train-src ../shared/data/multi30k/train.de \\
        --train-tgt ../shared/data/multi30k/train.en

Decoding: every system translates the same sentences (the first --n lines) with batches of 64
length-sorted sentences, beam 5 and greedy, the same length limit (mt's, from the checkpoint's decode config) and length
penalty 1.0; we report sentences/s, target tokens/s (SentencePiece pieces of the output + EOS,
counted the same way for every system) and BLEU, so that a fast path that loses quality shows it.
Each timed run is a process of its own (once CTranslate2 has run in a process, PyTorch there is
25% slower); the systems take turns for --rounds rounds and each keeps its fastest run, so that
the machine's drift over minutes does not land on one system only.
Training: target tokens/s of mt's training step and of MarianMTModel built from the same config
as Seq2SeqTrainer runs it (its own forward, LabelSmoother(0.1), fused AdamW), with its sdpa and its
eager attention, on the same batches, fp32 and bf16 autocast, all taking turns step by step, and
the model FLOPs utilisation
of each against a large matrix product timed in the same run. Memory: peak RSS of `mt translate`
on a 10k- and a 100k-line file. Thread count is the same for all (--threads).

The table is printed and appended to benchmarks/RESULTS.md; nothing is typed in by hand.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import sacrebleu
import torch
from quality import README, RESULTS, commit, replace_section  # this folder's results helpers
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.data.collate import collate
from mt_cli.data.pairs import Pairs, make_batches
from mt_cli.data.tokenizer import PAD
from mt_cli.decode.search import max_lengths
from mt_cli.decode.translator import Translator
from mt_cli.device import autocast
from mt_cli.files import atomic_write_text
from mt_cli.interop import export
from mt_cli.interop.marian import marian_config, to_marian_id
from mt_cli.model import checkpoint
from mt_cli.model.loss import output_layer_loss
from mt_cli.model.transformer import build_model
from mt_cli.train.throughput import linear_flops, matmul_peak

BATCH = 64
PARTS = ["decoding", "training", "rss"]


def timed(fn: Callable[[], list[str]]) -> tuple[list[str], float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def max_new_tokens(sp, lines: list[str], cfg: DecodeConfig) -> int:
    """mt's limit (search.max_lengths) for the longest source of a batch, for systems that take one per batch."""
    return int(max_lengths(torch.tensor([len(sp.encode(line)) + 1 for line in lines]), cfg, limit=10**6).max())


def length_sorted_batches(sp, lines: list[str]) -> list[list[int]]:
    order = sorted(range(len(lines)), key=lambda i: len(sp.encode(lines[i])))
    return [order[i : i + BATCH] for i in range(0, len(order), BATCH)]


def hf_decoder(hf_dir: Path, sp, beam: int, cfg: DecodeConfig) -> Callable[[list[str]], list[str]]:
    import transformers

    tok = transformers.MarianTokenizer.from_pretrained(hf_dir)
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()

    def run(lines: list[str]) -> list[str]:
        out = [""] * len(lines)
        for idx in length_sorted_batches(sp, lines):
            batch = [lines[i] for i in idx]
            enc = tok(batch, return_tensors="pt", padding=True)
            with torch.inference_mode():
                ids = model.generate(
                    **enc, num_beams=beam, do_sample=False, early_stopping=True, length_penalty=1.0,
                    max_new_tokens=max_new_tokens(sp, batch, cfg),
                )  # fmt: skip
            for i, text in zip(idx, tok.batch_decode(ids, skip_special_tokens=True)):
                out[i] = " ".join(text.split())
        return out

    return run


def ct2_decoder(ct2_dir: Path, sp, beam: int, threads: int, cfg: DecodeConfig) -> Callable[[list[str]], list[str]]:
    import ctranslate2

    translator = ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=threads, inter_threads=1)

    def run(lines: list[str]) -> list[str]:
        out = [""] * len(lines)
        for idx in length_sorted_batches(sp, lines):
            batch = [lines[i] for i in idx]
            results = translator.translate_batch(
                [sp.encode(line, out_type=str) + ["</s>"] for line in batch], beam_size=beam,
                length_penalty=1.0, max_decoding_length=max_new_tokens(sp, batch, cfg), max_batch_size=BATCH,
            )  # fmt: skip
            for i, r in zip(idx, results):
                out[i] = " ".join(sp.decode_pieces(r.hypotheses[0]).split())
        return out

    return run


def mt_decoder(args, beam: int, precision: str) -> Callable[[list[str]], list[str]]:
    """The model exactly as `mt translate --precision P` loads it."""
    overrides = {"beam": beam, "batch_size": BATCH, "length_penalty": 1.0, "precision": precision}
    return Translator.load(args.checkpoint, "cpu", **overrides).translate


SYSTEMS = ["mt fp32", "mt int8", "mt bf16", "HF generate fp32", "CTranslate2 fp32", "CTranslate2 int8"]


def make_decoder(name: str, beam: int, args, ckpt) -> Callable[[list[str]], list[str]]:
    if name.startswith("mt "):
        return mt_decoder(args, beam, name.split()[1])
    if name.startswith("HF "):
        return hf_decoder(args.work / "hf", ckpt.tokenizer.tgt, beam, ckpt.config.decode)
    folder = args.work / ("ct2-int8" if name.endswith("int8") else "ct2-fp32")
    return ct2_decoder(folder, ckpt.tokenizer.src, beam, args.threads, ckpt.config.decode)


def worker(args) -> None:
    """One timed run of one system in a process of its own: after CTranslate2 has run in a process,
    PyTorch decoding in that same process measured 25% slower (134 -> 101 sent/s), for good."""
    ckpt = checkpoint.load(args.checkpoint)
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    run = make_decoder(args.worker, args.beam, args, ckpt)
    run(lines[:BATCH])  # warm-up: allocators, kernels, lazy imports
    out, seconds = timed(lambda: run(lines))
    atomic_write_text(args.result, json.dumps({"seconds": seconds, "out": out}))


def timed_in_child(args, name: str, beam: int) -> tuple[float, list[str]]:
    result = args.work / "result.json"
    cmd = [sys.executable, __file__, "--worker", name, "--beam", str(beam), "--result", str(result),
           "--work", str(args.work), "--checkpoint", str(args.checkpoint), "--src-file", str(args.src_file),
           "--n", str(args.n), "--threads", str(args.threads)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got = json.loads(result.read_text(encoding="utf-8"))
    return got["seconds"], got["out"]


def decoding_rows(args, ckpt, lines: list[str], refs: list[str]) -> list[dict]:
    sp = ckpt.tokenizer.tgt
    export(ckpt, args.work / "hf", "hf")
    for q in ("fp32", "int8"):
        export(ckpt, args.work / f"ct2-{q}", "ct2", None if q == "fp32" else q)
    rows = []
    for beam in (5, 1):
        # Rounds take turns through the systems and each keeps its fastest: this machine's speed
        # drifts by 10-20% over minutes, and a drift should not land on one system only.
        best: dict[str, tuple[float, list[str]]] = {}
        for _ in range(args.rounds):
            for name in SYSTEMS:
                seconds, out = timed_in_child(args, name, beam)
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, out)
        for name, (seconds, out) in best.items():
            tokens = sum(len(ids) + 1 for ids in sp.encode(out))
            bleu = sacrebleu.corpus_bleu(out, [refs]).score
            rows.append({"system": name, "beam": beam, "sent/s": len(lines) / seconds, "tok/s": tokens / seconds,
                         "BLEU": bleu, "seconds": seconds})  # fmt: skip
            print(f"  decode beam {beam} {name}: {len(lines) / seconds:.1f} sent/s, BLEU {bleu:.2f}", flush=True)
    return rows


def training_batches(ckpt, args) -> tuple[Pairs, list[list[int]]]:
    src = args.train_src.read_text(encoding="utf-8").splitlines()[:20_000]
    tgt = args.train_tgt.read_text(encoding="utf-8").splitlines()[:20_000]
    pairs = Pairs(ckpt.tokenizer.encode_src(src), ckpt.tokenizer.encode_tgt(tgt))
    batches = make_batches(pairs.src_lens, pairs.tgt_lens, ckpt.config.train.batch_tokens, seed=0)
    return pairs, batches[: args.train_steps + 3]


def mt_trainer(ckpt) -> tuple[torch.nn.Module, Callable]:
    """mt's training step: logits at real target tokens only, its label-smoothed loss, mean per token."""
    torch.manual_seed(0)
    model = build_model(ckpt.config.model).train()

    def loss(src, tgt_in, tgt_out):
        keep = tgt_out != PAD
        h = model.hidden(src, tgt_in, keep)
        return output_layer_loss(h, model.output_projection.weight, tgt_out[keep], 0.1) / keep.sum()

    return model, loss


def marian_trainer(ckpt, attention: str) -> tuple[torch.nn.Module, Callable]:
    """MarianMTModel as Seq2SeqTrainer trains it: its own forward, LabelSmoother(0.1) on the logits."""
    import transformers
    from transformers.trainer_pt_utils import LabelSmoother

    fields, _ = marian_config(ckpt)
    fields = {k: v for k, v in fields.items() if k not in ("architectures", "model_type")}
    torch.manual_seed(0)
    config = transformers.MarianConfig(**fields, attn_implementation=attention)
    model = transformers.MarianMTModel(config).train()
    smoother, v = LabelSmoother(epsilon=0.1), ckpt.config.model.tgt_vocab_size

    def loss(src, tgt_in, tgt_out):
        # mt ids -> Marian ids (PAD last), so both models see the same tokens.
        s, ti, to = (to_marian_id(x, v) for x in (src, tgt_in, tgt_out))
        out = model(input_ids=s, attention_mask=src != PAD, decoder_input_ids=ti)
        return smoother(out, to.masked_fill(tgt_out == PAD, smoother.ignore_index))

    return model, loss


TRAINERS = {
    "mt": mt_trainer,
    "MarianMTModel (sdpa)": lambda ckpt: marian_trainer(ckpt, "sdpa"),
    "MarianMTModel (eager)": lambda ckpt: marian_trainer(ckpt, "eager"),
}


class Trainer:
    """One system at one precision: a fresh model, fused AdamW, and the time and tokens of its steps."""

    def __init__(self, name: str, precision: str, ckpt) -> None:
        self.name, self.precision, self.ckpt = name, precision, ckpt
        self.model, self.loss_of = TRAINERS[name](ckpt)
        # Fused AdamW: mt trains with it, and it is Seq2SeqTrainer's default on torch >= 2.8.
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=True)
        self.seconds = self.tokens = self.flops = 0.0

    def step(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, timed: bool) -> None:
        start = time.perf_counter()
        with autocast(self.precision == "bf16", torch.device("cpu")):
            loss = self.loss_of(src, tgt_in, tgt_out)
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optim.step()
        if timed:
            self.seconds += time.perf_counter() - start
            n_tgt, n_src = int((tgt_out != PAD).sum()), int((src != PAD).sum())
            self.tokens += n_tgt
            model = self.model if self.name == "mt" else self.model.model
            m = self.ckpt.config.model  # the output layer is d_model x vocab in both systems
            self.flops += linear_flops(model, n_src, n_tgt, out=m.d_model * m.tgt_vocab_size)


def training_rows(args, ckpt) -> tuple[list[dict], dict[str, float]]:
    """All systems step in turn, batch by batch, so that the machine's drift (10-20% over minutes
    here) lands on every system alike; the first 3 steps of each warm up and are not timed."""
    pairs, batches = training_batches(ckpt, args)
    peaks = {"fp32": matmul_peak(torch.float32), "bf16": matmul_peak(torch.bfloat16)}
    trainers = [Trainer(name, precision, ckpt) for precision in ("fp32", "bf16") for name in TRAINERS]
    for i, batch in enumerate(batches):
        src, tgt_in, tgt_out = collate(*pairs.take(batch), PAD)
        for trainer in trainers:
            trainer.step(src, tgt_in, tgt_out, timed=i >= 3)
    rows = []
    for t in trainers:
        rows.append({"system": t.name, "precision": t.precision, "tok/s": t.tokens / t.seconds,
                     "MFU": t.flops / t.seconds / peaks[t.precision]})  # fmt: skip
        print(f"  train {t.precision} {t.name}: {t.tokens / t.seconds:.0f} tgt tok/s", flush=True)
    return rows, peaks


def high_water_kb(pid: int) -> int:
    """The process's own peak RSS (VmHWM). The child's getrusage figure is no good here: it counts
    the pages the child shared with this (large) parent between fork and exec."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # it has just exited
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def rss_rows(args, lines: list[str], work: Path) -> list[dict]:
    """Peak RSS of `mt translate` (greedy) on files of growing length; input is streamed in chunks."""
    rows = []
    for n in args.rss_lines:
        path = work / f"input-{n}.txt"
        path.write_text("".join(lines[i % len(lines)] + "\n" for i in range(n)), encoding="utf-8")
        cmd = [sys.executable, "-m", "mt_cli", "translate", "--checkpoint", str(args.checkpoint), str(path),
               "--output", str(work / f"output-{n}.txt"), "--beam", "1", "--device", "cpu"]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.Popen(cmd)
        peak_kb = 0
        while proc.poll() is None:
            peak_kb = max(peak_kb, high_water_kb(proc.pid))
            time.sleep(0.2)
        if proc.returncode != 0:
            sys.exit(f"mt translate failed on {path}")
        rows.append({"lines": n, "peak RSS MB": peak_kb / 1024, "seconds": time.perf_counter() - start})
        print(f"  translate {n} lines: peak RSS {peak_kb / 1024:.0f} MB", flush=True)
    return rows


def report(args, decoding: list[dict], training: list[dict], peaks: dict, rss: list[dict]) -> str:
    machine = f"{os.cpu_count()} CPUs, {args.threads} threads, torch {torch.__version__}"
    lines = [
        f"`benchmarks/speed.py`: {args.checkpoint.name} of {args.checkpoint.parent.name}, first {args.n} lines "
        f"of {args.src_file.name}, batches of {BATCH} sentences; {machine}.\n",
        "| decoding | beam | sent/s | tgt tok/s | BLEU | x HF generate | x CTranslate2 int8 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in decoding:
        same_beam = {d["system"]: d for d in decoding if d["beam"] == r["beam"]}
        hf, ct2 = same_beam["HF generate fp32"]["tok/s"], same_beam["CTranslate2 int8"]["tok/s"]
        lines.append(f"| {r['system']} | {r['beam']} | {r['sent/s']:.1f} | {r['tok/s']:.0f} | {r['BLEU']:.2f} "
                     f"| {r['tok/s'] / hf:.2f} | {r['tok/s'] / ct2:.2f} |")  # fmt: skip
    lines += ["", "| training | precision | tgt tok/s | MFU | x faster MarianMTModel |", "|---|---|---|---|---|"]
    for r in training:
        # Against the faster of the two Marian attention kernels at this precision.
        marian = max(t["tok/s"] for t in training if t["system"] != "mt" and t["precision"] == r["precision"])
        lines.append(f"| {r['system']} | {r['precision']} | {r['tok/s']:.0f} | {100 * r['MFU']:.1f}% "
                     f"| {r['tok/s'] / marian:.2f} |")  # fmt: skip
    lines.append(f"\nMFU is against a 2048x2048 matrix product timed in the same run: "
                 f"fp32 {peaks['fp32'] / 1e9:.0f} GFLOP/s, bf16 {peaks['bf16'] / 1e9:.0f} GFLOP/s.\n")  # fmt: skip
    if rss:
        lines += ["| `mt translate --beam 1` | lines | peak RSS MB | seconds |", "|---|---|---|---|"]
        lines += [f"| | {r['lines']} | {r['peak RSS MB']:.0f} | {r['seconds']:.0f} |" for r in rss]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--src-file", type=Path, help="sentences to translate")
    p.add_argument("--ref-file", type=Path, help="their references, for BLEU")
    p.add_argument("--train-src", type=Path)
    p.add_argument("--train-tgt", type=Path)
    p.add_argument("--n", type=int, default=1000, help="sentences to translate")
    p.add_argument("--train-steps", type=int, default=30, help="timed training steps per system")
    p.add_argument("--rounds", type=int, default=3, help="decoding: timed runs per system, the fastest kept")
    p.add_argument("--rss-lines", type=int, nargs="*", default=[10_000, 100_000])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--parts", nargs="+", choices=PARTS, default=PARTS, help="run only these (implies --no-append)")
    p.add_argument("--no-append", action="store_true", help="print only; leave RESULTS.md alone")
    p.add_argument("--readme", action="store_true", help="only copy the newest RESULTS.md run into the README")
    p.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    p.add_argument("--beam", type=int, help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.readme:
        return update_readme()
    if args.worker:
        torch.set_num_threads(args.threads)
        return worker(args)
    missing = [a for a in ("checkpoint", "src_file", "ref_file", "train_src", "train_tgt") if getattr(args, a) is None]
    if missing:
        p.error("required: " + ", ".join("--" + a.replace("_", "-") for a in missing))
    torch.set_num_threads(args.threads)
    measured_commit = commit()  # the code measured, even if a commit lands while this runs
    ckpt = checkpoint.load(args.checkpoint)
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    refs = args.ref_file.read_text(encoding="utf-8").splitlines()[: args.n]
    with tempfile.TemporaryDirectory() as tmp:
        args.work = Path(tmp)
        # Training first: this process then has run nothing but PyTorch (decoding runs in children).
        training, peaks = training_rows(args, ckpt) if "training" in args.parts else ([], {})
        decoding = decoding_rows(args, ckpt, lines, refs) if "decoding" in args.parts else []
        rss = rss_rows(args, lines, args.work) if "rss" in args.parts else []
    if args.parts != PARTS:
        return
    body = report(args, decoding, training, peaks, rss)
    print(body)
    if not args.no_append:
        when = f"{datetime.date.today()}, commit {measured_commit}"
        atomic_write_text(RESULTS, RESULTS.read_text(encoding="utf-8") + f"\n## Speed, {when}\n\n{body}")
        update_readme()


def update_readme() -> None:
    """README's speed section: the newest "## Speed" block of RESULTS.md, as the script wrote it."""
    blocks = RESULTS.read_text(encoding="utf-8").split("\n## Speed, ")[1:]
    if not blocks:
        sys.exit(f"{RESULTS}: no speed run recorded yet")
    when, body = blocks[-1].split("\n", 1)
    body = body.split("\n## ", 1)[0]  # up to the next section, if any follows
    replace_section(README, "speed-table", f"Newest run ({when}):\n\n{body.strip()}")


if __name__ == "__main__":
    main()
