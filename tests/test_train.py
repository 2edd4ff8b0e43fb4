import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_config
from mt_cli.config import Config, DecodeConfig, build_config
from mt_cli.data.collate import collate
from mt_cli.data.pairs import Pairs
from mt_cli.decode.engine import Engine
from mt_cli.decode.search import search_ids
from mt_cli.errors import MtError
from mt_cli.model import checkpoint
from mt_cli.model.loss import label_smoothed_loss, output_layer_loss
from mt_cli.model.transformer import build_model
from mt_cli.train.inputs import DataSpec
from mt_cli.train.loop import train
from mt_cli.train.schedule import lr_at


def test_lr_warms_up_linearly_to_its_peak_then_decays_as_inverse_square_root():
    peak, warmup = 1e-3, 100
    assert lr_at(1, peak, warmup) == pytest.approx(peak / 100)
    assert lr_at(50, peak, warmup) == pytest.approx(peak / 2)
    assert lr_at(100, peak, warmup) == pytest.approx(peak)
    assert lr_at(400, peak, warmup) == pytest.approx(peak / 2)
    assert lr_at(10, peak, 0) == peak
    steps = [lr_at(s, peak, warmup) for s in range(1, 1000)]
    assert max(steps) == pytest.approx(peak)


def test_cosine_lr_warms_up_then_falls_to_zero_as_the_budget_is_spent():
    peak, warmup = 1e-3, 100
    assert lr_at(50, peak, warmup, "cosine", progress=0.0) == pytest.approx(peak / 2)
    assert lr_at(100, peak, warmup, "cosine", progress=0.0) == pytest.approx(peak)
    assert lr_at(5000, peak, warmup, "cosine", progress=0.5) == pytest.approx(peak / 2)
    assert lr_at(5000, peak, warmup, "cosine", progress=1.0) == pytest.approx(0.0)
    # past the budget: no rise
    assert lr_at(9000, peak, warmup, "cosine", progress=1.3) == pytest.approx(0.0)
    falling = [lr_at(1000, peak, warmup, "cosine", progress=p / 100) for p in range(101)]
    assert all(a > b for a, b in zip(falling, falling[1:]))


def test_wsd_lr_holds_its_peak_then_falls_linearly_to_zero_over_the_cooldown():
    peak, warmup = 1e-3, 100
    assert lr_at(50, peak, warmup, "wsd", progress=0.0, cooldown=0.2) == pytest.approx(peak / 2)
    assert lr_at(3000, peak, warmup, "wsd", progress=0.5, cooldown=0.2) == pytest.approx(peak)
    assert lr_at(3000, peak, warmup, "wsd", progress=0.8, cooldown=0.2) == pytest.approx(peak)
    assert lr_at(3000, peak, warmup, "wsd", progress=0.9, cooldown=0.2) == pytest.approx(peak / 2)
    assert lr_at(3000, peak, warmup, "wsd", progress=1.0, cooldown=0.2) == pytest.approx(0.0)
    assert lr_at(3000, peak, warmup, "wsd", progress=1.2, cooldown=0.2) == pytest.approx(0.0)


def test_a_cosine_run_logs_a_falling_lr_that_ends_near_zero(corpus_files, tmp_path):
    import json

    out = tmp_path / "run"
    cfg = _tiny_run_config(
        max_steps=40, warmup_steps=5, lr_schedule="cosine", log_every=5, valid_every=40
    )
    train(*_paths(corpus_files, out), cfg, log=lambda m: None)
    lrs = [
        e["lr"] for e in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "lr" in e
    ]
    assert len(lrs) == 8 and all(a > b for a, b in zip(lrs, lrs[1:]))
    assert lrs[-1] < cfg.train.lr * 0.01


def test_label_smoothed_loss_matches_the_formula_and_torch_and_ignores_padding_targets():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    target = torch.tensor([[1, 2, 0], [3, 0, 0]])  # 0 is padding
    loss, nll = label_smoothed_loss(logits, target, smoothing=0.1)
    lp = F.log_softmax(logits, -1)
    want_nll = -(lp[0, 0, 1] + lp[0, 1, 2] + lp[1, 0, 3])
    want_uniform = -(lp[0, 0].mean() + lp[0, 1].mean() + lp[1, 0].mean())
    assert nll.item() == pytest.approx(want_nll.item(), rel=1e-6)
    assert loss.item() == pytest.approx((0.9 * want_nll + 0.1 * want_uniform).item(), rel=1e-6)
    torch_loss = F.cross_entropy(
        logits.view(-1, 5), target.view(-1), ignore_index=0, label_smoothing=0.1, reduction="sum"
    )
    assert loss.item() == pytest.approx(torch_loss.item(), rel=1e-5)
    assert label_smoothed_loss(logits, target, 0.0)[0].item() == pytest.approx(nll.item())
    # Training scores the real tokens only, flattened: the same sums.
    keep = target != 0
    flat, flat_nll = label_smoothed_loss(logits[keep], target[keep], smoothing=0.1)
    assert (flat.item(), flat_nll.item()) == pytest.approx((loss.item(), nll.item()), rel=1e-6)


