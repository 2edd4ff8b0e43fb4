"""The timed half of speed.py: one system doing one job, in a fresh process of its own.

    python benchmarks/speed_workers.py JOB.json RESULT.json

Only the standard library is imported at the top; each job imports its own system's library and
nothing else: CTranslate2 runs without torch, Hugging Face without mt or CTranslate2, mt without
transformers or CTranslate2. Why: in a process where PyTorch's thread pool is alive CTranslate2
ran 15-40% slower, and PyTorch slower after CTranslate2 had run. The result lists which of those
libraries the process had loaded, and speed.py refuses a run whose process was not clean.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

LIBRARIES = ("torch", "mt_cli", "transformers", "ctranslate2")
# What each system's process may hold; anything else in LIBRARIES makes the run void.
ALLOWED = {
    "mt": {"torch", "mt_cli"},
    "hf": {"torch", "transformers"},
    "ct2": {"ctranslate2"},
    "peak": {"torch", "mt_cli"},
}

Batch = list[str]
# A job's "pieces": true makes each system return its output pieces (EOS and padding dropped)
# instead of text: a model with random weights (opus_speed.py) writes pieces that SentencePiece
# cannot spell, whose text would be all "⁇" and could not show whether the systems agree.


def mt_decoder(job: dict) -> Callable[[Batch, int], list]:
    """The model exactly as `mt translate --precision P` loads it; mt applies its own length limit
    (the same ratio * source + offset that speed.py hands the other systems per batch; a job's
    "mt" settings, e.g. a fixed limit, go to Translator.load as they are)."""
    import torch

    from mt_cli.decode.translator import Translator

    torch.set_num_threads(job["threads"])
    translator = Translator.load(
        job["model"],
        "cpu",
        beam=job["beam"],
        batch_size=job["batch"],
        length_penalty=job.get("length_penalty", 1.0),
        precision=job["precision"],
        **job.get("mt", {}),
    )
    if job.get("languages"):  # an M2M100 or NLLB model: (source, target) codes
        translator = translator.for_languages(*job["languages"])
    if job.get("pieces"):
        return lambda lines, limit: [
            translator.tokenizer.tgt_pieces(h[0].tokens) for h in translator.search(lines)
        ]
    return lambda lines, limit: translator.translate(lines)


def hf_decoder(job: dict) -> Callable[[Batch, int], list]:
    """MarianMTModel.generate on the `mt export --format hf` folder; with a job's "languages" and
    "language_tokens", M2M100ForConditionalGeneration's with the target language forced first."""
    import torch
    import transformers

    torch.set_num_threads(job["threads"])
    m2m = bool(job.get("languages"))
    if m2m:
        tok = transformers.AutoTokenizer.from_pretrained(job["model"], src_lang=job["languages"][0])
        model = transformers.M2M100ForConditionalGeneration.from_pretrained(job["model"]).eval()
        forced = {"forced_bos_token_id": tok.convert_tokens_to_ids(job["language_tokens"][1])}
    else:
        tok = transformers.MarianTokenizer.from_pretrained(job["model"])
        model = transformers.MarianMTModel.from_pretrained(job["model"]).eval()
        forced = {}
    # the decoder start (</s> or <pad>), then M2M100's forced target language
    skip = 2 if m2m else 1

    def run(lines: Batch, limit: int) -> list:
        enc = tok(lines, return_tensors="pt", padding=True)
        with torch.inference_mode():
            ids = model.generate(
                **enc,
                num_beams=job["beam"],
                do_sample=False,
                early_stopping=True,
                length_penalty=job.get("length_penalty", 1.0),
                max_new_tokens=limit + skip - 1,
                **forced,
            )
        if job.get("pieces"):  # tokenizers skip the decoder start too
            drop = {tok.pad_token_id, tok.eos_token_id}
            return [
                tok.convert_ids_to_tokens([i for i in row.tolist()[skip:] if i not in drop])
                for row in ids
            ]
        return [" ".join(text.split()) for text in tok.batch_decode(ids, skip_special_tokens=True)]

    return run


def ct2_decoder(job: dict) -> Callable[[Batch, int], list]:
    """CTranslate2 on the `mt export --format ct2` folder, with its own SentencePiece models; a
    job's "vmap": with the checkpoint's shortlist as its vocabulary map (vmap.txt, written by the
    export)."""
    import ctranslate2
    import sentencepiece as spm

    folder = job["model"]
    # An M2M100 or NLLB model: one SentencePiece model, the source language before the pieces and
    # the target language as the target prefix (its first output, dropped below).
    source_token, target_token = job.get("language_tokens") or ("", "")
    names = ("sentencepiece.bpe.model",) * 2 if target_token else ("source.spm", "target.spm")
    src, tgt = (spm.SentencePieceProcessor(model_file=os.path.join(folder, n)) for n in names)
    translator = ctranslate2.Translator(
        folder, device="cpu", intra_threads=job["threads"], inter_threads=1
    )
    prefix = [target_token] if target_token else []

    def run(lines: Batch, limit: int) -> list:
        before = [source_token] if source_token else []
        pieces = [before + src.encode(line, out_type=str) + ["</s>"] for line in lines]
        results = translator.translate_batch(
            pieces,
            beam_size=job["beam"],
            length_penalty=job.get("length_penalty", 1.0),
            max_decoding_length=limit + len(prefix),
            max_batch_size=len(lines),
            use_vmap=job.get("vmap", False),
            target_prefix=[prefix] * len(lines) if prefix else None,
        )
        out = [r.hypotheses[0][len(prefix) :] for r in results]
        if job.get("pieces"):
            return out
        return [" ".join(tgt.decode_pieces(h).split()) for h in out]

    return run


