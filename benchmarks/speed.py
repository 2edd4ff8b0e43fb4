"""Speed of mt against Hugging Face transformers and CTranslate2 on the same weights, in one run.

    python benchmarks/speed.py --checkpoint RUN/best.pt \\
        --src-file ../shared/data/multi30k/test2016.de \\
        --ref-file ../shared/data/multi30k/test2016.en \\
        --train-src ../shared/data/multi30k/train.de --train-tgt ../shared/data/multi30k/train.en

Every timed run is a fresh process that imports only its own system's library
(benchmarks/speed_workers.py; CTranslate2 runs without torch): in a process where PyTorch's
thread pool is alive CTranslate2 ran 15-40% slower, and PyTorch slower once CTranslate2 had run.
The systems take turns over rounds and each keeps its fastest, so that the machine's drift over
minutes (10-20% here) does not land on one system only.

Decoding: every system translates the first --n lines of --src-file in the same length-sorted
batches of 64 with the same length limit (mt's ratio * source + offset, per batch), beam 5 and
greedy, length penalty 1.0, after one untimed warm-up batch; sentences/s, target tokens/s
(SentencePiece pieces of the output + EOS, counted alike for all) and BLEU, so that a fast path
that loses quality shows it. mt runs with the checkpoint's vocabulary shortlist (its default) and
with its whole vocabulary; CTranslate2 with its whole vocabulary (its default) and with the same
shortlist as its vocabulary map (`use_vmap`, the vmap.txt `mt export` writes).
mt's default engine (decode.engine auto) runs the decoder step compiled ahead of time, which
speed.py builds first as `mt compile` does (once per checkpoint, precision and CPU; not timed);
the rows marked eager run the same step uncompiled.
Whole process: `mt translate FILE` against the minimal scripts a CTranslate2 or Hugging Face
user writes (benchmarks/peers/), on the first 1,000 and 10,000 lines of --train-src: startup,
imports, loading and decoding, wall-clock and peak RSS.
Training: target tokens/s of mt's training step and of MarianMTModel built from the same config as
Seq2SeqTrainer runs it (its own forward, LabelSmoother(0.1), fused AdamW; sdpa and eager
attention), on the same batches, fp32 and bf16 autocast (bf16 only on CPUs with bf16 arithmetic),
and each one's model FLOPs utilisation against a large matrix product timed in a process of its own.

The tables are printed and appended to benchmarks/RESULTS.md (and the newest full run copied into
docs/speed.md); nothing is typed in by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu
import torch
from results import append_section, commit, copy_newest  # this folder's results helpers

from mt_cli.data.collate import collate
from mt_cli.data.pairs import Pairs, make_batches
from mt_cli.data.tokenizer import PAD
from mt_cli.decode.compiled import compile_checkpoint
from mt_cli.decode.stepping import max_lengths
from mt_cli.device import cpu_has_bf16
from mt_cli.interop import export
from mt_cli.interop.marian import marian_config
from mt_cli.model import checkpoint
from mt_cli.model.transformer import build_model
from mt_cli.train.throughput import linear_flops

HERE = Path(__file__).resolve().parent
BATCH = 64
PARTS = ["decoding", "whole", "training"]
# name -> (worker family, job fields); the folders are the exports speed.py writes first. mt runs
# with the checkpoint's vocabulary shortlist (its default) and without; CTranslate2 with its whole
# vocabulary (its default) and with the same shortlist as its vocabulary map (use_vmap).
DECODERS = {
    # mt's default, decode.engine auto: the compiled step, which speed.py builds first (`mt
    # compile`); then the same step uncompiled, so that every run shows both.
    "mt fp32": ("mt", {"precision": "fp32"}),
    "mt int8": ("mt", {"precision": "int8"}),
    "mt bf16": ("mt", {"precision": "bf16"}),
    "mt fp32, eager": ("mt", {"precision": "fp32", "mt": {"engine": "eager"}}),
    "mt int8, eager": ("mt", {"precision": "int8", "mt": {"engine": "eager"}}),
    "mt bf16, eager": ("mt", {"precision": "bf16", "mt": {"engine": "eager"}}),
    "mt fp32, whole vocabulary": ("mt", {"precision": "fp32", "mt": {"shortlist": False}}),
    "mt int8, whole vocabulary": ("mt", {"precision": "int8", "mt": {"shortlist": False}}),
    "HF generate fp32": ("hf", {"folder": "hf"}),
    "CTranslate2 fp32": ("ct2", {"folder": "ct2-fp32", "precision": "fp32"}),
    "CTranslate2 int8": ("ct2", {"folder": "ct2-int8", "precision": "int8"}),
    "CTranslate2 fp32, vmap": ("ct2", {"folder": "ct2-fp32", "precision": "fp32", "vmap": True}),
    "CTranslate2 int8, vmap": ("ct2", {"folder": "ct2-int8", "precision": "int8", "vmap": True}),
}
# mt bf16 (where the CPU has bf16 arithmetic) shows its peak memory after 10,000 lines beside
# int8's.
WHOLE = [
    "mt fp32",
    "mt int8",
    "mt int8, eager",
    "mt bf16",
    "CTranslate2 fp32",
    "CTranslate2 int8",
    "HF generate fp32",
]
TRAINERS = {
    "mt": ("mt", None),
    "MarianMTModel (sdpa)": ("hf", "sdpa"),
    "MarianMTModel (eager)": ("hf", "eager"),
}


def precisions() -> list[str]:
    """bf16 only where the CPU multiplies it in hardware: elsewhere its products ran 100x slower
    than fp32's (an AVX2 AMD EPYC), which measures nothing but that."""
    return ["fp32", "bf16"] if cpu_has_bf16() else ["fp32"]


