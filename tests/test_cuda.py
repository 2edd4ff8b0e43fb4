"""On a GPU: training steps in bf16 and fp16, fused attention, the batch probe, NCCL, bitwise
resume under --deterministic, and decoding that agrees with the CPU. Skipped without CUDA
(`benchmarks/gpu_check.sh` runs them on a GPU machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mt_cli import Translator
from mt_cli.model import checkpoint
from mt_cli.model.attention import attention, attention_probs

pytestmark = pytest.mark.cuda
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode"


def _train_args(files, out: Path, *extra) -> list[str]:
    args = [
        "train",
        "--train-src",
        files["train_src"],
        "--train-tgt",
        files["train_tgt"],
        "--valid-src",
        files["valid_src"],
        "--valid-tgt",
        files["valid_tgt"],
        "--out",
        out,
        "--preset",
        "tiny",
        "--batch-tokens",
        "600",
        "--device",
        "cuda",
        "--set",
        "tokenizer.vocab_size=100",
        "--set",
        "train.log_every=1",
        "--set",
        "decode.beam=1",
        *extra,
    ]
    return list(map(str, args))


def _mt(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "mt_cli", *args], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_training_steps_on_cuda_are_finite_and_fp16_keeps_its_scaler(corpus_files, tmp_path, amp):
    out = tmp_path / amp
    _mt(*_train_args(corpus_files, out, "--max-steps", "20", "--set", f"train.amp={amp}"))
    last = checkpoint.load(out / "last.pt")
    assert last.train_state["step"] == 20
    assert ("scaler" in last.train_state) == (amp == "fp16")
    losses = [line for line in (out / "log.jsonl").read_text().splitlines() if '"loss"' in line]
    assert len(losses) == 20 and "NaN" not in "".join(losses) and "Infinity" not in "".join(losses)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_attention_on_cuda_equals_the_three_explicit_products(dtype):
    gen = torch.Generator("cuda").manual_seed(0)
    q, k, v = (
        torch.randn(2, 4, 9, 16, device="cuda", dtype=dtype, generator=gen) for _ in range(3)
    )
    mask = torch.ones(2, 1, 1, 9, dtype=torch.bool, device="cuda")
    mask[1, ..., 6:] = False
    for causal, m in ((False, mask), (True, None)):
        fused = attention(q, k, v, m, causal, 0.0)
        explicit = attention_probs(q.float(), k.float(), m, causal) @ v.float()
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(fused.float(), explicit, atol=tol, rtol=tol)


def test_batch_tokens_auto_probes_the_gpu_and_is_kept_on_resume(corpus_files, tmp_path):
    out = tmp_path / "run"
    first = _mt(*_train_args(corpus_files, out, "--max-steps", "3", "--batch-tokens", "auto"))
    assert "tokens fit one cuda" in first.stderr
    again = _mt(*_train_args(corpus_files, out, "--max-steps", "5", "--batch-tokens", "auto"))
    assert (
        "as resolved when the run started" in again.stderr
        and "tokens fit one cuda" not in again.stderr
    )


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_nccl_processes_train_the_same_run_as_one(corpus_files, tmp_path):
    extra = ("--max-steps", "10", "--set", "model.dropout=0", "--deterministic")
    _mt(*_train_args(corpus_files, tmp_path / "one", *extra))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "mt_cli",
        *_train_args(corpus_files, tmp_path / "two", *extra),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    a, b = (checkpoint.load(tmp_path / n / "last.pt").model_state for n in ("one", "two"))
    worst = max(
        float((a[k].float() - b[k].float()).abs().max() / (a[k].float().abs().max() + 1e-12))
        for k in a
    )
    assert worst <= 1e-3


def test_a_deterministic_run_resumed_halfway_is_bitwise_the_uninterrupted_one(
    corpus_files, tmp_path
):
    extra = ("--deterministic", "--set", "train.save_every=3")
    _mt(*_train_args(corpus_files, tmp_path / "straight", "--max-steps", "6", *extra))
    _mt(*_train_args(corpus_files, tmp_path / "halves", "--max-steps", "3", *extra))
    _mt(*_train_args(corpus_files, tmp_path / "halves", "--max-steps", "6", *extra))
    a, b = (checkpoint.load(tmp_path / n / "last.pt").model_state for n in ("straight", "halves"))
    assert [k for k in a if not torch.equal(a[k], b[k])] == []


def test_greedy_decoding_on_cuda_agrees_with_the_cpu():
    lines = (FIXTURE / "src.txt").read_text(encoding="utf-8").split("\n")[:-1]
    cpu = Translator.load(FIXTURE / "model.pt", device="cpu", beam=1).translate(lines)
    gpu = Translator.load(FIXTURE / "model.pt", device="cuda", beam=1).translate(lines)
    assert len(gpu) == len(cpu)
    # float sums differ; near-ties may flip
    assert sum(a == b for a, b in zip(cpu, gpu)) >= 0.9 * len(cpu)


def test_attention_of_a_model_on_cuda_comes_back_on_the_cpu_and_agrees_with_the_cpu():
    from mt_cli.decode.attention_maps import record_attention

    src, tgt = (FIXTURE / "src.txt").read_text(encoding="utf-8").split("\n")[0], "A dog runs."
    cpu = record_attention(Translator.load(FIXTURE / "model.pt", device="cpu"), src, tgt)
    gpu = record_attention(Translator.load(FIXTURE / "model.pt", device="cuda"), src, tgt)
    for kind, layers in cpu.maps.items():
        for a, b in zip(layers, gpu.maps[kind]):
            assert b.device.type == "cpu"
            torch.testing.assert_close(b.float(), a.float(), atol=1e-3, rtol=1e-3)
    links = Translator.load(FIXTURE / "model.pt", device="cuda", beam=1).search(
        [src], alignment=True
    )
    assert links[0][0].alignment is not None


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_an_ssru_decoder_with_marians_sinusoids_steps_on_cuda_as_on_the_cpu(precision):
    """A Bergamot-shaped decoder (SSRU cells, Marian's own sinusoids and epsilon) through the
    engine on the GPU: the CPU's fp32 logits at every step of a walk with a beam reorder, within
    float noise in fp32 and bf16's rounding in bf16."""
    from conftest import tiny_config
    from mt_cli.data.tokenizer import EOS, PAD
    from mt_cli.decode.engine import Engine
    from mt_cli.model.transformer import build_model

    tok = checkpoint.load(FIXTURE / "model.pt").tokenizer
    torch.manual_seed(0)
    cfg = tiny_config(tok, decoder_autoreg="ssru", positions="tensor2tensor", norm_eps=1e-6)
    model = build_model(cfg).eval()
    src = torch.randint(4, tok.src_vocab_size, (3, 7), generator=torch.Generator().manual_seed(0))
    src[:, -1], src[0, 4:], src[0, 3] = EOS, PAD, EOS  # one padded sentence: the mask matters

    def walk(engine: Engine, device: str) -> list[torch.Tensor]:
        s = src.to(device)
        memory, cache = engine.encode(s, s != PAD), None
        tokens, out = torch.full((6, 1), model.start_token, device=device), []
        for t in range(12):
            logits, cache = engine.decode(tokens, memory, s != PAD, cache, None)
            out.append(logits[:, -1].float().cpu())
            # a fixed walk, the same on both
            tokens = torch.arange(4, 10, device=device)[:, None] + t
            if t == 1:
                cache.reorder(torch.tensor([1, 0, 3, 2, 5, 4], device=device))
        return out

    with torch.inference_mode():
        want = walk(Engine(model, "fp32"), "cpu")
        got = walk(Engine(model.to("cuda"), precision), "cuda")
    tol = 1e-4 if precision == "fp32" else 0.05
    for t, (a, b) in enumerate(zip(want, got)):
        assert (b - a).abs().max() <= tol * max(1.0, a.abs().max().item()), f"step {t}"