def test_chunked_output_layer_loss_equals_the_plain_loss_and_its_gradients():
    torch.manual_seed(0)
    h = torch.randn(300, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    target = torch.randint(1, 50, (300,))
    want = label_smoothed_loss(h @ weight.t(), target, smoothing=0.1)[0]
    want.backward()
    want_h, want_w = h.grad.clone(), weight.grad.clone()
    h.grad = weight.grad = None
    # 300 rows: the last chunk is short
    got = output_layer_loss(h, weight, target, smoothing=0.1, chunk=64)
    (2.0 * got).backward()  # the incoming gradient scales what the forward pass worked out
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    torch.testing.assert_close(h.grad, 2.0 * want_h, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weight.grad, 2.0 * want_w, rtol=1e-5, atol=1e-5)


def test_loss_falls_and_greedy_reproduces_the_targets_when_overfitting_8_pairs(tokenizer, corpus):
    src_lines, tgt_lines = corpus[0][:8], corpus[1][:8]
    pairs = Pairs(tokenizer.encode_src(src_lines), tokenizer.encode_tgt(tgt_lines))
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer, d_model=64, ffn_dim=128))
    optim = torch.optim.Adam(model.parameters(), lr=3e-3)
    src, tgt_in, tgt_out = collate(*pairs.take(range(8)), model.start_token)
    losses = []
    for _ in range(150):
        loss, _ = label_smoothed_loss(model(src, tgt_in), tgt_out, smoothing=0.0)
        loss = loss / (tgt_out != 0).sum()
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 20
    hyps = [h[0].tokens for h in search_ids(Engine(model), pairs.src, DecodeConfig(beam=1))]
    assert tokenizer.decode_tgt(hyps) == tgt_lines


def _paths(files, out: Path) -> tuple[DataSpec, Path]:
    return (
        DataSpec.text_files(
            files["train_src"], files["train_tgt"], files["valid_src"], files["valid_tgt"]
        ),
        out,
    )


def _tiny_run_config(**train) -> Config:
    return build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": {
                "batch_tokens": 300,
                "valid_every": 10,
                "log_every": 5,
                "device": "cpu",
                **train,
            },
            "decode": {"beam": 2, "max_len_offset": 5},
        },
    )


def test_training_writes_best_last_and_a_jsonl_log_with_the_promised_fields(corpus_files, tmp_path):
    out = tmp_path / "run"
    state = train(*_paths(corpus_files, out), _tiny_run_config(max_steps=20), log=lambda m: None)
    assert state.step == 20
    for name in ("best.pt", "last.pt", "log.jsonl", "config.yaml", "tokenizer/joint.model"):
        assert (out / name).is_file(), name
    import json

    entries = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    train_entries = [e for e in entries if "loss" in e]
    valid_entries = [e for e in entries if "valid_bleu" in e]
    assert [e["step"] for e in train_entries] == [5, 10, 15, 20]
    assert {"step", "loss", "lr", "tokens_per_s"} <= set(train_entries[0])
    assert [e["step"] for e in valid_entries] == [10, 20]
    assert {"valid_loss", "valid_bleu"} <= set(valid_entries[0])
    assert checkpoint.load(out / "last.pt").train_state["step"] == 20
    assert checkpoint.load(out / "best.pt").train_state is None


def test_the_same_seed_gives_the_same_run(corpus_files, tmp_path):
    cfg = _tiny_run_config(max_steps=8, valid_every=100)
    weights = []
    for name in ("a", "b"):
        train(*_paths(corpus_files, tmp_path / name), cfg, log=lambda m: None)
        weights.append(checkpoint.load(tmp_path / name / "last.pt").model_state)
    for key in weights[0]:
        assert torch.equal(weights[0][key], weights[1][key]), key


def test_rerunning_on_a_finished_run_resumes_and_continues_to_the_new_limit(corpus_files, tmp_path):
    out = tmp_path / "run"
    messages: list[str] = []
    train(*_paths(corpus_files, out), _tiny_run_config(max_steps=10), log=lambda m: None)
    state = train(*_paths(corpus_files, out), _tiny_run_config(max_steps=15), log=messages.append)
    assert state.step == 15
    assert any("resuming" in m and "step 10" in m for m in messages)


