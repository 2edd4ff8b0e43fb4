"""The Translator: one object from a checkpoint to scored hypotheses, for every decoding caller."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mt_cli import Hypothesis, Translator
from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.decode.processors import DEFAULT_PROCESSORS, Step
from mt_cli.errors import MtError

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
LINES = [
    "Ein hund sieht ein rot haus.",
    "Der mann läuft schnell und der baum.",
    "Kind hat ein ball.",
]


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu", beam=4)


def _teacher_forced_logprobs(tr: Translator, line: str, tokens: list[int]) -> list[float]:
    """The model's own log-probability of each token of `tokens` + EOS, read in one forward pass."""
    src = torch.tensor(tr.tokenizer.encode_src([line]))
    tgt_in = torch.tensor([[tr.model.start_token] + tokens])
    with torch.no_grad():
        logits = tr.model(src, tgt_in)[0].float()
    logits[:, PAD] = float("-inf")  # never an output
    lprobs = torch.log_softmax(logits, dim=-1)
    return [float(lprobs[i, t]) for i, t in enumerate(tokens + [EOS])]


@pytest.mark.parametrize("beam", [1, 4])
def test_hypotheses_carry_their_tokens_log_probabilities_and_the_length_normalised_score(
    translator, beam
):
    tr = translator.with_options(beam=beam, length_penalty=1.0)
    for line, hyps in zip(LINES, tr.search(LINES)):
        assert len(hyps) == (1 if beam == 1 else 4)
        for h in hyps:
            assert isinstance(h, Hypothesis) and EOS not in h.tokens
            assert len(h.token_logprobs) == len(h.tokens) + 1  # EOS included
            torch.testing.assert_close(
                h.token_logprobs, _teacher_forced_logprobs(tr, line, h.tokens), atol=1e-4, rtol=1e-4
            )
            assert h.score == pytest.approx(sum(h.token_logprobs) / len(h.token_logprobs), abs=1e-5)
            assert h.text == " ".join(tr.tokenizer.decode_tgt([h.tokens])[0].split())
        # best first
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    assert tr.translate(LINES) == [hyps[0].text for hyps in tr.search(LINES)]


def test_the_length_penalty_divides_by_length_to_the_power_alpha(translator):
    (h,) = translator.with_options(beam=2, length_penalty=0.5).search(LINES[:1])[0][:1]
    assert h.score == pytest.approx(sum(h.token_logprobs) / len(h.token_logprobs) ** 0.5, abs=1e-5)


def test_translate_gives_one_string_per_line_and_blank_lines_stay_blank(translator):
    out = translator.translate(["", "Ein hund.", "   ", "Ein hund."])
    assert len(out) == 4 and out[0] == out[2] == "" and out[1] == out[3] != ""
    assert translator.search([""])[0] == [Hypothesis([], 0.0)]


def test_decoding_options_override_the_checkpoint_and_unknown_ones_are_refused(translator):
    assert translator.cfg.beam == 4 and translator.with_options(beam=2).cfg.beam == 2
    assert translator.with_options(beam=None).cfg.beam == 4  # None keeps the value
    with pytest.raises(MtError, match=r"unknown decoding option\(s\) \['beem'\]"):
        Translator.load(FIXTURE, device="cpu", beem=3)
    with pytest.raises(MtError, match="decode.method must be beam, greedy or sample"):
        translator.with_options(method="sampling")
    int8 = Translator.load(FIXTURE, device="cpu", precision="int8")
    with pytest.raises(MtError, match="int8 decoding quantized the model as it loaded"):
        int8.with_options(precision="fp32")


def test_method_greedy_is_greedy_whatever_the_beam_size(translator):
    greedy = translator.with_options(beam=1).search(LINES)
    assert translator.with_options(method="greedy", beam=4).search(LINES) == greedy


def test_a_processor_in_the_list_acts_on_every_step_of_either_search(translator):
    """The one place rules act: ban the token greedy search wanted first, and neither search emits
    it."""
    first = translator.with_options(beam=1).search(LINES[:1])[0][0].tokens[0]

    def ban(lprobs: torch.Tensor, step: Step) -> torch.Tensor:
        lprobs[:, first] = float("-inf")
        return lprobs

    for beam in (1, 4):
        tr = translator.with_options(beam=beam)
        banned = Translator(tr.model, tr.tokenizer, tr.cfg, (ban, *DEFAULT_PROCESSORS))
        for hyps in banned.search(LINES):
            assert all(first not in h.tokens and math.isfinite(h.score) for h in hyps)
