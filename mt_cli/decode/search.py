"""Greedy and beam search over a batch. The model is used only through start_token, encode, decode
and the cache it returns (`reorder`), so any model keeping that contract can be searched.

Both searches return scored hypotheses: the tokens (without EOS), each token's log-probability
(EOS included) and the score search ranked by, sum / length**alpha. Every step's log-probabilities
go through one list of processors (`processors.py`) before anything is picked.

Beam search keeps one flat (sentences x beam) batch. Each step scores 2K candidates per sentence;
EOS candidates among the best K are finished, the best K others go on (as fairseq does). A sentence
leaves the batch once it has K finished hypotheses, so later steps cost only what is still running.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.data.collate import pad
from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.decode.constraints import Constraints
from mt_cli.decode.hypothesis import Choice, Hypothesis, Request, Searchable
from mt_cli.decode.processors import (
    DEFAULT_PROCESSORS,
    ForcePrefix,
    NoRepeatNgram,
    Processor,
    Step,
    apply,
)
from mt_cli.decode.sampling import Sampler
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.topk import topk

# Picks each running row's next token from its log-probabilities (N, V), given the rows' sentences
# (N,).
Pick = Callable[[Tensor, Tensor], Tensor]


def max_lengths(src_lens: Tensor, cfg: DecodeConfig, limit: int) -> Tensor:
    """Longest output (EOS included) each sentence may get: ratio * source length + offset."""
    lens = (src_lens.float() * cfg.max_len_ratio).long() + cfg.max_len_offset
    return lens.clamp(min=1, max=limit)


def step_log_probs(
    logits: Tensor, step: Step, processors: tuple[Processor, ...], allowed: Tensor | None = None
) -> Tensor:
    """(N, 1, V) logits -> (N, V) float log-probabilities over every token but PAD, after the
    processors. `allowed` (B, V), a shortlist's columns each sentence may choose
    (Shortlist.for_batch): each row's are normalised over its own sentence's only (step.rows: the
    sentence of each row).

    PAD is never an output (CTranslate2 drops it too), so the same weights score the same here,
    in Hugging Face and in CTranslate2."""
    logits = logits[:, -1].float()
    logits[:, PAD] = float("-inf")
    if allowed is not None and step.rows is not None:
        logits.masked_fill_(~allowed.index_select(0, step.rows), float("-inf"))
    return apply(processors, torch.log_softmax(logits, dim=-1), step)


def _normalised(total: float, length: int, length_penalty: float) -> float:
    return total / length**length_penalty


@torch.inference_mode()
def greedy_search(
    model: Searchable,
    src: Tensor,
    max_lens: Tensor,
    length_penalty: float = 1.0,
    processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
    pick: Pick | None = None,
    shortlist: tuple[Tensor, Tensor] | None = None,
    start: Tensor | None = None,
) -> list[Hypothesis]:
    """src (B, S) padded ids -> the most probable token at each step (or the one `pick` draws), one
    hypothesis per sentence. `shortlist`: a shortlist's target ids, the only ones scored, and the
    columns each sentence may choose (Shortlist.for_batch). `start` (B, E): ids the decoder reads
    after its start token, before the output (not scored)."""
    vocab, allowed = shortlist if shortlist is not None else (None, None)
    b = src.size(0)
    mask = src != PAD
    memory: Tensor | None = model.encode(src, mask)
    src_mask: Tensor | None = mask
    steps = int(max_lens.max())
    out = torch.full((b, steps), PAD, dtype=torch.long, device=src.device)
    out_lp = torch.zeros((b, steps), device=src.device)
    active = torch.arange(b, device=src.device)  # original row of each running sentence
    tokens = start_tokens(model, b, start, src.device)
    cache = None
    for t in range(steps):
        logits, cache = model.decode(tokens, memory, src_mask, cache, vocab)
        lprobs = step_log_probs(
            logits, Step(t, max_lens[active] <= t + 1, out[active, :t], active), processors, allowed
        )
        if pick is None:
            best, at = topk(lprobs, 1)
            best_lp, col = best[:, 0], at[:, 0]
        else:
            col = pick(lprobs, active)
            best_lp = lprobs.gather(1, col[:, None]).squeeze(1)
        next_tok = col if vocab is None else vocab[col]  # column -> target id
        out[active, t], out_lp[active, t] = next_tok, best_lp
        keep = (next_tok != EOS).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if keep.numel() < active.numel():
            cache.reorder(keep, keep)
            active, next_tok = active[keep], next_tok[keep]
        tokens = next_tok[:, None]
        memory = src_mask = None  # from here on the decoder reads the source only through the cache
    return [
        _greedy_hypothesis(row, lps, length_penalty)
        for row, lps in zip(out.tolist(), out_lp.tolist())
    ]


def start_tokens(
    model: Searchable, rows: int, start: Tensor | None, device: torch.device
) -> Tensor:
    """The decoder's first input (rows, 1 + E): its start token, then `start` (rows, E) where
    given."""
    first = torch.full((rows, 1), model.start_token, dtype=torch.long, device=device)
    return first if start is None else torch.cat([first, start.to(device)], dim=1)


def _greedy_hypothesis(row: list[int], lps: list[float], length_penalty: float) -> Hypothesis:
    n = row.index(EOS) + 1 if EOS in row else len(row)  # output length, EOS included
    token_lps = lps[:n]
    return Hypothesis(
        [t for t in row[:n] if t not in (EOS, PAD)],
        _normalised(sum(token_lps), n, length_penalty),
        token_lps,
    )


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
    memory: Tensor | None = model.encode(
        src, mask
    )  # (B, S, D): one row per sentence, shared by its K beams
    src_mask: Tensor | None = mask
    active = torch.arange(b, device=dev)
    scores = torch.zeros(b, k, device=dev)
    scores[:, 1:] = float("-inf")  # all beams start identical; let only the first one expand
    history = torch.full((b * k, 0), PAD, dtype=torch.long, device=dev)
    history_lp = torch.zeros((b * k, 0), device=dev)  # each history token's own log-probability
    tokens = start_tokens(
        model, b * k, None if start is None else start.repeat_interleave(k, dim=0), dev
    )
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    cache = None
    for t in range(int(max_lens.max())):
        n = active.numel()
        logits, cache = model.decode(tokens, memory, src_mask, cache, vocab)
        at_limit = max_lens[active] <= t + 1  # (n,)
        step = Step(t, at_limit.repeat_interleave(k), history, active.repeat_interleave(k))
        lprobs = step_log_probs(logits, step, processors, allowed)
        choice = (guide.choose if guide is not None else _choose)(lprobs, scores, k, active)
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
        history = torch.cat(
            [history.index_select(0, src_rows), choice.tok[keep].view(-1, 1)], dim=1
        )
        history_lp = torch.cat(
            [history_lp.index_select(0, src_rows), choice.lp[keep].view(-1, 1)], dim=1
        )
        tokens = choice.tok[keep].view(-1, 1)
        scores, active = choice.scores[keep], active[keep]
        memory = src_mask = None  # the cache holds the cross-attention keys and values
    order = guide.rank if guide is not None else _by_score
    # Best first; sorted() is stable, so of equal scores the one finished first leads.
    return [
        sorted(hyps, key=functools.partial(order, s)) if hyps else [Hypothesis([], float("-inf"))]
        for s, hyps in enumerate(finished)
    ]


def _by_score(_sentence: int, h: Hypothesis) -> float:
    return -h.score


class Guide(Protocol):
    """Chooses each step's candidates in place of `_choose` (constrained search)."""

    def choose(self, lprobs: Tensor, scores: Tensor, k: int, active: Tensor) -> Choice: ...

    def keep(self, rows: list[int]) -> None: ...

    def rank(self, sentence: int, h: Hypothesis) -> Any: ...


