"""R-Drop: the consistency term between two dropout masks, as a pure loss and inside the training
objective, and a run that trains with it."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_config
from mt_cli.config import build_config
from mt_cli.data.collate import collate
from mt_cli.errors import MtError
from mt_cli.model import checkpoint
from mt_cli.model.loss import (
    RDropOutputLayerLoss,
    TranslationLoss,
    label_smoothed_loss,
    rdrop_loss,
)
from mt_cli.model.transformer import build_model
from mt_cli.train.inputs import DataSpec
from mt_cli.train.loop import train


def test_rdrop_loss_is_the_papers_loss_halved_and_the_plain_loss_when_both_passes_agree():
    torch.manual_seed(0)
    p, q = torch.randn(7, 11), torch.randn(7, 11)
    target = torch.randint(1, 11, (7,))
    lp, lq = F.log_softmax(p, -1), F.log_softmax(q, -1)
    kl_pq = F.kl_div(lq, lp, log_target=True, reduction="sum")  # KL(P || Q)
    kl_qp = F.kl_div(lp, lq, log_target=True, reduction="sum")
    ce = label_smoothed_loss(p, target, 0.1)[0] + label_smoothed_loss(q, target, 0.1)[0]
    want = (ce + 5.0 * (kl_pq + kl_qp) / 2) / 2
    assert rdrop_loss(p, q, target, 0.1, 5.0).item() == pytest.approx(want.item(), rel=1e-5)
    same = rdrop_loss(p, p, target, 0.1, 5.0)
    assert same.item() == pytest.approx(label_smoothed_loss(p, target, 0.1)[0].item(), rel=1e-6)


def test_the_chunked_rdrop_loss_equals_the_plain_one_and_its_gradients():
    torch.manual_seed(0)
    n = 300  # the last chunk of 64 is short, and must not reach into the second pass's rows
    h = torch.randn(2 * n, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    target = torch.randint(1, 50, (n,))
    want = rdrop_loss(h[:n] @ weight.t(), h[n:] @ weight.t(), target, 0.1, 5.0)
    want.backward()
    want_h, want_w = h.grad.clone(), weight.grad.clone()
    h.grad = weight.grad = None
    got = RDropOutputLayerLoss.apply(h, weight, target, 0.1, 5.0, 64)
    (2.0 * got).backward()
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    torch.testing.assert_close(h.grad, 2.0 * want_h, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(weight.grad, 2.0 * want_w, rtol=1e-5, atol=1e-4)


def _batch(vocab: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(1)
    src = [torch.randint(4, vocab, (n,), generator=gen).tolist() for n in (6, 4, 5)]
    tgt = [torch.randint(4, vocab, (n,), generator=gen).tolist() for n in (3, 7, 5)]
    return collate(src, tgt, 0)  # padded rows: the doubled batch must index past them right


def test_without_dropout_the_rdrop_objective_equals_the_plain_one_and_its_gradients(tokenizer):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer)).train()  # dropout 0: both passes agree
    batch = _batch(tokenizer.tgt_vocab_size)
    plain = TranslationLoss(model, 0.1)(*batch)
    plain.backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    got = TranslationLoss(model, 0.1, rdrop=5.0)(*batch)
    got.backward()
    assert got.item() == pytest.approx(plain.item(), rel=1e-5)
    for g, w in zip((p.grad for p in model.parameters()), want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)


def test_with_dropout_the_two_passes_differ_and_alpha_weighs_their_divergence(tokenizer):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer, dropout=0.3)).train()
    batch = _batch(tokenizer.tgt_vocab_size)

    def loss(alpha: float) -> float:
        torch.manual_seed(7)  # the same dropout masks for every alpha
        return TranslationLoss(model, 0.1, rdrop=alpha)(*batch).item()

    tiny, weighted = loss(1e-9), loss(4.0)
    assert weighted > tiny + 1e-3  # the KL between the two masks' predictions is not zero
    # the term is linear in alpha
    assert loss(8.0) - tiny == pytest.approx(2 * (weighted - tiny), rel=1e-4)
    # validation runs the model once, without dropout: R-Drop plays no part
    model.eval()
    with torch.no_grad():
        assert loss(4.0) == pytest.approx(TranslationLoss(model, 0.1)(*batch).item(), rel=1e-6)


def test_rdrop_needs_dropout_and_a_non_negative_alpha():
    with pytest.raises(MtError, match=r"train.rdrop compares two dropout masks.*model.dropout"):
        build_config(sets=["train.rdrop=5", "model.dropout=0"])
    with pytest.raises(MtError, match=r"train.rdrop must be 0 \(off\) or positive"):
        build_config(sets=["train.rdrop=-1"])
    assert build_config(sets=["train.rdrop=5", "model.dropout=0", "model.attention_dropout=0.1"])


def test_a_run_with_rdrop_trains_and_its_checkpoint_records_alpha(corpus_files, tmp_path):
    cfg = build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": {"batch_tokens": 300, "max_steps": 30, "valid_every": 30, "log_every": 5},
            "decode": {"beam": 2, "max_len_offset": 5},
        },
        sets=["train.rdrop=5", "train.device=cpu", "train.lr=3e-3"],
    )
    files = corpus_files
    data = DataSpec.text_files(
        files["train_src"], files["train_tgt"], files["valid_src"], files["valid_tgt"]
    )
    train(data, tmp_path / "run", cfg, log=lambda m: None)
    losses = [
        e["loss"]
        for e in map(json.loads, (tmp_path / "run" / "log.jsonl").read_text().splitlines())
        if "loss" in e and "lr" in e
    ]
    assert len(losses) == 6 and losses[-1] < losses[0]
    assert checkpoint.load(tmp_path / "run" / "best.pt").config.train.rdrop == 5.0
