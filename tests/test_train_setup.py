"""What a run sets up once: the resolved batch size, the optimizer's groups, validation's own
batches, the counts it reports, the configs it refuses to resume with, and how it stops."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import torch
import yaml

from conftest import tiny_config
from mt_cli.config import Config, TrainConfig, build_config
from mt_cli.data.pairs import Pairs
from mt_cli.errors import MtError
from mt_cli.model import checkpoint
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.train import hardware
from mt_cli.train import validation as validation_module
from mt_cli.train.hardware import faster_amp
from mt_cli.train.inputs import DataSpec
from mt_cli.train.loop import train
from mt_cli.train.setup import make_optimizer
from mt_cli.train.signals import StopSignals


def _spec(files) -> DataSpec:
    return DataSpec.text_files(
        files["train_src"], files["train_tgt"], files["valid_src"], files["valid_tgt"]
    )


def _config(**train_fields) -> Config:
    train_fields = {"batch_tokens": 300, "valid_every": 100, "device": "cpu", **train_fields}
    return build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": train_fields,
            "decode": {"beam": 1, "max_len_offset": 5},
        },
    )


def test_batch_tokens_auto_is_resolved_once_saved_in_config_yaml_and_last_pt_and_reused_on_resume(
    corpus_files, tmp_path, monkeypatch
):
    probes = []
    real = hardware.auto_batch_tokens

    def counted(*args, **kwargs):
        probes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(hardware, "auto_batch_tokens", counted)
    out = tmp_path / "run"
    said: list[str] = []
    train(_spec(corpus_files), out, _config(batch_tokens=0, max_steps=2), log=said.append)
    resolved = TrainConfig.batch_tokens  # on a CPU, auto is the default
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["batch_tokens"] == resolved
    last = checkpoint.load(out / "last.pt")
    assert (
        last.config.train.batch_tokens == resolved and last.train_state["batch_tokens"] == resolved
    )
    train(_spec(corpus_files), out, _config(batch_tokens=0, max_steps=4), log=said.append)
    assert len(probes) == 1  # the resumed run did not probe again
    assert f"batch_tokens auto: {resolved}, as resolved when the run started" in said
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["batch_tokens"] == resolved


def test_validation_batches_by_its_own_token_budget_never_the_output_layer_on_whole_batches(
    tokenizer, corpus, monkeypatch
):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer)).eval()
    src, tgt = corpus
    pairs = Pairs(tokenizer.encode_src(src[:40]), tokenizer.encode_tgt(tgt[:40]))
    budgets = []
    real = validation_module.make_batches

    def spy(src_lens, tgt_lens, batch_tokens, seed):
        budgets.append(batch_tokens)
        return real(src_lens, tgt_lens, batch_tokens, seed)

    monkeypatch.setattr(validation_module, "make_batches", spy)
    rows = []
    real_projection = model.output_projection.forward
    model.output_projection.forward = lambda h: rows.append(h.shape[0]) or real_projection(h)
    monkeypatch.setattr(
        Transformer, "forward", lambda *a, **k: pytest.fail("validation built whole-batch logits")
    )
    monkeypatch.setattr(validation_module, "LOSS_CHUNK", 16)
    cfg = build_config(
        "tiny",
        options={
            "train": {"batch_tokens": 64, "valid_batch_tokens": 100000},
            "decode": {"beam": 1},
        },
    )
    v = validation_module.validate(model, tokenizer, pairs, tgt[:40], cfg, torch.device("cpu"))
    assert budgets == [100000]  # one batch of all 40 pairs, not the training batch's budget
    n_targets = sum(len(t) + 1 for t in pairs.tgt)
    loss_rows = rows[: (n_targets + 15) // 16]  # then come the decoding steps' calls
    # the loss's logits, a chunk at a time
    assert max(loss_rows) <= 16 and sum(loss_rows) == n_targets
    assert v.loss > 0 and v.nll > 0


def test_weight_decay_shrinks_weight_matrices_but_not_biases_or_layernorm_weights(tokenizer):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = make_optimizer(model, TrainConfig(weight_decay=0.5, lr=0.1), torch.device("cpu"))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # no gradient: only the decay moves anything
    optimizer.step()
    for name, p in model.named_parameters():
        moved = not torch.equal(p.detach(), before[name])
        assert moved == (p.dim() >= 2), name
    assert any("norm" in n for n, p in model.named_parameters() if p.dim() == 1)


def test_bytes_that_are_not_utf8_in_the_validation_set_are_counted_in_the_log(
    corpus_files, tmp_path
):
    valid = corpus_files["valid_src"].read_bytes().split(b"\n")
    valid[2] = valid[2] + b" \xff"
    (tmp_path / "valid.de").write_bytes(b"\n".join(valid))
    spec = DataSpec.text_files(
        corpus_files["train_src"],
        corpus_files["train_tgt"],
        tmp_path / "valid.de",
        corpus_files["valid_tgt"],
    )
    said: list[str] = []
    train(spec, tmp_path / "run", _config(max_steps=1, on_bad_utf8="replace"), log=said.append)
    line = next(m for m in said if m.startswith(f"{tmp_path / 'valid.de'} / "))
    assert "repaired (U+FFFD) 1 with bytes that are not UTF-8" in line


def test_resuming_with_a_different_tokenizer_config_is_refused_and_last_pt_is_kept(
    corpus_files, tmp_path
):
    out = tmp_path / "run"
    train(_spec(corpus_files), out, _config(max_steps=2), log=lambda m: None)
    before = (out / "last.pt").read_bytes()
    other = build_config(
        "tiny",
        options={"tokenizer": {"vocab_size": 90}, "train": {"max_steps": 4, "batch_tokens": 300}},
    )
    with pytest.raises(
        MtError, match=r"last\.pt: the run was started with a different tokenizer config"
    ):
        train(_spec(corpus_files), out, other, log=lambda m: None)
    assert (out / "last.pt").read_bytes() == before


def test_a_first_signal_asks_to_stop_and_a_second_stops_at_once():
    previous = signal.getsignal(signal.SIGINT)
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested == "SIGINT"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGINT) is previous  # the handlers are put back


def test_a_second_ctrl_c_mid_step_stops_training_at_once_without_saving(
    corpus_files, tmp_path, monkeypatch
):
    import mt_cli.train.loop as loop

    out = tmp_path / "run"
    train(_spec(corpus_files), out, _config(max_steps=3, save_every=3), log=lambda m: None)
    before = (out / "last.pt").read_bytes()
    real_step, calls = loop.train_step, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # Ctrl-C twice in the middle of the second step
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "train_step", interrupted)
    with pytest.raises(
        MtError, match=r"stopped at once, mid-step; .*last\.pt holds the last saved state"
    ):
        train(_spec(corpus_files), out, _config(max_steps=10, save_every=3), log=lambda m: None)
    assert (out / "last.pt").read_bytes() == before  # nothing was saved after the second signal
    assert len(calls) == 2


def test_resuming_with_weight_decay_switched_on_is_refused_with_one_line(corpus_files, tmp_path):
    out = tmp_path / "run"
    train(_spec(corpus_files), out, _config(max_steps=2), log=lambda m: None)
    with pytest.raises(
        MtError, match=r"last\.pt: its optimizer state does not fit this run's optimizer"
    ):
        train(_spec(corpus_files), out, _config(max_steps=4, weight_decay=0.1), log=lambda m: None)


def test_faster_amp_picks_the_arithmetic_that_times_faster_and_leaves_the_rng_alone():
    class Objective(torch.nn.Module):
        def __init__(self, slow_bf16: bool) -> None:
            super().__init__()
            self.w, self.slow_bf16 = torch.nn.Parameter(torch.ones(3)), slow_bf16

        def forward(self, src, tgt_in, tgt_out):
            if torch.is_autocast_enabled("cpu") == self.slow_bf16:
                time.sleep(0.02)  # the slower arithmetic
            return (self.w * torch.rand(3)).sum()  # dropout-like draws on the RNG

    batches = [(torch.zeros(1),) * 3] * 2
    rng = torch.get_rng_state()
    assert faster_amp(Objective(slow_bf16=True), batches, rounds=2) is None
    assert faster_amp(Objective(slow_bf16=False), batches, rounds=2) == torch.bfloat16
    assert torch.equal(torch.get_rng_state(), rng)


def test_amp_auto_times_once_on_a_bf16_cpu_and_a_resumed_run_keeps_the_choice(
    corpus_files, tmp_path, monkeypatch
):
    timed = []
    monkeypatch.setattr(hardware, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(hardware, "AMP_PROBE_MIN_D_MODEL", 0)
    monkeypatch.setattr(
        hardware,
        "faster_amp",
        lambda objective, batches: timed.append(len(batches)) or torch.bfloat16,
    )
    out, said = tmp_path / "run", []
    train(_spec(corpus_files), out, _config(max_steps=2), log=said.append)
    assert timed == [2] and "amp auto: bf16 (bf16 autocast trained faster here)" in said
    assert checkpoint.load(out / "last.pt").train_state["amp"] == "bf16"
    assert json.loads((out / "run.json").read_text())["environment"]["autocast"] == "torch.bfloat16"
    train(_spec(corpus_files), out, _config(max_steps=4), log=said.append)
    assert timed == [2] and "amp auto: bf16, as chosen when the run started" in said


def test_amp_auto_does_not_time_a_deterministic_run(corpus_files, tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(hardware, "AMP_PROBE_MIN_D_MODEL", 0)
    monkeypatch.setattr(hardware, "faster_amp", lambda *a: pytest.fail("timed a deterministic run"))
    train(
        _spec(corpus_files),
        tmp_path / "run",
        _config(max_steps=1, deterministic=True),
        log=lambda *_: None,
    )
    assert checkpoint.load(tmp_path / "run" / "last.pt").train_state["amp"] == "off"