def machine() -> str:
    """The CPU and the flags the fast paths depend on: bf16 arithmetic (AVX512-BF16, AMX), int8 dot
    products (VNNI), AMX's matrix units; a row that needs one the CPU lacks was not measured here.
    """
    name = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown CPU",
    )
    cpu = torch.cpu
    flags = [
        torch.backends.cpu.get_cpu_capability(),
        "bf16 arithmetic" if cpu_has_bf16() else "no bf16 arithmetic",
        "VNNI" if cpu._is_vnni_supported() else "no VNNI",
        "AMX" if cpu._is_amx_tile_supported() else "no AMX",
    ]
    return f"{name} ({', '.join(flags)}), {os.cpu_count()} CPUs"


def in_worker(args, job: dict) -> dict:
    """Run one job in a fresh process; refuse its figures if the process held another system's
    library."""
    job_path, result_path = args.work / "job.json", args.work / "result.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    cmd = [sys.executable, str(HERE / "speed_workers.py"), str(job_path), str(result_path)]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(
            f"speed_workers.py failed on a {job['kind']} job "
            f"({job['family']}):\n{done.stderr[-3000:]}"
        )
    result = json.loads(result_path.read_text(encoding="utf-8"))
    if not result["clean"]:
        sys.exit(
            f"a {job['family']} worker's process loaded {result['loaded']}: its timing would be "
            "confounded"
        )
    return result


def decoding_jobs(ckpt, lines: list[str]) -> tuple[list[list[int]], list[int]]:
    """The same length-sorted batches and per-batch length limits for every system."""
    # + EOS, as mt counts
    lens = torch.tensor([len(ids) + 1 for ids in ckpt.tokenizer.encode_src(lines)])
    order = sorted(range(len(lines)), key=lambda i: int(lens[i]))
    batches = [order[i : i + BATCH] for i in range(0, len(order), BATCH)]
    limits = [int(max_lengths(lens[b], ckpt.config.decode, limit=10**6).max()) for b in batches]
    return batches, limits


