"""GPU readiness that can be checked on a CPU: batch probing, fp16 scaling state, compile fallback."""

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


def test_fp16_needs_cuda_and_auto_is_fp32_on_the_cpu():
    cpu = torch.device("cpu")
    with pytest.raises(MtError, match="train.amp fp16 needs a CUDA device"):
        amp_dtype("fp16", cpu)
    assert amp_dtype("auto", cpu) is None and amp_dtype("bf16", cpu) == torch.bfloat16 and amp_dtype("off", cpu) is None


def test_the_gradient_scaler_state_is_saved_in_last_pt_and_resumed(tokenizer, tmp_path):
    from conftest import tiny_config
    from mt_cli.config import Config
    from mt_cli.model.transformer import build_model
    from mt_cli.train.state import TrainState, resume, write_checkpoint

    cfg = Config(model=tiny_config(tokenizer))
    model = build_model(cfg.model)
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=7)
    scaler.scale(torch.ones(()))  # the scale exists from its first use
    scaler.update(new_scale=256.0)
    write_checkpoint(tmp_path / "last.pt", cfg, tokenizer, model, optimizer, TrainState(step=3), scaler=scaler)
    fresh = torch.amp.GradScaler("cpu")
    resume(tmp_path / "last.pt", cfg, model, optimizer, None, lambda m: None, scaler=fresh)
    assert fresh.get_scale() == 256.0 and fresh.get_growth_interval() == 7


def test_a_failing_torch_compile_falls_back_to_eager_training_with_a_warning(corpus_files, tmp_path, monkeypatch):
    from mt_cli.config import build_config
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    def broken_compile(module, *args, **kwargs):
        def run(*a, **k):
            raise RuntimeError("no C++ compiler here")

        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    f = corpus_files
    cfg = build_config("tiny", options={"tokenizer": {"vocab_size": 100},
                                        "train": {"max_steps": 3, "compile": True, "batch_tokens": 0}})  # fmt: skip
    said: list[str] = []
    spec = DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"])
    state = train(spec, tmp_path / "run", cfg, log=said.append)
    assert state.step == 3
    assert any("torch.compile failed (RuntimeError: no C++ compiler here); training without it" in m for m in said)
    assert any("batch_tokens auto probes GPU memory; on cpu it is the default, 2048" in m for m in said)
