"""Rules on a step's log-probabilities, pinned on a scripted model whose probabilities are written
by hand, and checked on a real one."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from mt_cli import Translator
from mt_cli.data.tokenizer import EOS
from mt_cli.decode.processors import NoRepeatNgram, end_at_limit
from mt_cli.decode.search import beam_search, greedy_search

A, B, VOCAB = 4, 5, 6
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"


@dataclass
class PrefixCache:
    prefix: torch.Tensor  # (N, t) tokens generated so far

    def reorder(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> None:
        self.prefix = self.prefix.index_select(0, rows)


class Alternating:
    """After A, B is likeliest (.7, then A .2, EOS .1); after B or at the start, A is (.7, B .2)."""

    start_token = 0

    def encode(self, src, src_mask):
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, tokens, memory, src_mask, cache=None):
        if cache is None:
            cache = PrefixCache(torch.zeros(tokens.size(0), 0, dtype=torch.long))
        else:
            cache.prefix = torch.cat([cache.prefix, tokens], dim=1)
        logits = torch.full((tokens.size(0), 1, VOCAB), math.log(1e-6))
        for row, prefix in enumerate(cache.prefix.tolist()):
            after_a = bool(prefix) and prefix[-1] == A
            for tok, p in ({B: 0.7, A: 0.2, EOS: 0.1} if after_a else {A: 0.7, B: 0.2, EOS: 0.1}).items():
                logits[row, 0, tok] = math.log(p)
        return logits, cache


def _ngrams(tokens: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def test_no_repeat_bigram_on_a_scripted_model_gives_the_output_worked_out_on_paper():
    # Unconstrained, greedy alternates A B A B A B up to the limit (7: six tokens, then EOS).
    # With no bigram twice: A B A, then B would repeat (A, B), so A (.2): A B A A; then after A,
    # B repeats (A, B) and A repeats (A, A): only EOS is left.
    src, limit = torch.ones(1, 3, dtype=torch.long), torch.tensor([7])
    assert greedy_search(Alternating(), src, limit)[0].tokens == [A, B, A, B, A, B]
    rule = (NoRepeatNgram(2), end_at_limit)
    hyp = greedy_search(Alternating(), src, limit, processors=rule)[0]
    assert hyp.tokens == [A, B, A, A]
    assert hyp.token_logprobs == pytest.approx([math.log(p) for p in (0.7, 0.7, 0.7, 0.2, 0.1)], abs=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_hypothesis_of_beam_search_repeats_an_ngram(n):
    src, limit = torch.ones(2, 3, dtype=torch.long), torch.tensor([9, 9])
    for hyps in beam_search(Alternating(), src, limit, beam=3, length_penalty=1.0, processors=(NoRepeatNgram(n),)):
        for h in hyps:
            assert len(set(_ngrams(h.tokens, n))) == len(_ngrams(h.tokens, n)), h.tokens


@pytest.mark.parametrize("beam", [1, 4])
def test_no_repeat_ngram_on_a_real_model_leaves_no_repeat_and_greedy_outputs_that_had_none_alone(beam):
    tr = Translator.load(FIXTURE, device="cpu", beam=beam)
    lines = [line for line in (FIXTURE.parent / "src.txt").read_text(encoding="utf-8").splitlines() if line][:40]
    plain, ruled = tr.search(lines), tr.with_options(no_repeat_ngram=2).search(lines)
    changed = 0
    for a, b in zip(plain, ruled):
        assert all(len(set(_ngrams(h.tokens, 2))) == len(_ngrams(h.tokens, 2)) for h in b)
        repeated = len(set(_ngrams(a[0].tokens, 2))) < len(_ngrams(a[0].tokens, 2))
        changed += b[0].tokens != a[0].tokens
        if beam == 1 and not repeated:  # greedy's path had no repeat, so no step of it was banned
            assert b[0].tokens == a[0].tokens
    assert changed < len(lines)