def decoding_rows(args, ckpt, lines: list[str], refs: list[str]) -> list[dict]:
    batches, limits = decoding_jobs(ckpt, lines)
    sp, rows = ckpt.tokenizer.tgt, []
    for beam in (5, 1):
        best: dict[str, tuple[float, list[str]]] = {}
        for _ in range(args.rounds):
            for name, (family, fields) in DECODERS.items():
                if fields.get("precision") == "bf16" and "bf16" not in precisions():
                    continue
                if fields.get("vmap") and ckpt.shortlist is None:
                    continue
                job = {
                    "kind": "decode",
                    "family": family,
                    "beam": beam,
                    "batch": BATCH,
                    "threads": args.threads,
                    "batches": [[lines[i] for i in b] for b in batches],
                    "limits": limits,
                    "model": str(args.work / fields["folder"])
                    if "folder" in fields
                    else str(args.checkpoint),
                    "precision": fields.get("precision"),
                    "mt": fields.get("mt", {}),
                    "vmap": fields.get("vmap", False),
                }
                got = in_worker(args, job)
                out = [""] * len(lines)
                for idx, texts in zip(batches, got["out"]):
                    for i, text in zip(idx, texts):
                        out[i] = text
                if name not in best or got["seconds"] < best[name][0]:
                    best[name] = (got["seconds"], out)
        for name, (seconds, out) in best.items():
            tokens = sum(len(ids) + 1 for ids in sp.encode(out))
            bleu = sacrebleu.corpus_bleu(out, [refs]).score
            rows.append(
                {
                    "system": name,
                    "beam": beam,
                    "sent/s": len(lines) / seconds,
                    "tok/s": tokens / seconds,
                    "BLEU": bleu,
                    "seconds": seconds,
                }
            )
            print(
                f"  decode beam {beam} {name}: {len(lines) / seconds:.1f} sent/s, BLEU {bleu:.2f}",
                flush=True,
            )
    return rows


def high_water_kb(pid: int) -> int:
    """The process's own peak RSS (VmHWM); getrusage of a child would also count the pages it
    shared with this (large) parent between fork and exec."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # it has just exited
        return 0
    return next(
        (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0
    )


def whole_process(cmd: list[str], log: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of a command, from its start to its exit."""
    with log.open("w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        peak_kb = 0
        while True:
            peak_kb = max(peak_kb, high_water_kb(proc.pid))
            try:
                proc.wait(timeout=0.1)  # returns the moment it exits: no sleep lands on the time
                break
            except subprocess.TimeoutExpired:
                continue
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{log.read_text()[-3000:]}")
    return seconds, peak_kb / 1024


def whole_command(name: str, args, src: Path, out: Path) -> list[str]:
    family, fields = DECODERS[name]
    if family == "mt":  # the console script a user runs, from this interpreter's environment
        mt = str(Path(sys.executable).parent / "mt")
        return [
            mt,
            "translate",
            "--checkpoint",
            str(args.checkpoint),
            str(src),
            "--output",
            str(out),
            "--beam",
            "5",
            "--batch-size",
            str(BATCH),
            "--precision",
            fields["precision"],
            "--device",
            "cpu",
            "--engine",
            fields.get("mt", {}).get("engine", "auto"),
        ]
    script = HERE / "peers" / ("ct2_translate.py" if family == "ct2" else "hf_translate.py")
    return [
        sys.executable,
        str(script),
        str(args.work / fields["folder"]),
        str(src),
        str(out),
        "--beam",
        "5",
    ]


def whole_rows(args) -> list[dict]:
    """Each system translates the same file as a user would run it, taking turns over rounds."""
    source = args.train_src.read_text(encoding="utf-8").splitlines()
    rows = []
    for n in args.whole_lines:
        src = args.work / f"whole-{n}.txt"
        src.write_text("".join(line + "\n" for line in source[:n]), encoding="utf-8")
        best: dict[str, tuple[float, float, list[str]]] = {}
        for _ in range(args.whole_rounds):
            for name in WHOLE:
                if (name.startswith("HF ") and n > args.whole_hf_lines) or (
                    "bf16" in name and not cpu_has_bf16()
                ):
                    continue
                out = args.work / "whole-out.txt"
                seconds, mb = whole_process(
                    whole_command(name, args, src, out), args.work / "whole.log"
                )
                texts = [" ".join(t.split()) for t in out.read_text(encoding="utf-8").splitlines()]
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, max(mb, best.get(name, (0, 0))[1]), texts)
        for name, (seconds, mb, texts) in best.items():
            same = sum(a == b for a, b in zip(texts, best["mt fp32"][2])) / n
            rows.append(
                {"system": name, "lines": n, "seconds": seconds, "peak RSS MB": mb, "same": same}
            )
            print(f"  whole process {n} lines {name}: {seconds:.1f} s, {mb:.0f} MB", flush=True)
    return rows


