"""The decoding engine (decode/engine.py), the one cached decoder, against its reference: the
model reading each whole prefix again (tests/reference.py). The same logits step by step, the
same translations for every search and control, batched as one by one; bf16 and int8 steps close
to fp32; the model left as it was."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from reference import Reference

from conftest import tiny_config
from mt_cli import Translator, device
from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.decode.engine import Engine
from mt_cli.decode.ensemble import Ensemble
from mt_cli.decode.precision import Int8Linear
from mt_cli.model.transformer import Transformer, build_model

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
LINES = [
    line for line in (FIXTURE.parent / "src.txt").read_text(encoding="utf-8").splitlines() if line
][:40]


def _src(vocab: int, rows: int = 3, length: int = 7) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rows * 10 + length)
    src = torch.randint(4, vocab, (rows, length), generator=gen)
    src[:, -1] = EOS
    src[0, 4:] = PAD  # one padded sentence: the cross-attention mask matters
    src[0, 3] = EOS
    return src


def _steps(
    model, src: torch.Tensor, beams: int, steps: int, vocab: torch.Tensor | None = None
) -> list[torch.Tensor]:
    """Logits at each step of a fixed walk: every row fed its argmax, beams shuffled after step 1,
    and the first sentence dropped after step 2 (the cache's reorder, both kinds)."""
    mask = src != PAD
    memory, cache = model.encode(src, mask), None
    tokens = torch.full((src.size(0) * beams, 1), model.start_token)
    out = []
    for t in range(steps):
        logits, cache = model.decode(tokens, memory, mask, cache, vocab)
        out.append(logits[:, -1].float())
        tokens = logits[:, -1].argmax(-1, keepdim=True).clamp(min=4)
        n = tokens.size(0) // beams
        if t == 1:  # each sentence's beams in reverse order
            rows = torch.arange(n * beams).view(n, beams).flip(1).reshape(-1)
            cache.reorder(rows)
            tokens = tokens[rows]
        if t == 2:  # the first sentence ends
            rows = torch.arange(beams, n * beams)
            cache.reorder(rows, torch.arange(1, n))
            tokens = tokens[rows]
    return out


@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("shortlist", [False, True], ids=["whole-vocabulary", "shortlist"])
def test_the_engine_step_gives_the_models_logits_at_every_step(tokenizer, pre_norm, shortlist):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer, pre_norm=pre_norm, output_bias=True)).eval()
    with torch.no_grad():
        model.output_projection.bias.normal_()
    src = _src(tokenizer.src_vocab_size)
    vocab = torch.arange(0, tokenizer.tgt_vocab_size, 2) if shortlist else None
    with torch.inference_mode():
        # 20 steps: past the first buffer's 16, so the buffers grow once
        want = _steps(Reference(model), src, 3, 20, vocab)
        got = _steps(Engine(model), src, 3, 20, vocab)
    for t, (a, b) in enumerate(zip(want, got)):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=f"step {t}")


def test_several_positions_at_once_continue_the_cache_as_one_at_a_time(tiny_model, tokenizer):
    src = _src(tokenizer.src_vocab_size)
    mask = src != PAD
    tgt = torch.randint(
        4, tokenizer.tgt_vocab_size, (src.size(0), 5), generator=torch.Generator().manual_seed(1)
    )
    tgt[:, 0] = tiny_model.start_token
    engine = Engine(tiny_model.eval())
    with torch.inference_mode():
        whole = tiny_model.decode(tgt, tiny_model.encode(src, mask), mask)
        # a start of three tokens
        first, cache = engine.decode(tgt[:, :3], engine.encode(src, mask), mask)
        rest, _ = engine.decode(tgt[:, 3:], None, None, cache)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_bf16_and_int8_steps_stay_close_to_fp32_and_leave_the_model_as_it_was(tokenizer, precision):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    src = _src(tokenizer.src_vocab_size)
    with torch.inference_mode():
        want = _steps(Reference(model), src, 2, 6)
        engine = Engine(model, precision)
        got = _steps(engine, src, 2, 6)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    for a, b in zip(want, got):
        assert b.dtype == torch.float32
        assert (b - a).abs().max() < 0.05 * a.abs().max()  # bf16 keeps 8 bits of mantissa, int8 7


def reference(tr: Translator) -> Translator:
    """`tr` searching through the reference decoder instead of its engine."""
    ref = tr.with_options()
    ref.engine = (
        Reference(tr.model)
        if isinstance(tr.model, Transformer)
        else Ensemble([Reference(m) for m in tr.model.models()])
    )
    return ref


@pytest.fixture(scope="module")
def eager() -> Translator:
    return Translator.load(FIXTURE, device="cpu", engine="eager")


# Every search and control, as decoding options: what a faster path must translate as eager does.
SEARCHES = pytest.mark.parametrize(
    "options",
    [
        {},
        {"beam": 1},
        {"beam": 3, "shortlist": False},
        {"no_repeat_ngram": 2},
        {"sampling_topk": 5, "seed": 3},
        {"length_penalty": 0.0, "beam": 6},
    ],
    ids=["beam", "greedy", "whole-vocabulary", "no-repeat", "sampling", "beam-6"],
)