def test_max_epochs_stops_after_whole_passes(corpus_files, tmp_path):
    state = train(
        *_paths(corpus_files, tmp_path / "run"), _tiny_run_config(max_epochs=1), log=lambda m: None
    )
    assert state.epoch == 1 and state.batch_in_epoch == 0 and state.step > 1


def test_each_epoch_is_shuffled_with_its_own_seed_as_a_resumed_run_shuffles_it(
    corpus_files, tmp_path, monkeypatch
):
    """Epoch e trains on make_batches(..., seed + e): the order a run resumed in epoch e replays.
    (Every epoch after the first used to repeat the first one's order, unless the run was resumed.)
    """
    import mt_cli.train.loop as loop
    from mt_cli.data.pairs import make_batches

    seen, real_step, lens = [], loop.train_step, []

    def spy(run, batch, *args, **kwargs):
        seen.append(batch.indices.tolist())
        lens[:] = [run.train_data.src_lens, run.train_data.tgt_lens]
        return real_step(run, batch, *args, **kwargs)

    monkeypatch.setattr(loop, "train_step", spy)
    cfg = _tiny_run_config(max_epochs=2, valid_every=1000)
    state = train(*_paths(corpus_files, tmp_path / "run"), cfg, log=lambda m: None)
    t = cfg.train
    epochs = [make_batches(*lens, t.batch_tokens, seed=t.seed + e) for e in (0, 1)]
    assert state.step == len(seen) == len(epochs[0]) + len(epochs[1])
    assert seen == [b.tolist() for b in epochs[0] + epochs[1]]


def test_config_defaults_are_sane_for_the_small_preset():
    cfg = build_config("small")
    assert (cfg.model.d_model, cfg.model.enc_layers, cfg.model.dec_layers) == (256, 3, 3)
    # The training and tokenizer defaults the README's recipes are written against.
    assert (
        cfg.train.batch_tokens,
        cfg.train.lr,
        cfg.train.warmup_steps,
        cfg.train.lr_schedule,
    ) == (
        2048,
        1e-3,
        400,
        "inverse_sqrt",
    )
    assert (cfg.tokenizer.vocab_size, cfg.tokenizer.model_type, cfg.tokenizer.joint) == (
        8000,
        "unigram",
        True,
    )
    assert (cfg.decode.beam, cfg.decode.length_penalty, cfg.decode.method) == (5, 1.0, "beam")
    assert math.isclose(cfg.train.label_smoothing, 0.1)


def test_keep_last_keeps_the_newest_validations_and_average_last_writes_an_averaged_model(
    corpus_files, tmp_path
):
    import json

    out = tmp_path / "run"
    cfg = _tiny_run_config(max_steps=40, valid_every=10, keep_last=2, average_last=3)
    train(*_paths(corpus_files, out), cfg, log=lambda m: None)
    # average_last 3 needs three kept checkpoints even though keep_last is 2.
    assert sorted(p.name for p in out.glob("step*.pt")) == ["step20.pt", "step30.pt", "step40.pt"]
    assert (out / "averaged.pt").is_file()
    last = [
        r for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "averaged" in r
    ][-1]
    assert last["averaged"] == ["step20.pt", "step30.pt", "step40.pt"] and "valid_bleu" in last


def test_early_stopping_ends_the_run_after_patience_validations_without_improvement(
    corpus_files, tmp_path
):
    # A learning rate of ~0 keeps the model, and so the validation BLEU, from ever improving.
    cfg = _tiny_run_config(max_steps=200, valid_every=5, patience=2, lr=1e-12, warmup_steps=0)
    messages: list[str] = []
    state = train(*_paths(corpus_files, tmp_path / "run"), cfg, log=messages.append)
    assert state.step == 15 and state.best_step == 5
    assert any("early stop" in m for m in messages)


def test_ema_update_moves_each_weight_a_fixed_fraction_toward_the_model(tokenizer):
    from mt_cli.train.step import ema_update

    torch.manual_seed(0)
    model, ema = build_model(tiny_config(tokenizer)), build_model(tiny_config(tokenizer))
    before = {k: v.clone() for k, v in ema.state_dict().items()}
    ema_update(ema, model, decay=0.9)
    for (name, e), p in zip(ema.named_parameters(), model.parameters()):
        torch.testing.assert_close(e, 0.9 * before[name] + 0.1 * p)