DECODERS = {"mt": mt_decoder, "hf": hf_decoder, "ct2": ct2_decoder}


def decode(job: dict) -> dict:
    """Load, translate the first batch once untimed (allocators, kernels, lazy imports), then time
    every batch. Batches and their length limits come from speed.py, the same for every system."""
    run = DECODERS[job["family"]](job)
    batches, limits = job["batches"], job["limits"]
    run(batches[0], limits[0])
    start = time.perf_counter()
    out = [run(batch, limit) for batch, limit in zip(batches, limits)]
    return {"seconds": time.perf_counter() - start, "out": out}


def mt_trainer(job: dict) -> tuple[Any, Callable]:
    """mt's training step: logits at real target tokens only (their indices found on the host, as
    mt's batches carry them), its fused label-smoothed loss."""
    import torch

    from mt_cli.model import checkpoint
    from mt_cli.model.loss import output_layer_loss
    from mt_cli.model.transformer import build_model

    torch.manual_seed(0)
    model = build_model(checkpoint.load(job["model"]).config.model).train()

    def loss(src, tgt_in, tgt_out, at):
        h = model.hidden(src, tgt_in, at)
        gold = tgt_out.flatten().index_select(0, at)
        return output_layer_loss(h, model.output_projection.weight, gold, 0.1) / at.numel()

    return model, loss


def marian_trainer(job: dict) -> tuple[Any, Callable]:
    """MarianMTModel as Seq2SeqTrainer trains it: its own forward, LabelSmoother(0.1) on the
    logits."""
    import torch
    import transformers
    from transformers.trainer_pt_utils import LabelSmoother

    torch.manual_seed(0)
    config = transformers.MarianConfig(**job["marian_config"], attn_implementation=job["attention"])
    model = transformers.MarianMTModel(config).train()
    smoother, vocab, pad = (
        LabelSmoother(epsilon=0.1),
        job["marian_config"]["vocab_size"],
        job["pad"],
    )

    def loss(src, tgt_in, tgt_out, at):
        # mt ids -> Marian ids (every id one down, PAD last: interop.marian.to_marian_id), so both
        # models see the same tokens.
        s, ti, to = ((x - 1) % vocab for x in (src, tgt_in, tgt_out))
        out = model(input_ids=s, attention_mask=src != pad, decoder_input_ids=ti)
        return smoother(out, to.masked_fill(tgt_out == pad, smoother.ignore_index))

    return model, loss


def train(job: dict) -> dict:
    """Fused AdamW (mt trains with it; Seq2SeqTrainer's default on torch >= 2.8), clipping at 1.0;
    the first `warmup` steps are not timed. On CUDA (job "device") each timed step ends with a
    synchronisation. Batches come as lists, or as a file of tensors (`batches_file`, for GPU-sized
    batches). Returns each timed step's seconds."""
    import torch

    torch.set_num_threads(job["threads"])
    device = torch.device(job.get("device", "cpu"))
    model, loss_of = (mt_trainer if job["family"] == "mt" else marian_trainer)(job)
    model.to(device)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    if "batches_file" in job:
        batches = torch.load(job["batches_file"], weights_only=True)
    else:
        batches = [tuple(torch.tensor(x) for x in b) for b in job["batches"]]
    seconds = []
    for i, (src, tgt_in, tgt_out) in enumerate(batches):
        at = (tgt_out != job["pad"]).flatten().nonzero().squeeze(1)  # on the host
        src, tgt_in, tgt_out, at = (x.long().to(device) for x in (src, tgt_in, tgt_out, at))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=job["precision"] == "bf16"):
            loss = loss_of(src, tgt_in, tgt_out, at)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= job["warmup"]:
            seconds.append(time.perf_counter() - start)
    return {"seconds": seconds}


def peak(job: dict) -> dict:
    """FLOP/s of a large matrix product at each precision: what MFU is measured against."""
    import torch

    from mt_cli.train.throughput import matmul_peak

    torch.set_num_threads(job["threads"])
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    return {p: matmul_peak(dtypes[p]) for p in job["precisions"]}


def main() -> None:
    job_path, result_path = sys.argv[1:3]
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    result = {"decode": decode, "train": train, "peak": peak}[job["kind"]](job)
    result["loaded"] = sorted(m for m in LIBRARIES if m in sys.modules)
    result["clean"] = set(result["loaded"]) <= ALLOWED[job["family"]]
    with open(result_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(result_path + ".tmp", result_path)


if __name__ == "__main__":
    main()
