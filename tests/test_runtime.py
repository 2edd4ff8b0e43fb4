"""GPU readiness that can be checked on a CPU: batch probing, fp16 scaling state, compile
fallback."""

from __future__ import annotations

import pytest
import torch

from mt_cli.device import amp_dtype
from mt_cli.errors import MtError
from mt_cli.train.hardware import largest_fitting


def test_largest_fitting_finds_the_edge_within_a_sixteenth_with_few_probes():
    for edge in (1024, 1500, 5000, 70_000, 1 << 20):
        tried: list[int] = []

        def fits(n: int, edge=edge, tried=tried) -> bool:
            tried.append(n)
            return n <= edge

        found = largest_fitting(fits, 1024, 1 << 20)
        assert edge - edge / 16 <= found <= edge, (edge, found)
        assert len(tried) <= 20
    assert largest_fitting(lambda n: False, 1024, 1 << 20) == 0


def test_fp16_needs_cuda_and_auto_is_fp32_on_the_cpu(monkeypatch):
    cpu = torch.device("cpu")
    with pytest.raises(MtError, match="train.amp fp16 needs a CUDA device"):
        amp_dtype("fp16", cpu)
    # a CPU with bf16 arithmetic
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert (
        amp_dtype("auto", cpu) is None
        and amp_dtype("bf16", cpu) == torch.bfloat16
        and amp_dtype("off", cpu) is None
    )


def test_bf16_on_a_cpu_without_bf16_arithmetic_is_one_line_naming_fp32(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    with pytest.raises(
        MtError, match=r"this CPU \(.*\) has no bf16 arithmetic .* set train.amp to off"
    ):
        amp_dtype("bf16", torch.device("cpu"))
    assert amp_dtype("auto", torch.device("cpu")) is None


def test_the_matmul_peak_shrinks_its_product_where_the_dtype_is_slow_instead_of_taking_minutes(
    monkeypatch,
):
    import time

    from mt_cli.train import throughput

    sizes = []
    real_randn = torch.randn

    def randn(*shape, **kw):  # a CPU where a product takes 1 us per element of its output
        sizes.append(shape[0])
        return real_randn(*shape, **kw)

    monkeypatch.setattr(torch, "randn", randn)
    real_matmul = torch.Tensor.__matmul__

    def slow_matmul(a, b):
        time.sleep(a.size(0) * b.size(1) * 1e-9 * 1000)
        return real_matmul(a, b)

    monkeypatch.setattr(torch.Tensor, "__matmul__", slow_matmul)
    start = time.perf_counter()
    flops = throughput.matmul_peak(torch.float32)
    assert time.perf_counter() - start < 5 and flops > 0
    assert max(sizes) < 2048  # 2048 x 2048 would have taken 4 s a product here


def test_the_gradient_scaler_state_is_saved_in_last_pt_and_resumed(tokenizer, tmp_path):
    from conftest import tiny_config
    from mt_cli.config import Config
    from mt_cli.model import checkpoint
    from mt_cli.model.transformer import build_model
    from mt_cli.train.state import TrainState, make_checkpoint, resume

    cfg = Config(model=tiny_config(tokenizer))
    model = build_model(cfg.model)
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=7)
    scaler.scale(torch.ones(()))  # the scale exists from its first use
    scaler.update(new_scale=256.0)
    last = make_checkpoint(cfg, tokenizer, model, optimizer, TrainState(step=3), scaler=scaler)
    checkpoint.save(tmp_path / "last.pt", last)
    fresh = torch.amp.GradScaler("cpu")
    resume(tmp_path / "last.pt", cfg, model, optimizer, None, lambda m: None, scaler=fresh)
    assert fresh.get_scale() == 256.0 and fresh.get_growth_interval() == 7


def test_a_failing_torch_compile_falls_back_to_eager_training_with_a_warning(
    corpus_files, tmp_path, monkeypatch
):
    from mt_cli.config import build_config
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    def broken_compile(module, *args, **kwargs):
        def run(*a, **k):
            raise RuntimeError("no C++ compiler here")

        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    f = corpus_files
    cfg = build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": {"max_steps": 3, "compile": True, "batch_tokens": 0},
        },
    )
    said: list[str] = []
    spec = DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"])
    state = train(spec, tmp_path / "run", cfg, log=said.append)
    assert state.step == 3
    assert any(
        "torch.compile failed (RuntimeError: no C++ compiler here); training without it" in m
        for m in said
    )
    assert any(
        "batch_tokens auto probes GPU memory; on cpu it is the default, 2048" in m for m in said
    )