def training_jobs(args, ckpt) -> tuple[list[list], list[tuple[int, int, float]]]:
    """Collated batches as lists (for the workers), and (source tokens, target tokens, model FLOPs)
    of each; the FLOPs are counted on mt's model, whose linear layers Marian's match one for one."""
    src = args.train_src.read_text(encoding="utf-8").splitlines()[:20_000]
    tgt = args.train_tgt.read_text(encoding="utf-8").splitlines()[:20_000]
    pairs = Pairs(ckpt.tokenizer.encode_src(src), ckpt.tokenizer.encode_tgt(tgt))
    ids = make_batches(pairs.src_lens, pairs.tgt_lens, ckpt.config.train.batch_tokens, seed=0)
    model = build_model(ckpt.config.model)
    batches, sizes = [], []
    for b in ids[: args.train_steps + 3]:
        s, ti, to = collate(*pairs.take(b), model.start_token)
        batches.append([s.tolist(), ti.tolist(), to.tolist()])
        n_src, n_tgt = int((s != PAD).sum()), int((to != PAD).sum())
        sizes.append((n_src, n_tgt, linear_flops(model, n_src, n_tgt)))
    return batches, sizes


def training_rows(args, ckpt) -> tuple[list[dict], dict[str, float]]:
    """Each (system, precision) trains the same batches in a process of its own, taking turns over
    rounds; the first 3 steps warm up and are not timed. The matrix-product peak takes turns too."""
    batches, sizes = training_jobs(args, ckpt)
    marian_fields = {
        k: v for k, v in marian_config(ckpt)[0].items() if k not in ("architectures", "model_type")
    }
    best: dict[tuple[str, str], float] = {}
    peaks: dict[str, float] = {}
    for _ in range(args.train_rounds):
        got = in_worker(
            args,
            {"kind": "peak", "family": "peak", "threads": args.threads, "precisions": precisions()},
        )
        peaks = {p: max(peaks.get(p, 0.0), got[p]) for p in precisions()}
        for precision in precisions():
            for name, (family, attention) in TRAINERS.items():
                job = {
                    "kind": "train",
                    "family": family,
                    "precision": precision,
                    "threads": args.threads,
                    "model": str(args.checkpoint),
                    "marian_config": marian_fields,
                    "attention": attention,
                    "pad": PAD,
                    "warmup": 3,
                    "batches": batches,
                }
                seconds = sum(in_worker(args, job)["seconds"])
                best[name, precision] = min(seconds, best.get((name, precision), float("inf")))
    tokens, flops = sum(s[1] for s in sizes[3:]), sum(s[2] for s in sizes[3:])
    rows = []
    for (name, precision), seconds in best.items():
        rows.append(
            {
                "system": name,
                "precision": precision,
                "tok/s": tokens / seconds,
                "MFU": flops / seconds / peaks[precision],
            }
        )
        print(f"  train {precision} {name}: {tokens / seconds:.0f} tgt tok/s", flush=True)
    return rows, peaks


def versus(row: dict, peers: dict[str, dict], peer: str) -> str:
    """An mt row's speed as a multiple of a CTranslate2 row's, or "-"."""
    found = peers.get(peer)
    return (
        f"{row['tok/s'] / found['tok/s']:.2f}" if found and row["system"].startswith("mt ") else "-"
    )


