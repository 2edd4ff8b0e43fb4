"""Lexically constrained beam search with dynamic beam allocation (Post & Vilar 2018, "Fast
Lexically Constrained Decoding with Dynamic Beam Allocation"; Hu et al. 2019 vectorise it).

Each sentence may carry target terms (token sequences) its translation must contain. Every
hypothesis tracks how far it is through them (`TermState`). At each step a sentence's candidates
are plain beam search's 2K best, each beam's single best token, and each beam's tokens that start
or continue a term. They are sorted into banks by how many term tokens the hypothesis has met
(0..C), and the K places of the beam are shared out over the banks (`bank_sizes`): hypotheses that
have met fewer terms keep places beside those that met more, so no term is forced in early and
the model chooses where each goes. EOS is allowed only once every term is met (or at the length
limit, where a hypothesis must end), and finished hypotheses holding every term rank first.

With no terms there is one bank of K places and the choice is plain beam search's (a test checks
this). The plain part of each step is vectorised; the banks are kept per sentence in Python, which
costs a little time per step (benchmarks/terminology.py measures it).

A term in progress that the hypothesis leaves starts over (its tokens stop counting); the token
that broke it may start another term. Overlapping restarts of the same term are not tracked.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from mt_cli.data.tokenizer import EOS
from mt_cli.decode.hypothesis import Choice, Hypothesis
from mt_cli.decode.processors import Step
from mt_cli.decode.topk import topk

Terms = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class TermState:
    """How far one hypothesis is through its sentence's terms: those met, and the one in
    progress."""

    terms: Terms
    met: frozenset[int] = frozenset()
    current: int = -1  # the term in progress, -1 for none
    matched: int = 0  # how many of its tokens are already there
    just_met: bool = False  # the last token completed a term

    @property
    def progress(self) -> int:
        """Term tokens met so far: the hypothesis's bank."""
        return sum(len(self.terms[i]) for i in self.met) + self.matched

    @property
    def complete(self) -> bool:
        return len(self.met) == len(self.terms)

    def next_tokens(self) -> set[int]:
        """The tokens that would advance a term: the next of the one in progress, or a first
        token."""
        if self.current >= 0:
            return {self.terms[self.current][self.matched]}
        return {t[0] for i, t in enumerate(self.terms) if i not in self.met}

    def advance(self, tok: int) -> TermState:
        if self.current >= 0:
            term = self.terms[self.current]
            if tok == term[self.matched]:
                if self.matched + 1 == len(term):
                    return TermState(self.terms, self.met | {self.current}, just_met=True)
                return dataclasses.replace(self, matched=self.matched + 1)
        # nothing in progress (or it just broke): does tok start one?
        for i, term in enumerate(self.terms):
            if i not in self.met and term[0] == tok:
                if len(term) == 1:
                    return TermState(self.terms, self.met | {i}, just_met=True)
                return TermState(self.terms, self.met, current=i, matched=1)
        return TermState(self.terms, self.met) if self.current >= 0 or self.just_met else self


