"""The CUDA code paths, checked on the CPU with stand-ins: a CPU GradScaler for fp16's scaler, a
probe step that fails the way cuBLAS does, a GPU that has no bf16, deterministic kernels."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import prepared_run
from mt_cli.config import build_config
from mt_cli.device import amp_dtype
from mt_cli.errors import MtError
from mt_cli.train import distributed as ddp
from mt_cli.train.batches import Layout
from mt_cli.train.hardware import _fits_on, batch_rate, fastest, largest_fitting
from mt_cli.train.inputs import DataSpec
from mt_cli.train.step import train_step


def test_an_fp16_step_with_a_non_finite_loss_updates_the_scaler_so_the_next_step_runs(
    corpus_files, tmp_path
):
    run = prepared_run(corpus_files, tmp_path)
    # fp16's scaler, enabled, on the CPU
    run.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    real = run.objective.forward
    calls = []

    def overflowing(*args):
        calls.append(1)
        loss = real(*args)
        return loss * float("inf") if len(calls) == 1 else loss

    run.objective.forward = overflowing
    batch = Layout.of(run).batch(np.arange(8))
    loss = train_step(run, batch).loss
    # the overflow lowered the scale
    assert not torch.isfinite(loss) and run.scaler.get_scale() == 2.0**7
    before = [p.detach().clone() for p in run.model.parameters()]
    result = train_step(run, batch)  # raised "unscale_() has already been called" before the fix
    loss, norm = result.loss, result.grad_norm
    assert torch.isfinite(loss) and torch.isfinite(norm)
    # this one updated
    assert any(not torch.equal(a, p) for a, p in zip(before, run.model.parameters()))


class _Failing(torch.nn.Module):
    """A probe objective whose step fails above `limit` tokens the way cuBLAS does when it cannot
    allocate."""

    def __init__(self, limit: int, message: str) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
        self.limit, self.message = limit, message

    def forward(self, src, tgt_in, tgt_out):
        if src.numel() > self.limit:
            raise RuntimeError(self.message)
        return self.w * src.float().mean()


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
        "CUDA out of memory. Tried to allocate 2.00 GiB",
    ],
)
def test_the_batch_probe_reads_library_allocation_failures_as_not_fitting(message):
    objective = _Failing(30_000, message)
    fits = _fits_on(objective, torch.device("cpu"), None, 10, 100, torch.Generator().manual_seed(0))
    found = largest_fitting(fits, 1024, 1 << 20)
    assert 30_000 * 15 / 16 <= found <= 30_000


def test_the_batch_probe_still_raises_errors_that_are_not_about_memory():
    fits = _fits_on(
        _Failing(10, "shape mismatch"), torch.device("cpu"), None, 10, 100, torch.Generator()
    )
    with pytest.raises(RuntimeError, match="shape mismatch"):
        fits(1024)


def test_the_fastest_batch_is_the_smallest_within_five_percent_of_the_best_rate():
    assert fastest({80_000: 100.0, 40_000: 97.0, 20_000: 70.0}) == 40_000
    assert fastest({80_000: 100.0, 40_000: 90.0, 20_000: 70.0}) == 80_000
    assert fastest({80_000: 60.0, 40_000: 100.0, 20_000: 99.0}) == 20_000


def test_batch_tokens_auto_takes_the_size_that_trains_fastest_not_the_largest(
    corpus_files, tmp_path, monkeypatch
):
    import mt_cli.train.hardware as hardware

    run = prepared_run(corpus_files, tmp_path)
    timed = []

    def rate(objective, device, amp, data, tokens, seed):
        timed.append(tokens)
        return {80_000: 50_000.0, 40_000: 60_000.0, 20_000: 59_000.0}.get(tokens, 10_000.0)

    monkeypatch.setattr(hardware, "probe_batch_tokens", lambda *a: 100_000)
    monkeypatch.setattr(hardware, "batch_rate", rate)
    said: list[str] = []
    tokens = hardware.auto_batch_tokens(
        run.objective, torch.device("cuda"), None, run.train_data, run.cfg, ddp.Dist(), said.append
    )
    assert timed == [80_000, 40_000, 20_000, 10_000]  # 80% of what fits, then its halves
    assert tokens == 20_000  # within 5% of the fastest, with twice its updates
    assert "20000: 59,000" in said[0] and said[-1].endswith("20000 per global batch")


def test_a_batch_rate_is_timed_on_the_datas_own_batches_and_leaves_the_rng_alone(
    corpus_files, tmp_path
):
    run = prepared_run(corpus_files, tmp_path)
    before = torch.get_rng_state()
    rate = batch_rate(run.objective, torch.device("cpu"), None, run.train_data, 300, seed=0)
    assert rate > 0 and torch.equal(torch.get_rng_state(), before)
    assert all(p.grad is None for p in run.model.parameters())  # no update, no gradient left


def test_bf16_on_a_gpu_without_it_is_one_line_naming_the_fp16_fallback(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Tesla V100-SXM2-16GB")
    with pytest.raises(
        MtError, match=r"Tesla V100-SXM2-16GB has no bf16; set train.amp to fp16 \(trains with"
    ):
        amp_dtype("bf16", torch.device("cuda"))
    # auto falls back to fp32 there, no error
    assert amp_dtype("auto", torch.device("cuda")) is None


def test_deterministic_training_sets_deterministic_kernels_and_repeats_itself(
    corpus_files, tmp_path
):
    f = corpus_files
    code = """
