import math

import pytest
import torch

from conftest import tiny_config
from mt_cli.data.collate import pad
from mt_cli.data.tokenizer import BOS, PAD
from mt_cli.errors import MtError
from mt_cli.model.attention import Dropout, attention
from mt_cli.model.positions import sinusoid_table
from mt_cli.model.transformer import build_model


def _batch(tokenizer):
    src = pad(
        tokenizer.encode_src(
            ["Ein hund läuft schnell.", "Der mann sieht ein rot haus und ein baum."]
        )
    )
    tgt = pad(
        [
            [BOS] + ids
            for ids in tokenizer.encode_tgt(["A dog runs fast.", "The man sees a red house."])
        ]
    )
    return src, tgt


def test_changing_a_future_target_token_leaves_earlier_decoder_outputs_unchanged(
    tiny_model, tokenizer
):
    src, tgt = _batch(tokenizer)
    k = 3
    changed = tgt.clone()
    changed[:, k] = (changed[:, k] + 7) % tokenizer.tgt_vocab_size
    with torch.no_grad():
        before, after = tiny_model(src, tgt), tiny_model(src, changed)
    torch.testing.assert_close(before[:, :k], after[:, :k], rtol=0, atol=1e-6)
    assert not torch.allclose(before[:, k:], after[:, k:])


def test_padding_a_batch_does_not_change_a_sentences_outputs(tiny_model, tokenizer):
    src, tgt = _batch(tokenizer)
    short_src = src[:1, : int((src[0] != PAD).sum())]
    short_tgt = tgt[:1, : int((tgt[0] != PAD).sum())]
    with torch.no_grad():
        alone = tiny_model(short_src, short_tgt)
        in_batch = tiny_model(src, tgt)[:1, : short_tgt.size(1)]
        memory_alone = tiny_model.encode(short_src, short_src != PAD)
        memory_batch = tiny_model.encode(src, src != PAD)[:1, : short_src.size(1)]
    assert src.size(1) > short_src.size(1), "the test needs a padded sentence"
    torch.testing.assert_close(alone, in_batch, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(memory_alone, memory_batch, rtol=1e-5, atol=1e-5)


def test_sinusoid_table_puts_sines_then_cosines_as_hugging_face_marian_does():
    table = sinusoid_table(50, 8)
    pos, i, d = 7, 1, 8
    angle = pos / 10000 ** (2 * i / d)
    assert table[pos, i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, d // 2 + i].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert torch.all(table[0, : d // 2] == 0) and torch.all(table[0, d // 2 :] == 1)


def test_tensor2tensor_sinusoids_are_marian_cpps_and_fairseqs_from_position_zero():
    d, half = 8, 4
    table = sinusoid_table(50, d, "tensor2tensor")
    # Marian's addPositionalEmbeddings: log(1e4) / (D/2 - 1) apart
    for pos, i in (
        (0, 0),
        (7, 1),
        (49, 3),
    ):
        angle = pos * math.exp(-i * math.log(10000) / (half - 1))
        assert table[pos, i].item() == pytest.approx(math.sin(angle), abs=1e-6)
        assert table[pos, half + i].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert not torch.allclose(table, sinusoid_table(50, d, "marian"), atol=1e-3)
    assert torch.equal(table[2:], sinusoid_table(48, d, "fairseq"))


def test_model_norm_eps_reaches_every_layer_norm(tokenizer):
    model = build_model(tiny_config(tokenizer, norm_eps=1e-6, pre_norm=True))
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) > 4 and all(m.eps == 1e-6 for m in norms)


def test_joint_vocab_ties_source_target_and_output_embeddings(tokenizer):
    model = build_model(tiny_config(tokenizer))
    token = model.encoder.embeddings.token.weight
    assert token is model.decoder.embeddings.token.weight
    assert token is model.output_projection.weight
    untied = build_model(tiny_config(tokenizer, tie_embeddings=False))
    assert untied.output_projection.weight is not untied.decoder.embeddings.token.weight


def test_pre_norm_model_runs_and_has_final_norms(tokenizer):
    model = build_model(tiny_config(tokenizer, pre_norm=True)).eval()
    src, tgt = _batch(tokenizer)
    assert model.encoder.final_norm is not None and model.decoder.final_norm is not None
    assert torch.isfinite(model(src, tgt)).all()


def test_model_without_vocabulary_size_is_refused_clearly(tokenizer):
    with pytest.raises(MtError, match="vocab_size"):
        build_model(tiny_config(tokenizer, src_vocab_size=0))


def test_logits_at_real_target_positions_equal_the_full_logits_there(tiny_model, tokenizer):
    src, tgt = _batch(tokenizer)
    at = tgt != PAD
    assert not at.all(), "the test needs padding"
    with torch.no_grad():
        torch.testing.assert_close(
            tiny_model(src, tgt, at), tiny_model(src, tgt)[at], rtol=1e-6, atol=1e-6
        )


@pytest.mark.parametrize("causal", [False, True])
def test_explicit_bf16_cpu_attention_agrees_with_fp32_fused_attention(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 4, 7, 16) for _ in range(3))
    mask = None if causal else torch.tensor([True] * 5 + [False] * 2).expand(3, 1, 1, 7)
    want = attention(q, k, v, mask, causal, 0.0)  # fp32: PyTorch's fused kernel
    # the explicit path
    got = attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, causal, 0.0)
    torch.testing.assert_close(got.float(), want, rtol=0.05, atol=0.05)
    # And the masks really act: a masked key's value does not reach the output.
    v2 = v.clone()
    v2[:, :, -1] += 100.0
    again = attention(q.bfloat16(), k.bfloat16(), v2.bfloat16(), mask, causal, 0.0)
    rows = slice(0, 6) if causal else slice(None)  # causal: only the last query sees the last key
    torch.testing.assert_close(again[:, :, rows], got[:, :, rows], rtol=0, atol=0)


def test_dropout_zeroes_about_p_keeps_the_mean_and_is_identity_in_eval():
    torch.manual_seed(0)
    drop = Dropout(0.2)
    x = torch.ones(1000, 100)
    y = drop(x)
    assert abs((y == 0).float().mean().item() - 0.2) < 0.01
    assert abs(y.mean().item() - 1.0) < 0.01
    assert y.unique().tolist() == [0.0, pytest.approx(1 / 0.8, rel=1e-4)]
    assert torch.equal(drop.eval()(x), x)