def test_with_ema_best_holds_the_averaged_weights_and_last_can_resume_them(corpus_files, tmp_path):
    out = tmp_path / "run"
    train(
        *_paths(corpus_files, out),
        _tiny_run_config(max_steps=10, ema_decay=0.9),
        log=lambda m: None,
    )
    best, last = checkpoint.load(out / "best.pt"), checkpoint.load(out / "last.pt")
    key = "decoder.layers.0.feed_forward.fc1.weight"
    assert torch.equal(best.model_state[key], last.train_state["ema"][key])
    assert not torch.equal(best.model_state[key], last.model_state[key])
    state = train(
        *_paths(corpus_files, out),
        _tiny_run_config(max_steps=12, ema_decay=0.9),
        log=lambda m: None,
    )
    assert state.step == 12


def _nan_on(calls: set[int], monkeypatch):
    """Make the training loss NaN on the given calls (1-based), as a bad batch or an overflow
    would."""
    import mt_cli.model.loss as loss_module

    real, count = loss_module.output_layer_loss, [0]

    def loss(*args, **kwargs):
        count[0] += 1
        value = real(*args, **kwargs)
        return value * float("nan") if count[0] in calls else value

    monkeypatch.setattr(loss_module, "output_layer_loss", loss)


def test_a_non_finite_step_is_skipped_with_a_warning_and_training_goes_on(
    corpus_files, tmp_path, monkeypatch
):
    _nan_on({3, 4}, monkeypatch)
    out = tmp_path / "run"
    cfg = _tiny_run_config(max_steps=8, log_every=1, valid_every=8)
    train(*_paths(corpus_files, out), cfg, log=lambda m: None)
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log if "skipped" in e] == [3, 4]
    assert all(math.isfinite(e["loss"]) for e in log if "loss" in e)
    weights = checkpoint.load(out / "last.pt").model_state
    assert all(torch.isfinite(w).all() for w in weights.values() if w.is_floating_point())


def test_too_many_non_finite_steps_stop_the_run_and_leave_last_pt_as_it_was(
    corpus_files, tmp_path, monkeypatch
):
    out = tmp_path / "run"
    cfg = _tiny_run_config(max_steps=4, valid_every=4)
    train(*_paths(corpus_files, out), cfg, log=lambda m: None)
    before = (out / "last.pt").read_bytes()
    _nan_on(set(range(1, 100)), monkeypatch)
    cfg = _tiny_run_config(max_steps=20, valid_every=4, max_nonfinite=3)
    with pytest.raises(MtError, match="not finite 3 steps in a row"):
        train(*_paths(corpus_files, out), cfg, log=lambda m: None)
    assert (out / "last.pt").read_bytes() == before


def test_save_every_writes_last_pt_between_validations(corpus_files, tmp_path, monkeypatch):
    import mt_cli.train.loop as train_module

    def crash_after_step_4(state, *args):  # a crash that leaves no chance to save
        if state.step > 4:
            raise MtError("crash")
        return False

    monkeypatch.setattr(train_module, "count_nonfinite", crash_after_step_4)
    out = tmp_path / "run"
    with pytest.raises(MtError, match="crash"):
        train(
            *_paths(corpus_files, out),
            _tiny_run_config(max_steps=7, valid_every=100, save_every=3),
            log=print,
        )
    # saved at step 3, no validation yet
    assert checkpoint.load(out / "last.pt").train_state["step"] == 3


def test_resuming_with_changed_data_is_refused(corpus_files, tmp_path):
    files = {k: tmp_path / f"{k}.txt" for k in corpus_files}
    for k, path in files.items():
        path.write_bytes(corpus_files[k].read_bytes())
    out = tmp_path / "run"
    train(*_paths(files, out), _tiny_run_config(max_steps=2, valid_every=2), log=lambda m: None)
    # same data: resumes
    train(*_paths(files, out), _tiny_run_config(max_steps=3, valid_every=2), log=lambda m: None)
    files["train_tgt"].write_text(files["train_tgt"].read_text().replace("dog", "cat"))
    with pytest.raises(
        MtError, match=r"train_src\.txt / .*train_tgt\.txt: not the train data that .*last\.pt was"
    ):
        train(*_paths(files, out), _tiny_run_config(max_steps=4, valid_every=2), log=lambda m: None)


def test_resuming_with_a_different_model_config_is_refused_and_last_pt_is_kept(
    corpus_files, tmp_path
):
    out = tmp_path / "run"
    train(
        *_paths(corpus_files, out), _tiny_run_config(max_steps=2, valid_every=2), log=lambda m: None
    )
    before = (out / "last.pt").read_bytes()
    wider = build_config(
        "tiny",
        options={"tokenizer": {"vocab_size": 100}, "train": {"max_steps": 4}},
        sets=["model.ffn_dim=96"],
    )
    with pytest.raises(
        MtError, match=r"last\.pt: the run was started with a different model config"
    ):
        train(*_paths(corpus_files, out), wider, log=lambda m: None)
    assert (out / "last.pt").read_bytes() == before