def decoding_table(decoding: list[dict]) -> list[str]:
    lines = [
        "| decoding | beam | sent/s | tgt tok/s | BLEU | x HF generate | x CTranslate2 same "
        "precision "
        "| x CTranslate2 same precision and shortlist (vmap) | x CTranslate2's fastest |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in decoding:
        same_beam = {d["system"]: d for d in decoding if d["beam"] == r["beam"]}
        ct2 = [d for name, d in same_beam.items() if name.startswith("CTranslate2")]
        fastest = max(ct2, key=lambda d: d["tok/s"]) if ct2 else None
        hf = same_beam["HF generate fp32"]["tok/s"]
        precision = r["system"].split()[1].rstrip(",")
        listed = "whole vocabulary" not in r["system"]  # mt's shortlist against CTranslate2's vmap
        vmap = versus(r, same_beam, f"CTranslate2 {precision}, vmap") if listed else "-"
        plain = versus(r, same_beam, f"CTranslate2 {precision}")
        best = versus(r, same_beam, fastest["system"]) if fastest else "-"
        lines.append(
            f"| {r['system']} | {r['beam']} | {r['sent/s']:.1f} | {r['tok/s']:.0f} | "
            f"{r['BLEU']:.2f} | {r['tok/s'] / hf:.2f} | {plain} | {vmap} | {best} |"
        )
    return lines


def whole_table(whole: list[dict]) -> list[str]:
    lines = [
        "| whole process, beam 5 | lines | seconds | lines/s | peak RSS MB | output = mt fp32's "
        "| x CTranslate2 same precision |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in whole:
        same = [
            w
            for w in whole
            if w["lines"] == r["lines"] and w["system"] == "CTranslate2 " + r["system"][3:]
        ]
        peer = same[0] if same else None
        vs_ct2 = (
            f"{peer['seconds'] / r['seconds']:.2f}"
            if peer and r["system"].startswith("mt ")
            else "-"
        )
        lines.append(
            f"| {r['system']} | {r['lines']} | {r['seconds']:.1f} | "
            f"{r['lines'] / r['seconds']:.1f} "
            f"| {r['peak RSS MB']:.0f} | {100 * r['same']:.1f}% | {vs_ct2} |"
        )
    return lines


def training_table(training: list[dict], peaks: dict[str, float]) -> list[str]:
    lines = [
        "| training | precision | tgt tok/s | MFU | x faster MarianMTModel |",
        "|---|---|---|---|---|",
    ]
    for r in training:
        # Against the faster of the two Marian attention kernels at this precision.
        marian = max(
            t["tok/s"] for t in training if t["system"] != "mt" and t["precision"] == r["precision"]
        )
        lines.append(
            f"| {r['system']} | {r['precision']} | {r['tok/s']:.0f} | {100 * r['MFU']:.1f}% "
            f"| {r['tok/s'] / marian:.2f} |"
        )
    rates = ", ".join(f"{p} {peaks[p] / 1e9:.0f} GFLOP/s" for p in precisions())
    lines.append(
        "\nMFU is against a large matrix product (train.throughput.matmul_peak) timed in a "
        "process "
        f"of its own: {rates}."
    )
    return lines


def report(args, decoding: list[dict], whole: list[dict], training: list[dict], peaks: dict) -> str:
    where = f"{machine()}, {args.threads} threads, torch {torch.__version__}"
    lines = [
        f"`benchmarks/speed.py`: {args.checkpoint.name} of {args.checkpoint.parent.name}; every "
        "timed run a fresh "
        f"process importing only its own system's library, {args.rounds} rounds (whole processes "
        f"{args.whole_rounds}, training {args.train_rounds}) taking turns, fastest kept; {where}."
        + (
            ""
            if cpu_has_bf16()
            else " bf16 rows left out: this CPU has no bf16 arithmetic (products 100x slower)."
        )
    ]
    if decoding:
        lines += [
            f"\nDecoding, time after loading: first {args.n} lines of {args.src_file.name}, "
            f"length-sorted batches of {BATCH}.\n",
            *decoding_table(decoding),
        ]
    if whole:
        lines += [
            "\nWhole processes (`mt translate FILE` against the benchmarks/peers/ scripts: start, "
            f"imports, loading, decoding, writing), the first lines of {args.train_src.name}; "
            "Hugging Face "
            f"up to {args.whole_hf_lines} lines only.\n",
            *whole_table(whole),
        ]
    if training:
        lines += [
            f"\nTraining: the same {args.train_steps} batches for each, after 3 untimed.\n",
            *training_table(training, peaks),
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--src-file", type=Path, help="sentences to translate")
    p.add_argument("--ref-file", type=Path, help="their references, for BLEU")
    p.add_argument("--train-src", type=Path, help="training batches, and the whole-process input")
    p.add_argument("--train-tgt", type=Path)
    p.add_argument("--n", type=int, default=1000, help="sentences to translate")
    p.add_argument(
        "--rounds", type=int, default=3, help="decoding: timed runs per system, the fastest kept"
    )
    p.add_argument("--whole-lines", type=int, nargs="*", default=[1000, 10_000])
    p.add_argument("--whole-rounds", type=int, default=2)
    p.add_argument(
        "--whole-hf-lines",
        type=int,
        default=1000,
        help="Hugging Face's whole process only up to this many lines (the slowest by far)",
    )
    p.add_argument("--train-steps", type=int, default=30, help="timed training steps per system")
    p.add_argument("--train-rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=PARTS,
        help="run only these (recorded apart; docs/speed.md keeps the last full run)",
    )
    p.add_argument("--no-append", action="store_true", help="print only; leave RESULTS.md alone")
    p.add_argument(
        "--docs",
        "--readme",
        dest="docs",
        action="store_true",
        help="only copy the newest RESULTS.md run into docs/speed.md",
    )
    args = p.parse_args()
    if args.docs:
        return update_docs()
    missing = [
        a
        for a in ("checkpoint", "src_file", "ref_file", "train_src", "train_tgt")
        if getattr(args, a) is None
    ]
    if missing:
        p.error("required: " + ", ".join("--" + a.replace("_", "-") for a in missing))
    args.checkpoint = args.checkpoint.resolve()
    measured_commit = commit()  # the code measured, even if a commit lands while this runs
    ckpt = checkpoint.load(args.checkpoint)
    lines = args.src_file.read_text(encoding="utf-8").splitlines()[: args.n]
    refs = args.ref_file.read_text(encoding="utf-8").splitlines()[: args.n]
    with tempfile.TemporaryDirectory() as tmp:
        args.work = Path(tmp)
        export(ckpt, args.work / "hf", "hf")
        for q in ("fp32", "int8"):
            export(ckpt, args.work / f"ct2-{q}", "ct2", None if q == "fp32" else q)
        # what `mt compile` builds once; not timed, as a user's runs are not
        for q in precisions() + ["int8"]:
            compile_checkpoint(args.checkpoint, q)
        decoding = decoding_rows(args, ckpt, lines, refs) if "decoding" in args.parts else []
        whole = whole_rows(args) if "whole" in args.parts else []
        training, peaks = training_rows(args, ckpt) if "training" in args.parts else ([], {})
    body = report(args, decoding, whole, training, peaks)
    print(body)
    if not args.no_append:
        # A partial run is recorded under its own title; docs/speed.md's table stays the last full
        # run.
        title = "Speed" if args.parts == PARTS else f"Speed ({', '.join(args.parts)} only)"
        append_section(title, body, measured_commit)
        if args.parts == PARTS:
            update_docs()


def update_docs() -> None:
    """docs/speed.md's speed table: the newest "## Speed" block of RESULTS.md, as the script wrote
    it."""
    copy_newest("Speed", "speed-table")


if __name__ == "__main__":
    main()
