"""Beam search over a batch, through the model's start_token, encode, decode and cache (`reorder`)
only.

It keeps one flat (sentences x beam) batch. Each step scores 2K candidates per sentence; EOS
candidates among the best K are finished, the best K others go on (as fairseq does). A sentence
leaves the batch once it has K finished hypotheses, so later steps cost only what is still running.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import Tensor

from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.decode.hypothesis import Choice, Hypothesis, Searchable
from mt_cli.decode.processors import (
    DEFAULT_PROCESSORS,
    Processor,
    Step,
)
from mt_cli.decode.stepping import start_tokens, step_log_probs
from mt_cli.decode.topk import topk


@torch.inference_mode()
def beam_search(
    model: Searchable,
    src: Tensor,
    max_lens: Tensor,
    beam: int,
    length_penalty: float,
    processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
    guide: Guide | None = None,
    shortlist: tuple[Tensor, Tensor] | None = None,
    start: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """src (B, S) padded ids -> each sentence's K finished hypotheses, best first by score /
    length**alpha.

    A `guide` (lexical constraints, decode/constraints.py) replaces the choice of each step's
    candidates; without one the choice is the vectorised rule below. `shortlist`: a shortlist's
    target ids, the only ones scored, and each sentence's columns, as greedy's (search then never
    has a guide). `start`: as greedy's."""
    vocab, allowed = shortlist if shortlist is not None else (None, None)
    b, k, dev = src.size(0), beam, src.device
    mask = src != PAD
    # (B, S, D): one row per sentence, shared by its K beams
    memory: Tensor | None = model.encode(src, mask)
    src_mask: Tensor | None = mask
    active = torch.arange(b, device=dev)
    scores = torch.zeros(b, k, device=dev)
    scores[:, 1:] = float("-inf")  # all beams start identical; let only the first one expand
    history = torch.full((b * k, 0), PAD, dtype=torch.long, device=dev)
    history_lp = torch.zeros((b * k, 0), device=dev)  # each history token's own log-probability
    first = None if start is None else start.repeat_interleave(k, dim=0)
    tokens = start_tokens(model, b * k, first, dev)
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    cache = None
    for t in range(int(max_lens.max())):
        n = active.numel()
        logits, cache = model.decode(tokens, memory, src_mask, cache, vocab)
        at_limit = max_lens[active] <= t + 1  # (n,)
        step = Step(t, at_limit.repeat_interleave(k), history, active.repeat_interleave(k))
        lprobs = step_log_probs(logits, step, processors, allowed)
        choice = (guide.choose if guide is not None else choose)(lprobs, scores, k, active)
        if vocab is not None:  # columns -> target ids (EOS's column is EOS: shortlist.py)
            choice.tok = vocab[choice.tok]
        _finish(finished, active, history, history_lp, choice.ended, k, (t + 1) ** length_penalty)
        done = torch.tensor([len(finished[s]) >= k for s in active.tolist()], device=dev) | at_limit
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if guide is not None:
            guide.keep(keep.tolist())
        # Flat rows of the surviving beams: sentence i's beam j sits at row i*K + j.
        src_rows = (keep[:, None] * k + choice.beam[keep]).view(-1)
        cache.reorder(src_rows, keep if keep.numel() < n else None)
        history = _grown(history, src_rows, choice.tok[keep])
        history_lp = _grown(history_lp, src_rows, choice.lp[keep])
        tokens = choice.tok[keep].view(-1, 1)
        scores, active = choice.scores[keep], active[keep]
        memory = src_mask = None  # the cache holds the cross-attention keys and values
    return ranked(finished, guide.rank if guide is not None else by_score)


def _grown(history: Tensor, rows: Tensor, step: Tensor) -> Tensor:
    """The surviving beams' rows of a (rows, T) history, this step's (N, K) values appended."""
    return torch.cat([history.index_select(0, rows), step.view(-1, 1)], dim=1)


def ranked(
    finished: list[list[Hypothesis]], order: Callable[[int, Hypothesis], Any]
) -> list[list[Hypothesis]]:
    """Each sentence's hypotheses best first; sorted() is stable, so of equal scores the one
    finished first leads. A sentence that finished none gets one empty hypothesis."""
    return [
        sorted(hyps, key=functools.partial(order, s)) if hyps else [Hypothesis([], float("-inf"))]
        for s, hyps in enumerate(finished)
    ]


def by_score(_sentence: int, h: Hypothesis) -> float:
    return -h.score


class Guide(Protocol):
    """Chooses each step's candidates in place of `choose` (constrained search)."""

    def choose(self, lprobs: Tensor, scores: Tensor, k: int, active: Tensor) -> Choice: ...

    def keep(self, rows: list[int]) -> None: ...

    def rank(self, sentence: int, h: Hypothesis) -> Any: ...


def choose(lprobs: Tensor, scores: Tensor, k: int, active: Tensor) -> Choice:
    """Plain beam search's step: of each sentence's 2K best candidates, the EOS ones among the best
    K end (fairseq's rule) and the best K others go on."""
    n = scores.size(0)
    # A sentence's 2K best candidates are among the 2K best tokens of each of its beams, so
    # beam scores are added to (n*K, 2K) values, not to the whole (n*K, V) vocabulary.
    lp, tok = topk(lprobs, 2 * k)  # (n*K, 2K)
    cand = (scores[:, :, None] + lp.view(n, k, 2 * k)).view(n, 2 * k * k)
    top_scores, top_idx = cand.topk(2 * k, dim=1)  # (n, 2K)
    top_beam, top_tok = top_idx // (2 * k), tok.view(n, 2 * k * k).gather(1, top_idx)
    top_lp = lp.view(n, 2 * k * k).gather(1, top_idx)  # the chosen token's own log-probability
    is_eos = top_tok == EOS
    hits = (is_eos[:, :k] & torch.isfinite(top_scores[:, :k])).nonzero().tolist()
    ended = [
        (i, int(top_beam[i, j]), float(top_scores[i, j]), float(top_lp[i, j])) for i, j in hits
    ]
    # The K best candidates that are not EOS carry on.
    rank = is_eos.long() * 2 * k + torch.arange(2 * k, device=lprobs.device)
    pick = rank.topk(k, dim=1, largest=False).indices  # (n, K)
    return Choice(
        ended,
        top_scores.gather(1, pick),
        top_beam.gather(1, pick),
        top_tok.gather(1, pick),
        top_lp.gather(1, pick),
    )


def _finish(
    finished: list[list[Hypothesis]],
    active: Tensor,
    history: Tensor,
    history_lp: Tensor,
    ended: list[tuple[int, int, float, float]],
    k: int,
    norm: float,
) -> None:
    """Record the hypotheses that end at this step, up to K per sentence."""
    for i, beam, score, lp in ended:
        sent = int(active[i])
        if len(finished[sent]) < k:
            row = i * k + beam
            token_lps = history_lp[row].tolist() + [lp]
            finished[sent].append(Hypothesis(history[row].tolist(), score / norm, token_lps))
