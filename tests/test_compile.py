"""The training objective under torch.compile: one graph, no breaks, and no recompiles as batch
shapes change. Checked with dynamo's counting backends (no inductor, so it runs in seconds)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter

from conftest import prepared_run, tiny_config
from mt_cli.data.collate import collate
from mt_cli.model.loss import TranslationLoss
from mt_cli.model.transformer import build_model
from mt_cli.train.hardware import CompiledOrEager


def _batch(
    rows: int, src_len: int, tgt_len: int, padded: bool, vocab: int
) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(rows * 100 + src_len)
    src = [
        torch.randint(4, vocab, (src_len - (i if padded else 0),), generator=gen).tolist()
        for i in range(rows)
    ]
    tgt = [
        torch.randint(4, vocab, (tgt_len - (i if padded else 0),), generator=gen).tolist()
        for i in range(rows)
    ]
    return collate(src, tgt, 0)


def _objective(tokenizer, rdrop: float = 0.0) -> TranslationLoss:
    torch.manual_seed(0)
    return TranslationLoss(build_model(tiny_config(tokenizer)).train(), 0.1, rdrop)


def test_the_compiled_training_objective_has_no_graph_breaks(tokenizer):
    objective = _objective(tokenizer)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(objective)(*_batch(3, 7, 6, True, tokenizer.tgt_vocab_size))
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_batches_of_new_shapes_padded_or_not_do_not_recompile_the_objective(tokenizer, monkeypatch):
    counter, real_compile = CompileCounter(), torch.compile
    monkeypatch.setattr(
        torch, "compile", lambda module, **kw: real_compile(module, backend=counter, **kw)
    )
    torch._dynamo.reset()
    compiled = CompiledOrEager(_objective(tokenizer), lambda m: None)
    vocab = tokenizer.tgt_vocab_size
    for shape in [
        (3, 7, 6, True),
        (5, 9, 4, True),
        (2, 5, 8, False),
        (6, 11, 12, True),
        (4, 6, 6, False),
    ]:
        loss = compiled(*_batch(*shape, vocab))
        loss.backward()
    assert compiled.compiled is not None  # it never fell back to eager
    # One graph for every shape. The first batch's source and target happen to be both 7 long,
    # so dynamo guards on their being equal ("duck sizing") and compiles once more when they differ.
    assert counter.frame_count == 2


def test_the_compiled_objective_gives_the_loss_and_gradients_of_the_eager_one(tokenizer):
    eager, traced = _objective(tokenizer), _objective(tokenizer)
    torch._dynamo.reset()
    compiled = torch.compile(traced, backend="eager", dynamic=True)
    batch = _batch(4, 8, 7, True, tokenizer.tgt_vocab_size)
    want, got = eager(*batch), compiled(*batch)
    want.backward()
    got.backward()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for (name, a), b in zip(eager.named_parameters(), traced.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("rdrop", [0.0, 5.0], ids=["plain", "rdrop"])
def test_given_the_real_tokens_the_compiled_objective_is_one_graph_with_the_eager_loss(
    tokenizer, rdrop
):
    """Training passes the real target tokens' indices: the compiled loss forms logits at those
    only, still one graph, and gives the eager loss and gradients (R-Drop's doubled batch too)."""
    eager, traced = _objective(tokenizer, rdrop), _objective(tokenizer, rdrop)
    src, tgt_in, tgt_out = _batch(4, 8, 7, True, tokenizer.tgt_vocab_size)
    at = (tgt_out != 0).flatten().nonzero().squeeze(1)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(traced)(src, tgt_in, tgt_out, at)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    torch._dynamo.reset()
    compiled = torch.compile(traced, backend="eager", dynamic=True)
    want, got = eager(src, tgt_in, tgt_out, at), compiled(src, tgt_in, tgt_out, at)
    want.backward()
    got.backward()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for (name, a), b in zip(eager.named_parameters(), traced.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_compile_auto_trains_eagerly_on_a_cpu_and_true_compiles(
    corpus_files, tmp_path, monkeypatch
):
    with monkeypatch.context() as m:
        # not even called: what it builds would go unused
        m.setattr(torch, "compile", lambda *a, **k: pytest.fail("torch.compile called"))
        auto = prepared_run(corpus_files, tmp_path / "a", compile="auto")
    assert not isinstance(auto.objective, CompiledOrEager) and auto.state.compiled == "false"
    forced = prepared_run(corpus_files, tmp_path / "b", compile="true")
    assert isinstance(forced.objective, CompiledOrEager)


def test_compile_auto_on_cuda_keeps_the_faster_and_a_resumed_run_keeps_its_choice(
    corpus_files, tmp_path, monkeypatch
):
    import dataclasses

    import mt_cli.train.hardware as hardware
    from mt_cli.train.state import TrainState

    run = prepared_run(corpus_files, tmp_path, compile="false")
    ctx = dataclasses.replace(
        run.ctx,
        device=torch.device("cuda"),
        cfg=dataclasses.replace(run.cfg, train=dataclasses.replace(run.cfg.train, compile="auto")),
    )
    eager = run.objective
    for compiled_rate, want in ((130.0, True), (101.0, False)):
        monkeypatch.setattr(
            hardware,
            "batch_rate",
            lambda o, *a, r=compiled_rate: r if isinstance(o, CompiledOrEager) else 100.0,
        )
        state = TrainState()
        chosen = hardware.resolve_compile(ctx, state, eager, None, run.train_data)
        assert isinstance(chosen, CompiledOrEager) == want  # 5% faster at least, or eager
        assert state.compiled == ("true" if want else "false")
    # resumed: the state's choice, not timed again
    monkeypatch.setattr(hardware, "batch_rate", lambda *a: pytest.fail("timed again"))
    kept = hardware.resolve_compile(ctx, TrainState(compiled="true"), eager, None, run.train_data)
    assert isinstance(kept, CompiledOrEager)


def test_train_compile_reads_true_false_from_yaml_and_an_old_boolean_and_refuses_others():
    from mt_cli.config import build_config, from_dict
    from mt_cli.errors import MtError

    assert build_config("tiny", sets=["train.compile=true"]).train.compile == "true"
    assert from_dict({"train": {"compile": False}}).train.compile == "false"  # an older run.yaml
    with pytest.raises(MtError, match="train.compile must be auto, true or false, not 'yes!'"):
        build_config("tiny", sets=["train.compile=yes!"])
