"""Training batches built ahead, off the training thread, padded in one vectorised operation; a
training step that never reads a tensor back to the host."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import prepared_run
from mt_cli.config import build_config
from mt_cli.data.cache import TokenCorpus, build_cache
from mt_cli.data.collate import collate
from mt_cli.data.pairs import limit_length
from mt_cli.data.ragged import Ragged
from mt_cli.data.sources import TextPair
from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.train.batches import Layout, Prefetcher
from mt_cli.train.epochs import Epochs
from mt_cli.train.inputs import DataSpec
from mt_cli.train.loop import train
from mt_cli.train.step import train_step


def _padded_one_by_one(seqs: list[list[int]]) -> list[list[int]]:
    width = max(len(s) for s in seqs)
    return [s + [PAD] * (width - len(s)) for s in seqs]


def test_collate_pads_as_a_row_by_row_loop_would_with_start_and_eos_in_place():
    rng = np.random.default_rng(0)
    src = [rng.integers(4, 50, rng.integers(1, 12)).tolist() for _ in range(40)]
    tgt = [rng.integers(4, 50, rng.integers(0, 12)).tolist() for _ in range(40)]
    s, ti, to = collate(Ragged.of(src), Ragged.of(tgt), start=2)
    assert s.tolist() == _padded_one_by_one(src)
    assert ti.tolist() == _padded_one_by_one([[2, *t] for t in tgt])
    assert to.tolist() == _padded_one_by_one([[*t, EOS] for t in tgt])
    assert s.dtype == ti.dtype == to.dtype == torch.long


def test_ragged_rows_come_back_in_any_order_with_repeats():
    rows = Ragged.of([[1, 2, 3], [4], [], [5, 6]])
    assert rows.rows(np.array([3, 0, 2, 3])).tolist() == [[5, 6], [1, 2, 3], [], [5, 6]]
    assert rows.keep(rows.positions() < 2).tolist() == [[1, 2], [4], [], [5, 6]]


def test_the_cache_truncates_long_pairs_as_limit_length_does(tmp_path, corpus_files, tokenizer):
    source = TextPair(corpus_files["train_src"], corpus_files["train_tgt"])
    path = build_cache(source, tokenizer, tmp_path / "cache", 1, print)
    whole = TokenCorpus(path, None, "drop", "error", "train")
    cut = TokenCorpus(path, 6, "truncate", "error", "train")
    src, tgt = (r.tolist() for r in whole.take(range(len(whole))))
    want, n_long = limit_length(src, tgt, 6, "truncate")
    assert n_long > 0  # some pairs were cut: the comparison bites
    got_src, got_tgt = (r.tolist() for r in cut.take(range(len(cut))))
    assert (got_src, got_tgt) == (want.src, want.tgt)
    assert [len(s) for s in got_src] == cut.src_lens.tolist()


def test_prefetched_batches_follow_the_epochs_order_across_an_epoch_from_mid_epoch(
    corpus_files, tmp_path
):
    run = prepared_run(corpus_files, tmp_path, accumulate=2)
    layout = Layout.of(run)
    epochs = Epochs(run.train_data, 300, seed=5)
    n = len(epochs.of(0))
    with Prefetcher(layout, 300, seed=5) as ahead:
        got, at = [], (0, n - 3)
        for _ in range(6):
            batch = ahead.next(*at)
            got.append((batch.epoch, batch.position, batch.indices.tolist()))
            at = (batch.epoch, batch.position + 1) if batch.position + 1 < n else (1, 0)
    want = [(0, k, epochs.of(0)[k].tolist()) for k in range(n - 3, n)]
    want += [(1, k, epochs.of(1)[k].tolist()) for k in range(3)]
    assert got == want
    one = layout.batch(epochs.of(1)[0])
    assert len(one.shares) == 2  # accumulate 2: two shares, each padded on its own
    rows = sum(share[0].size(0) for share in one.shares)
    assert rows == len(epochs.of(1)[0])
    assert one.tokens == int((run.train_data.tgt_lens[epochs.of(1)[0]] + 1).sum())
    assert one.tokens == sum(int((s[2] != PAD).sum()) for s in one.shares)


def test_an_error_while_building_a_batch_is_raised_in_the_training_thread(corpus_files, tmp_path):
    run = prepared_run(corpus_files, tmp_path)

    class Broken:
        src_lens, tgt_lens = run.train_data.src_lens, run.train_data.tgt_lens

        def take(self, indices):
            raise OSError("the cache file went away")

    layout = Layout(Broken(), run.model.start_token, slice(0, 1), 1, False)  # type: ignore[arg-type]
    with Prefetcher(layout, 300, seed=0) as ahead, pytest.raises(OSError, match="went away"):
        ahead.next(0, 0)


# what makes the host wait for a device: reading a tensor's value
READS = ["item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__"]


def test_a_training_step_reads_nothing_back_from_the_device(corpus_files, tmp_path, monkeypatch):
    run = prepared_run(corpus_files, tmp_path, ema_decay=0.99)
    batches = [Layout.of(run).batch(b) for b in Epochs(run.train_data, 300, seed=0).of(0)[:3]]
    reads: list[str] = []
    for name in READS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _real=real, **kwargs):
            reads.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    results = [train_step(run, b) for b in batches]
    assert reads == []
    monkeypatch.undo()
    assert all(torch.isfinite(r.loss) and not r.skipped for r in results)


def test_a_non_finite_step_is_skipped_on_the_device_weights_and_ema_untouched(
    corpus_files, tmp_path
):
    run = prepared_run(corpus_files, tmp_path, ema_decay=0.9)
    batch = Layout.of(run).batch(Epochs(run.train_data, 300, seed=0).of(0)[0])
    train_step(run, batch)  # one real update, so that the EMA differs from the model
    weights = [p.detach().clone() for p in run.model.parameters()]
    ema = [p.detach().clone() for p in run.ema.parameters()]
    steps = [s["step"].clone() for s in run.optimizer.state.values()]
    real = run.objective.forward
    run.objective.forward = lambda *a: real(*a) * float("nan")
    result = train_step(run, batch)
    assert bool(result.skipped)
    assert all(torch.equal(a, b) for a, b in zip(weights, run.model.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(ema, run.ema.parameters()))
    # AdamW's step count did not move either: the skipped step is as if it never was
    assert all(torch.equal(a, s["step"]) for a, s in zip(steps, run.optimizer.state.values()))


def test_the_loop_reads_the_device_once_a_log_window(corpus_files, tmp_path, monkeypatch):
    import mt_cli.train.loop as loop

    real, reads = loop.read, []

    def counted(results):
        reads.append(len(results))
        return real(results)

    monkeypatch.setattr(loop, "read", counted)
    f = corpus_files
    spec = DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"])
    train_cfg = {"batch_tokens": 300, "device": "cpu", "max_steps": 12, "log_every": 4}
    cfg = build_config(
        "tiny",
        options={"tokenizer": {"vocab_size": 100}, "train": {**train_cfg, "valid_every": 100}},
    )
    train(spec, tmp_path / "run", cfg, log=lambda m: None)
    assert [n for n in reads if n] == [4, 4, 4]  # 12 steps read in three windows, nothing else
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log if "loss" in e] == [4, 8, 12]