import sys, torch
from mt_cli.cli import main
sys.argv = ["mt", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("deterministic", torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark)
"""
    logs = []
    for name in ("a", "b"):
        args = [
            "train",
            "--train-src",
            f["train_src"],
            "--train-tgt",
            f["train_tgt"],
            "--valid-src",
            f["valid_src"],
            "--valid-tgt",
            f["valid_tgt"],
            "--out",
            tmp_path / name,
            "--preset",
            "tiny",
            "--max-steps",
            "6",
            "--batch-tokens",
            "300",
            "--device",
            "cpu",
            "--deterministic",
            "--set",
            "tokenizer.vocab_size=100",
            "--set",
            "train.log_every=2",
        ]
        done = subprocess.run(
            [sys.executable, "-c", code, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "deterministic algorithms on (train.deterministic)" in done.stderr
        assert done.stdout.strip().endswith("deterministic True False")
        logs.append(
            [
                json.loads(line)["loss"]
                for line in (tmp_path / name / "log.jsonl").read_text().splitlines()
                if '"loss"' in line
            ]
        )
    assert logs[0] == logs[1] and len(logs[0]) == 3


def test_a_compiled_step_that_fails_in_its_backward_pass_is_run_again_eagerly(
    corpus_files, tmp_path, monkeypatch
):
    from torch._dynamo.backends.common import aot_autograd

    from mt_cli.train.loop import train

    def no_backward(graph, example_inputs):  # compiled lazily, at the first backward pass
        raise RuntimeError("backward compiler failed (stand-in)")

    backend = aot_autograd(
        fw_compiler=lambda graph, example_inputs: graph.forward, bw_compiler=no_backward
    )
    real_compile = torch.compile
    monkeypatch.setattr(
        torch, "compile", lambda module, **kw: real_compile(module, backend=backend)
    )
    f = corpus_files
    spec = DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"])
    cfg = build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": {"max_steps": 3, "compile": True, "batch_tokens": 300},
        },
    )
    said: list[str] = []
    state = train(spec, tmp_path / "run", cfg, log=said.append)
    assert state.step == 3
    assert (
        sum(
            "torch.compile failed (RuntimeError: backward compiler failed (stand-in))" in m
            for m in said
        )
        == 1
    )


def test_fp16_output_layer_gradients_are_formed_after_the_loss_scale_so_small_ones_survive():
    """fp16's smallest number is 6e-8: a token every row finds about 1e-8 likely has a gradient
    only if it is formed after the loss scale (as autograd would), not before (it was all zeros)."""
    from mt_cli.model.loss import output_layer_loss

    gen = torch.Generator().manual_seed(0)
    h = torch.randn(64, 32, generator=gen) * 0.5 + 1.0
    w = torch.randn(500, 32, generator=gen) * 0.3
    w[7] = -0.4  # every row gives token 7 a probability of 4e-11 to 2.5e-8
    target = torch.randint(8, 500, (64,), generator=gen)
    h.requires_grad_()
    w.requires_grad_()
    scale = 1024.0  # the loss scale a GradScaler would put on it
    ref_h, ref_w = torch.autograd.grad(output_layer_loss(h, w, target, 0.0) * scale, (h, w))
    with torch.autocast("cpu", dtype=torch.float16):
        loss = output_layer_loss(h, w, target, 0.0)
    got_h, got_w = torch.autograd.grad(loss * scale, (h, w))
    # was 1.0: the row came out zero
    assert float((got_w[7] - ref_w[7]).norm() / ref_w[7].norm()) < 0.02
    assert (
        float((got_w - ref_w).norm() / ref_w.norm()) < 0.01
        and float((got_h - ref_h).norm() / ref_h.norm()) < 0.01
    )


def test_an_nccl_job_makes_collective_timeouts_raise_where_lost_contact_is_reported(monkeypatch):
    """NCCL's watchdog would otherwise kill the process on a timeout before Python saw an error."""
    seen = {}

    def init(backend, timeout):
        seen.update(backend=backend, blocking=os.environ.get("TORCH_NCCL_BLOCKING_WAIT"))

    monkeypatch.setattr(torch.distributed, "init_process_group", init)
    monkeypatch.setattr(torch.distributed, "destroy_process_group", lambda: None)
    monkeypatch.delenv("TORCH_NCCL_BLOCKING_WAIT", raising=False)
    with pytest.raises(MtError, match="rank 1: lost contact with the other processes"):
        with ddp.process_group(ddp.Dist(1, 2, 1, 60.0), torch.device("cuda", 1)):
            raise torch.distributed.DistBackendError("Watchdog caught collective operation timeout")
    assert seen == {"backend": "nccl", "blocking": "1"}
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "0")  # the user's own choice stays
    with ddp.process_group(ddp.Dist(1, 2, 1, 60.0), torch.device("cuda", 1)):
        pass
    assert seen["blocking"] == "0"