def bank_sizes(beam: int, counts: list[int]) -> list[int]:
    """Post & Vilar's allocation of K places over banks 0..C holding `counts` candidates: K / (C+1)
    each, the remainder to the top bank; a bank with more places than candidates passes the rest
    to the bank below it (the lowest to the top), until the places sit where candidates are."""
    n = len(counts)
    sizes = [beam // n] * n
    sizes[-1] += beam - sum(sizes)
    for _ in range(n):
        for i in reversed(range(n)):
            over = sizes[i] - counts[i]
            if over > 0:
                sizes[i] -= over
                sizes[(i - 1) % n] += over
    return [min(s, c) for s, c in zip(sizes, counts)]


def contains(tokens: list[int], term: tuple[int, ...]) -> bool:
    n = len(term)
    return any(tuple(tokens[i : i + n]) == term for i in range(len(tokens) - n + 1))


class Constraints:
    """The `Guide` beam_search takes: candidates chosen by banks, for one batch of sentences."""

    def __init__(self, terms: list[Terms], beam: int, glue: Tensor | None = None) -> None:
        self.terms = terms  # per sentence of the batch
        # ids of the pieces that continue a word (no word-start mark, a letter or digit first)
        self.glue = glue
        self.states = [[TermState(t)] * beam for t in terms]  # per running sentence, one per beam
        self._next: list[list[TermState]] = []

    def rules(self, lprobs: Tensor, step: Step) -> Tensor:
        """A processor: no EOS for a hypothesis that has not met every term, unless at its limit;
        and a term just completed ends its word (no "lad" + "der"), so the output holds the term
        itself."""
        flat = [s for beams in self.states for s in beams]
        open_ = torch.tensor([not s.complete for s in flat], device=lprobs.device)
        lprobs[open_ & ~step.at_limit, EOS] = float("-inf")
        ended = [r for r, s in enumerate(flat) if s.just_met]
        if self.glue is not None and ended:
            rows = torch.tensor(ended, device=lprobs.device)
            lprobs[rows[:, None], self.glue[None, :]] = float("-inf")
        return lprobs

    def choose(self, lprobs: Tensor, scores: Tensor, k: int, active: Tensor) -> Choice:
        n = scores.size(0)
        lp, tok = topk(lprobs, 2 * k)  # (n*K, 2K), as plain search
        cand = (scores[:, :, None] + lp.view(n, k, 2 * k)).view(n, 2 * k * k)
        top_scores, top_idx = cand.topk(2 * k, dim=1)
        top_tok = tok.view(n, 2 * k * k).gather(1, top_idx).tolist()
        top_lp = lp.view(n, 2 * k * k).gather(1, top_idx).tolist()
        top_beam, top_scores_l, beam_scores = (
            (top_idx // (2 * k)).tolist(),
            top_scores.tolist(),
            scores.tolist(),
        )
        # Each live beam's best token and the tokens that advance its terms, read in one gather.
        extra = [
            (i, j, w)
            for i in range(n)
            for j in range(k)
            if math.isfinite(beam_scores[i][j])
            for w in {int(tok[i * k + j, 0])} | self.states[i][j].next_tokens()
        ]
        rows = torch.tensor(
            [i * k + j for i, j, _ in extra], dtype=torch.long, device=lprobs.device
        )
        cols = torch.tensor([w for _, _, w in extra], dtype=torch.long, device=lprobs.device)
        extra_lp = lprobs[rows, cols].tolist() if extra else []
        per_sentence: list[dict[tuple[int, int], tuple[float, float]]] = [{} for _ in range(n)]
        for i in range(n):
            for r in range(2 * k):
                per_sentence[i][(top_beam[i][r], top_tok[i][r])] = (
                    top_scores_l[i][r],
                    top_lp[i][r],
                )
        for (i, j, w), v in zip(extra, extra_lp):
            per_sentence[i].setdefault((j, w), (beam_scores[i][j] + v, v))
        ended, picked = [], []
        self._next = []
        for i, cands in enumerate(per_sentence):
            # stable: plain search's order first
            ordered = sorted(cands.items(), key=lambda c: -c[1][0])
            ended += [
                (i, j, s, v) for (j, w), (s, v) in ordered[:k] if w == EOS and math.isfinite(s)
            ]
            chosen = self._allot(
                i, [c for c in ordered if c[0][1] != EOS and math.isfinite(c[1][0])], k
            )
            picked.append(chosen)
        return Choice(ended, *_as_tensors(picked, lprobs.device))

    def _allot(self, i: int, cands: list, k: int) -> list[tuple[int, int, float, float]]:
        """The K candidates (beam, token, score, lp) that go on, shared out over the banks."""
        new = [self.states[i][j].advance(w) for (j, w), _ in cands]
        top = sum(len(t) for t in self.states[i][0].terms)
        banks: list[list[int]] = [[] for _ in range(top + 1)]
        for c, state in enumerate(new):
            banks[state.progress].append(c)  # each bank in score order
        take = sorted(
            c
            for bank, size in zip(banks, bank_sizes(k, [len(b) for b in banks]))
            for c in bank[:size]
        )
        chosen = [(cands[c][0][0], cands[c][0][1], *cands[c][1]) for c in take]
        states = [new[c] for c in take]
        while len(chosen) < k:  # too few live candidates: dead places, as plain search keeps them
            chosen.append((0, EOS, float("-inf"), float("-inf")))
            states.append(self.states[i][0])
        self._next.append(states)
        return chosen

    def keep(self, rows: list[int]) -> None:
        """The running sentences that go on, by their row in the step just chosen."""
        self.states = [self._next[i] for i in rows]

    def rank(self, sentence: int, h: Hypothesis) -> tuple[int, float]:
        """Finished hypotheses holding every term first, then by score."""
        return (0 if all(contains(h.tokens, t) for t in self.terms[sentence]) else 1, -h.score)


def _as_tensors(
    picked: list[list[tuple[int, int, float, float]]], device: torch.device
) -> tuple[Tensor, ...]:
    """(n, K) scores, beams, tokens and log-probabilities of the candidates that go on."""
    beams = torch.tensor([[c[0] for c in row] for row in picked], dtype=torch.long, device=device)
    toks = torch.tensor([[c[1] for c in row] for row in picked], dtype=torch.long, device=device)
    scores = torch.tensor([[c[2] for c in row] for row in picked], device=device)
    lps = torch.tensor([[c[3] for c in row] for row in picked], device=device)
    return scores, beams, toks, lps
