"""Rules on a step's log-probabilities, pinned on a scripted model whose probabilities are written
by hand, and checked on a real one."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from conftest import ScriptedModel
from mt_cli import Translator
from mt_cli.data.tokenizer import EOS
from mt_cli.decode.beam import beam_search
from mt_cli.decode.processors import NoRepeatNgram, end_at_limit
from mt_cli.decode.search import greedy_search

A, B, VOCAB = 4, 5, 6
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"


def _alternating(prefix: tuple[int, ...]) -> dict[int, float]:
    """After A, B is likeliest (.7, then A .2, EOS .1); after B or at the start, A is (.7, B .2)."""
    return {B: 0.7, A: 0.2, EOS: 0.1} if prefix and prefix[-1] == A else {A: 0.7, B: 0.2, EOS: 0.1}


def alternating_model() -> ScriptedModel:
    return ScriptedModel(_alternating, VOCAB)


def _ngrams(tokens: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def test_no_repeat_bigram_on_a_scripted_model_gives_the_output_worked_out_on_paper():
    # Unconstrained, greedy alternates A B A B A B up to the limit (7: six tokens, then EOS).
    # With no bigram twice: A B A, then B would repeat (A, B), so A (.2): A B A A; then after A,
    # B repeats (A, B) and A repeats (A, A): only EOS is left.
    src, limit = torch.ones(1, 3, dtype=torch.long), torch.tensor([7])
    assert greedy_search(alternating_model(), src, limit)[0].tokens == [A, B, A, B, A, B]
    rule = (NoRepeatNgram(2), end_at_limit)
    hyp = greedy_search(alternating_model(), src, limit, processors=rule)[0]
    assert hyp.tokens == [A, B, A, A]
    assert hyp.token_logprobs == pytest.approx(
        [math.log(p) for p in (0.7, 0.7, 0.7, 0.2, 0.1)], abs=1e-5
    )


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_hypothesis_of_beam_search_repeats_an_ngram(n):
    src, limit = torch.ones(2, 3, dtype=torch.long), torch.tensor([9, 9])
    found = beam_search(
        alternating_model(), src, limit, beam=3, length_penalty=1.0, processors=(NoRepeatNgram(n),)
    )
    for hyps in found:
        for h in hyps:
            assert len(set(_ngrams(h.tokens, n))) == len(_ngrams(h.tokens, n)), h.tokens


@pytest.mark.parametrize("beam", [1, 4])
def test_no_repeat_ngram_on_a_real_model_leaves_no_repeat_and_greedy_outputs_that_had_none_alone(
    beam,
):
    tr = Translator.load(FIXTURE, device="cpu", beam=beam)
    lines = [
        line
        for line in (FIXTURE.parent / "src.txt").read_text(encoding="utf-8").splitlines()
        if line
    ][:40]
    plain, ruled = tr.search(lines), tr.with_options(no_repeat_ngram=2).search(lines)
    changed = 0
    for a, b in zip(plain, ruled):
        assert all(len(set(_ngrams(h.tokens, 2))) == len(_ngrams(h.tokens, 2)) for h in b)
        repeated = len(set(_ngrams(a[0].tokens, 2))) < len(_ngrams(a[0].tokens, 2))
        changed += b[0].tokens != a[0].tokens
        if beam == 1 and not repeated:  # greedy's path had no repeat, so no step of it was banned
            assert b[0].tokens == a[0].tokens
    assert changed < len(lines)
