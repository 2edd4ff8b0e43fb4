"""A decoder with an SSRU in place of self-attention (model.decoder_autoreg ssru, as Bergamot
students have): the engine's cached step against the teacher-forced model at every step, through
beam reorders, dropped sentences and buffer growth; every search as the reference decoder finds
it; int8 batched as one by one; the compiled step as the eager one; what it cannot do (export to
other toolkits) refused in one line; and it trains."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch
from reference import Reference
from test_engine import FIXTURE, LINES, SEARCHES, _src, _steps, reference

from conftest import tiny_config
from mt_cli import Translator
from mt_cli.decode.engine import Engine
from mt_cli.errors import MtError
from mt_cli.interop import export
from mt_cli.model import checkpoint
from mt_cli.model.transformer import build_model


@pytest.mark.parametrize("shortlist", [False, True], ids=["whole-vocabulary", "shortlist"])
def test_the_engine_steps_an_ssru_decoder_as_the_model_reads_whole_targets(tokenizer, shortlist):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer, decoder_autoreg="ssru")).eval()
    assert "decoder-self" not in model.attention_modules()  # nothing to draw: no self-attention
    src = _src(tokenizer.src_vocab_size)
    vocab = torch.arange(0, tokenizer.tgt_vocab_size, 2) if shortlist else None
    # 20 steps: past the attention buffers' first 16 (the cells never grow)
    with torch.inference_mode():
        want = _steps(Reference(model), src, 3, 20, vocab)
        got = _steps(Engine(model), src, 3, 20, vocab)
    for t, (a, b) in enumerate(zip(want, got)):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=f"step {t}")


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_bf16_and_int8_ssru_steps_stay_close_to_fp32(tokenizer, precision):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer, decoder_autoreg="ssru")).eval()
    src = _src(tokenizer.src_vocab_size)
    with torch.inference_mode():
        want, got = _steps(Reference(model), src, 2, 6), _steps(Engine(model, precision), src, 2, 6)
    for a, b in zip(want, got):
        assert (b - a).abs().max() < 0.05 * a.abs().max()


@pytest.fixture(scope="module")
def ssru_checkpoint(tmp_path_factory) -> Path:
    """The decoding fixture's tokenizer, shortlist and settings around a random-weight SSRU
    model."""
    ckpt = checkpoint.load(FIXTURE)
    model_cfg = dataclasses.replace(ckpt.config.model, decoder_autoreg="ssru")
    torch.manual_seed(0)
    model = build_model(model_cfg)
    path = tmp_path_factory.mktemp("ssru") / "model.pt"
    config = dataclasses.replace(ckpt.config, model=model_cfg)
    checkpoint.save(
        path,
        checkpoint.Checkpoint(config, ckpt.tokenizer, model.state_dict(), None, ckpt.shortlist),
    )
    return path


@SEARCHES
def test_an_ssru_model_translates_as_the_reference_for_every_search(ssru_checkpoint, options):
    tr = Translator.load(ssru_checkpoint, device="cpu", precision="fp32", **options)
    assert isinstance(tr.engine, Engine) and tr.engine.compiled is None
    want, got = reference(tr).search(LINES[:12], nbest=1), tr.search(LINES[:12], nbest=1)
    assert [h[0].tokens for h in got] == [h[0].tokens for h in want]
    assert [h[0].score for h in got] == pytest.approx([h[0].score for h in want], abs=1e-4)


def test_an_int8_ssru_model_translates_batched_as_one_by_one(ssru_checkpoint):
    tr = Translator.load(ssru_checkpoint, device="cpu", precision="int8", beam=3)
    assert tr.translate(LINES) == tr.with_options(batch_size=1).translate(LINES)


def test_a_compiled_ssru_step_translates_as_the_eager_step(ssru_checkpoint):
    """The cell is one position of keys that never grows, with no values: the compiled step holds
    it as the eager one does, through beam reorders and finished sentences."""
    eager = Translator.load(ssru_checkpoint, device="cpu", precision="fp32", engine="eager", beam=3)
    fast = eager.with_options(engine="compiled")
    assert fast.engine.compiled is not None and eager.engine.compiled is None
    want, got = eager.search(LINES, nbest=1), fast.search(LINES, nbest=1)
    assert [h[0].tokens for h in got] == [h[0].tokens for h in want]
    assert [h[0].score for h in got] == pytest.approx([h[0].score for h in want], abs=1e-4)
    greedy = fast.with_options(beam=1)
    assert greedy.translate(LINES) == eager.with_options(beam=1).translate(LINES)


def test_export_of_an_ssru_model_is_refused_in_one_line(ssru_checkpoint, tmp_path):
    ckpt = checkpoint.load(ssru_checkpoint)
    for fmt in ("hf", "ct2"):
        with pytest.raises(
            MtError, match="SSRU in place of self-attention .*self-attention decoder exports"
        ):
            export(ckpt, tmp_path / fmt, fmt)
        assert not (tmp_path / fmt).exists()


def test_export_of_a_model_with_marians_own_sinusoids_is_refused_in_one_line(
    ssru_checkpoint, tmp_path
):
    ckpt = checkpoint.load(ssru_checkpoint)
    cfg = dataclasses.replace(
        ckpt.config.model, decoder_autoreg="attention", positions="tensor2tensor"
    )
    ckpt = dataclasses.replace(ckpt, config=dataclasses.replace(ckpt.config, model=cfg))
    for fmt in ("hf", "ct2"):
        with pytest.raises(MtError, match="model.positions tensor2tensor"):
            export(ckpt, tmp_path / fmt, fmt)
        assert not (tmp_path / fmt).exists()


def test_an_ssru_decoder_learns(tokenizer):
    """Teacher-forced training reaches the SSRU's weights: a few steps on one batch lower its
    loss."""
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer, decoder_autoreg="ssru"))
    src, tgt = _src(tokenizer.src_vocab_size), _src(tokenizer.tgt_vocab_size, length=6)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(10):
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert model.decoder.layers[0].ssru.forget_proj.weight.grad.abs().sum() > 0
    assert losses[-1] < 0.5 * losses[0]


def test_distill_of_an_ssru_student_writes_student_pt_and_says_why_no_ct2(
    ssru_checkpoint, tmp_path
):
    """A student begun from an SSRU teacher's layers (--init-layers) cannot be a CTranslate2 model:
    mt distill's finish writes student.pt and says so, instead of failing at the end of the run."""
    pytest.importorskip("ctranslate2")
    from mt_cli.config.pipeline import DistillConfig
    from mt_cli.tools.distill import _finish

    (tmp_path / "student").mkdir()
    shutil.copy(ssru_checkpoint, tmp_path / "student" / "best.pt")
    said: list[str] = []
    student, ct2 = _finish(tmp_path, DistillConfig(), said.append)
    assert ct2 is None and not (tmp_path / "ct2").exists()
    assert checkpoint.load(student).config.model.decoder_autoreg == "ssru"
    assert len(said) == 1 and said[0].startswith(
        "CTranslate2 export skipped: this model's decoder has an SSRU"
    )