@SEARCHES
def test_the_engine_translates_as_the_reference_for_every_search(eager, options):
    engine = eager.with_options(**options)
    assert isinstance(engine.engine, Engine) and engine.engine.compiled is None
    want, got = reference(engine).search(LINES, nbest=1), engine.search(LINES, nbest=1)
    assert [h[0].tokens for h in got] == [h[0].tokens for h in want]
    assert [h[0].score for h in got] == pytest.approx([h[0].score for h in want], abs=1e-4)


def assert_prefixes_and_terms_match(ref: Translator, fast: Translator) -> None:
    """Lines with target prefixes, and with terms the output must contain: `fast` finds what `ref`
    does."""
    words = [line.split()[0] for line in LINES[:10]]
    prefixes = [w if i % 2 else None for i, w in enumerate(words)]
    terms = [[w] if i % 3 == 0 else [] for i, w in enumerate(words)]
    for tr_kw in ({"prefixes": prefixes}, {"constraints": terms}):
        want = [h[0].tokens for h in ref.search(LINES[:10], **tr_kw)]
        assert [h[0].tokens for h in fast.search(LINES[:10], **tr_kw)] == want


def test_prefixes_and_terms_through_the_engine_match_the_reference(eager):
    assert_prefixes_and_terms_match(reference(eager), eager)


def test_the_plan_is_resolved_once_and_a_new_precision_gets_its_own_engine():
    fp32 = Translator.load(FIXTURE, device="cpu")
    assert (
        fp32.plan.precision == "fp32"
        and fp32.engine.precision == "fp32"
        and fp32.engine.compiled is None
    )
    assert fp32.with_options(beam=2).engine is fp32.engine  # other settings: the same engine
    bf16 = fp32.with_options(precision="bf16")
    assert bf16.plan.precision == "bf16" and bf16.engine.precision == "bf16"
    # the older name
    assert Translator.load(FIXTURE, device="cpu", engine="step").cfg.engine == "eager"


def test_precision_auto_runs_int8_on_a_cpu_with_int8_arithmetic_else_fp32(monkeypatch):
    monkeypatch.setattr(device, "cpu_has_int8", lambda: True)
    tr = Translator.load(FIXTURE, device="cpu", precision="auto")
    assert tr.cfg.precision == "int8"
    # the model was quantized as it loaded
    assert any(isinstance(m, Int8Linear) for m in tr.model.modules())
    assert tr.translate(LINES[:5]) == Translator.load(
        FIXTURE, device="cpu", precision="int8"
    ).translate(LINES[:5])
    # without VNNI or AMX, int8 products are a plain loop, many times slower than fp32's
    monkeypatch.setattr(device, "cpu_has_int8", lambda: False)
    tr = Translator.load(FIXTURE, device="cpu", precision="auto")
    assert tr.cfg.precision == "fp32" and not tr.quantized


def test_forced_int8_on_a_cpu_without_int8_arithmetic_says_so_in_one_line(monkeypatch, caplog):
    monkeypatch.setattr(device, "cpu_has_int8", lambda: False)
    monkeypatch.setattr(logging.getLogger("mt_cli"), "propagate", True)
    with caplog.at_level(logging.INFO, logger="mt_cli"):
        assert Translator.load(FIXTURE, device="cpu", precision="int8").quantized
    said = [r.getMessage() for r in caplog.records if "int8" in r.getMessage()]
    assert len(said) == 1 and "no int8 arithmetic (VNNI or AMX)" in said[0], said


def test_forced_bf16_on_a_cpu_without_bf16_arithmetic_says_so_in_one_line(monkeypatch, caplog):
    monkeypatch.setattr(device, "cpu_has_bf16", lambda: False)
    # the CLI keeps it to its own handler
    monkeypatch.setattr(logging.getLogger("mt_cli"), "propagate", True)
    with caplog.at_level(logging.INFO, logger="mt_cli"):
        # said at load, once
        Translator.load(FIXTURE, device="cpu", precision="bf16").with_options(beam=2)
        Translator.load(FIXTURE, device="cpu", precision="fp32")
    said = [r.getMessage() for r in caplog.records]
    assert (
        len(said) == 1
        and said[0].startswith("decode.precision bf16: this CPU")
        and "emulated" in said[0]
    )


def test_an_ensemble_of_engines_translates_as_the_ensemble_of_references():
    pair = Translator.load([FIXTURE, FIXTURE], device="cpu", beam=3)
    assert isinstance(pair.engine, Ensemble)
    assert pair.translate(LINES) == reference(pair).translate(LINES)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_low_precision_translates_batched_as_one_by_one(precision):
    tr = Translator.load(FIXTURE, device="cpu", precision=precision, beam=3)
    alone = tr.with_options(batch_size=1)
    assert tr.translate(LINES[:20]) == [alone.translate([line])[0] for line in LINES[:20]]


def test_forced_scoring_reads_whole_targets_and_scores_what_the_engine_found(eager):
    engine = eager.with_options(length_penalty=0.0)
    found = engine.search(LINES[:10])
    scored = engine.score(LINES[:10], [h[0].text for h in found])
    for hyps, s in zip(found, scored):
        if s.tokens == hyps[0].tokens:  # the text re-encodes to the same pieces
            assert s.score == pytest.approx(hyps[0].score, abs=1e-4)