def _choose(lprobs: Tensor, scores: Tensor, k: int, active: Tensor) -> Choice:
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


class Search:
    """One decoding setup, built once: a model, its decoding config, the step processors, the
    checkpoint's shortlist, and where to get the target ids that continue a word (which may not
    follow a term just completed; asked for only when a batch has terms). Calling it decodes any
    number of requests; `batch` decodes one batch."""

    def __init__(
        self,
        model: Searchable,
        cfg: DecodeConfig,
        processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
        shortlist: Shortlist | None = None,
        glue: Callable[[], Tensor] | None = None,
    ) -> None:
        self.model, self.cfg, self.processors, self.shortlist, self.glue = (
            model,
            cfg,
            processors,
            shortlist,
            glue,
        )

    def __call__(
        self,
        requests: Sequence[Request],
        samples: int = 1,
        progress: Callable[[int], None] | None = None,
    ) -> list[list[Hypothesis]]:
        """Hypotheses for each request, best first, in request order; `samples` draws each with
        sampling. `progress` hears how many requests each finished batch held."""
        was_training = self.model.training
        self.model.eval()
        out: list[list[Hypothesis]] = [[] for _ in requests]
        for chunk in self.batches([len(r.src) for r in requests], [r.start for r in requests]):
            for i, hyps in zip(chunk, self.batch([requests[i] for i in chunk], samples)):
                out[i] = hyps
            if progress is not None:
                progress(len(chunk))
        self.model.train(was_training)
        return out

    def batches(
        self, lengths: Sequence[int], starts: Sequence[tuple[int, ...]] | None = None
    ) -> list[list[int]]:
        """Indices sorted by source length, cut into batches of at most decode.batch_size sentences
        and (where set) decode.batch_tokens source tokens; a longer sentence goes alone. Sentences
        of different `starts` (decoder start ids: target languages) never share a batch."""
        budget = self.cfg.batch_tokens or float("inf")
        starts = starts or [()] * len(lengths)
        out: list[list[int]] = []
        tokens = 0
        for i in sorted(range(len(lengths)), key=lambda i: (starts[i], lengths[i])):
            if (
                not out
                or len(out[-1]) >= self.cfg.batch_size
                or tokens + lengths[i] > budget
                or (starts[i] != starts[out[-1][0]])
            ):
                out.append([])
                tokens = 0
            out[-1].append(i)
            tokens += lengths[i]
        return out

    @torch.inference_mode()
    def batch(self, requests: Sequence[Request], samples: int = 1) -> list[list[Hypothesis]]:
        """Decode one batch by the config's method, each sentence with its own request (source ids,
        prefix, constraints, sampling key); `samples` draws per sentence. The shortlist is used
        where nothing else names target ids (no prefix, n-gram ban, terms or sampling)."""
        model, cfg, processors = self.model, self.cfg, self.processors
        device = next(model.parameters()).device
        if (
            cfg.search_method == "sample" and samples > 1
        ):  # K draws: each sentence K times, draw d keyed (key, d)
            draws = [(r.key, d) for r in requests for d in range(samples)]
            requests = [r for r in requests for _ in range(samples)]
        else:
            draws = [(r.key, 0) for r in requests]
        src = pad([list(r.src) for r in requests]).to(device)
        start = (
            torch.tensor([r.start for r in requests], dtype=torch.long)
            if requests[0].start
            else None
        )
        limit = (
            model.cfg.max_positions - 1 - len(requests[0].start)
        )  # the start tokens take positions too
        max_lens = max_lengths(
            torch.tensor([len(r.src) for r in requests], device=device), cfg, limit
        )
        if any(r.prefix for r in requests):  # room for the prefix and at least EOS after it
            needed = torch.tensor([len(r.prefix) + 1 for r in requests], device=device)
            max_lens = torch.maximum(max_lens, needed.clamp(max=limit))
            processors = (ForcePrefix([list(r.prefix) for r in requests], device), *processors)
        if cfg.no_repeat_ngram:
            processors = (NoRepeatNgram(cfg.no_repeat_ngram), *processors)
        plain = processors == DEFAULT_PROCESSORS and cfg.search_method != "sample"
        plain = plain and not any(r.constraints for r in requests)  # nothing else names target ids
        listed = self.shortlist.for_batch(src) if self.shortlist is not None and plain else None
        if (
            listed is not None and listed[0].numel() < 2 * cfg.beam
        ):  # beam search takes each row's 2K best
            listed = None
        if cfg.search_method == "greedy":
            found = greedy_search(
                model, src, max_lens, cfg.length_penalty, processors, shortlist=listed, start=start
            )
            return [[h] for h in found]
        if cfg.search_method == "sample":
            found = greedy_search(
                model,
                src,
                max_lens,
                cfg.length_penalty,
                processors,
                Sampler(cfg, draws),
                start=start,
            )
            return [
                sorted(found[i : i + samples], key=lambda h: -h.score)
                for i in range(0, len(found), samples)
            ]
        guide = None
        if any(r.constraints for r in requests):
            guide = Constraints(
                [r.constraints for r in requests], cfg.beam, self.glue() if self.glue else None
            )
            processors = (*processors, guide.rules)
        return beam_search(
            model, src, max_lens, cfg.beam, cfg.length_penalty, processors, guide, listed, start
        )


def as_requests(src_ids: Sequence[Sequence[int]], start: tuple[int, ...] = ()) -> list[Request]:
    """Plain requests for source id lists (each ending in EOS), keyed by position; `start`: the
    decoder's start ids after its start token (Request.start)."""
    return [Request(src=tuple(ids), key=i, start=start) for i, ids in enumerate(src_ids)]


def search_ids(
    model: Searchable,
    src_ids: Sequence[Sequence[int]],
    cfg: DecodeConfig,
    shortlist: Shortlist | None = None,
) -> list[list[Hypothesis]]:
    """Decode source id lists (each ending in EOS) with nothing but a config: hypotheses per
    sentence, best first, in input order."""
    return Search(model, cfg, shortlist=shortlist)(as_requests(src_ids))


def search_batch(
    model: Searchable,
    src_ids: Sequence[Sequence[int]],
    cfg: DecodeConfig,
    shortlist: Shortlist | None = None,
) -> list[list[Hypothesis]]:
    """One batch of source id lists, as `search_ids` decodes many."""
    return Search(model, cfg, shortlist=shortlist).batch(as_requests(src_ids))
