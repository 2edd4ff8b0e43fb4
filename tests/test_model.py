import math

import pytest
import torch

from conftest import tiny_config
from mt_cli.data import pad
from mt_cli.errors import MtError
from mt_cli.model import build_model, sinusoid_table
from mt_cli.tokenizer import BOS, PAD


def _batch(tokenizer):
    src = pad(tokenizer.encode_src(["Ein hund läuft schnell.", "Der mann sieht ein rot haus und ein baum."]))
    tgt = pad([[BOS] + ids for ids in tokenizer.encode_tgt(["A dog runs fast.", "The man sees a red house."])])
    return src, tgt


def test_changing_a_future_target_token_leaves_earlier_decoder_outputs_unchanged(tiny_model, tokenizer):
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


def test_cached_step_by_step_decoding_equals_decoding_the_whole_prefix(tiny_model, tokenizer):
    src, tgt = _batch(tokenizer)
    src_mask = src != PAD
    with torch.no_grad():
        memory = tiny_model.encode(src, src_mask)
        full, _ = tiny_model.decode(tgt, memory, src_mask)
        cache, steps = None, []
        for t in range(tgt.size(1)):
            logits, cache = tiny_model.decode(tgt[:, t : t + 1], memory, src_mask, cache)
            steps.append(logits)
        # Two positions at once continue a cache too (the causal mask inside a chunk).
        _, cache2 = tiny_model.decode(tgt[:, :2], memory, src_mask)
        chunk, _ = tiny_model.decode(tgt[:, 2:5], None, None, cache2)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(chunk, full[:, 2:5], rtol=1e-5, atol=1e-5)


def test_sinusoid_table_puts_sines_then_cosines_as_marian_does():
    table = sinusoid_table(50, 8)
    pos, i, d = 7, 1, 8
    angle = pos / 10000 ** (2 * i / d)
    assert table[pos, i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, d // 2 + i].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert torch.all(table[0, : d // 2] == 0) and torch.all(table[0, d // 2 :] == 1)


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
