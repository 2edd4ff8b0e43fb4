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

from dataclasses import dataclass, field

import torch
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.data.collate import pad
from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.decode.processors import DEFAULT_PROCESSORS, NoRepeatNgram, Processor, Step, apply
from mt_cli.model.transformer import Transformer


@dataclass(frozen=True)
class Hypothesis:
    """One translation of one sentence. `score` is the length-normalised sum of `token_logprobs`
    (natural-log probabilities of each output token, EOS included): what beam search ranks by."""

    tokens: list[int]  # output ids, without EOS
    score: float
    token_logprobs: list[float] = field(default_factory=list)
    text: str = ""  # filled in by the Translator, which holds the tokenizer


def max_lengths(src_lens: Tensor, cfg: DecodeConfig, limit: int) -> Tensor:
    """Longest output (EOS included) each sentence may get: ratio * source length + offset."""
    lens = (src_lens.float() * cfg.max_len_ratio).long() + cfg.max_len_offset
    return lens.clamp(min=1, max=limit)


def step_log_probs(logits: Tensor, step: Step, processors: tuple[Processor, ...]) -> Tensor:
    """(N, 1, V) logits -> (N, V) float log-probabilities over every token but PAD, after the processors.

    PAD is never an output (CTranslate2 drops it too), so the same weights score the same here,
    in Hugging Face and in CTranslate2."""
    logits = logits[:, -1].float()
    logits[:, PAD] = float("-inf")
    return apply(processors, torch.log_softmax(logits, dim=-1), step)


def _normalised(total: float, length: int, length_penalty: float) -> float:
    return total / length**length_penalty


@torch.inference_mode()
def greedy_search(
    model: Transformer,
    src: Tensor,
    max_lens: Tensor,
    length_penalty: float = 1.0,
    processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
) -> list[Hypothesis]:
    """src (B, S) padded ids -> the most probable token at each step, one hypothesis per sentence."""
    b = src.size(0)
    mask = src != PAD
    memory: Tensor | None = model.encode(src, mask)
    src_mask: Tensor | None = mask
    steps = int(max_lens.max())
    out = torch.full((b, steps), PAD, dtype=torch.long, device=src.device)
    out_lp = torch.zeros((b, steps), device=src.device)
    active = torch.arange(b, device=src.device)  # original row of each running sentence
    tokens = torch.full((b, 1), model.start_token, dtype=torch.long, device=src.device)
    cache = None
    for t in range(steps):
        logits, cache = model.decode(tokens, memory, src_mask, cache)
        lprobs = step_log_probs(logits, Step(t, max_lens[active] <= t + 1, out[active, :t]), processors)
        next_tok = lprobs.argmax(dim=-1)
        best_lp = lprobs.gather(1, next_tok[:, None]).squeeze(1)
        out[active, t], out_lp[active, t] = next_tok, best_lp
        keep = (next_tok != EOS).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if keep.numel() < active.numel():
            cache.reorder(keep, keep)
            active, next_tok = active[keep], next_tok[keep]
        tokens = next_tok[:, None]
        memory = src_mask = None  # from here on the decoder reads the source only through the cache
    return [_greedy_hypothesis(row, lps, length_penalty) for row, lps in zip(out.tolist(), out_lp.tolist())]


def _greedy_hypothesis(row: list[int], lps: list[float], length_penalty: float) -> Hypothesis:
    n = row.index(EOS) + 1 if EOS in row else len(row)  # output length, EOS included
    token_lps = lps[:n]
    return Hypothesis([t for t in row[:n] if t not in (EOS, PAD)], _normalised(sum(token_lps), n, length_penalty),
                      token_lps)  # fmt: skip


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src: Tensor,
    max_lens: Tensor,
    beam: int,
    length_penalty: float,
    processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
) -> list[list[Hypothesis]]:
    """src (B, S) padded ids -> each sentence's K finished hypotheses, best first by score / length**alpha."""
    b, k, dev = src.size(0), beam, src.device
    mask = src != PAD
    memory: Tensor | None = model.encode(src, mask)  # (B, S, D): one row per sentence, shared by its K beams
    src_mask: Tensor | None = mask
    active = torch.arange(b, device=dev)
    scores = torch.zeros(b, k, device=dev)
    scores[:, 1:] = float("-inf")  # all beams start identical; let only the first one expand
    history = torch.full((b * k, 0), PAD, dtype=torch.long, device=dev)
    history_lp = torch.zeros((b * k, 0), device=dev)  # each history token's own log-probability
    tokens = torch.full((b * k, 1), model.start_token, dtype=torch.long, device=dev)
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    cache = None
    for t in range(int(max_lens.max())):
        n = active.numel()
        logits, cache = model.decode(tokens, memory, src_mask, cache)
        at_limit = max_lens[active] <= t + 1  # (n,)
        lprobs = step_log_probs(logits, Step(t, at_limit.repeat_interleave(k), history), processors)
        # A sentence's 2K best candidates are among the 2K best tokens of each of its beams, so
        # beam scores are added to (n*K, 2K) values, not to the whole (n*K, V) vocabulary.
        lp, tok = lprobs.topk(2 * k, dim=-1)  # (n*K, 2K)
        cand = (scores[:, :, None] + lp.view(n, k, 2 * k)).view(n, 2 * k * k)
        top_scores, top_idx = cand.topk(2 * k, dim=1)  # (n, 2K)
        top_beam, top_tok = top_idx // (2 * k), tok.view(n, 2 * k * k).gather(1, top_idx)
        top_lp = lp.view(n, 2 * k * k).gather(1, top_idx)  # the chosen token's own log-probability
        is_eos = top_tok == EOS
        ended = _Candidates(top_scores, top_beam, top_lp, is_eos)
        _finish(finished, active, history, history_lp, ended, k, (t + 1) ** length_penalty)
        # The K best candidates that are not EOS carry on.
        rank = is_eos.long() * 2 * k + torch.arange(2 * k, device=dev)
        pick = rank.topk(k, dim=1, largest=False).indices  # (n, K)
        scores = top_scores.gather(1, pick)
        next_beam, next_tok, next_lp = top_beam.gather(1, pick), top_tok.gather(1, pick), top_lp.gather(1, pick)
        done = torch.tensor([len(finished[s]) >= k for s in active.tolist()], device=dev) | at_limit
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        # Flat rows of the surviving beams: sentence i's beam j sits at row i*K + j.
        src_rows = (keep[:, None] * k + next_beam[keep]).view(-1)
        cache.reorder(src_rows, keep if keep.numel() < n else None)
        history = torch.cat([history.index_select(0, src_rows), next_tok[keep].view(-1, 1)], dim=1)
        history_lp = torch.cat([history_lp.index_select(0, src_rows), next_lp[keep].view(-1, 1)], dim=1)
        tokens = next_tok[keep].view(-1, 1)
        scores, active = scores[keep], active[keep]
        memory = src_mask = None  # the cache holds the cross-attention keys and values
    # Best first; sorted() is stable, so of equal scores the one finished first leads.
    return [sorted(hyps, key=lambda h: -h.score) if hyps else [Hypothesis([], float("-inf"))] for hyps in finished]


@dataclass
class _Candidates:
    """A step's 2K best candidates per running sentence, (n, 2K) each."""

    scores: Tensor  # cumulative log-probabilities
    beam: Tensor  # which of the sentence's beams each extends
    lp: Tensor  # the new token's own log-probability
    is_eos: Tensor


def _finish(
    finished: list[list[Hypothesis]], active: Tensor, history: Tensor, history_lp: Tensor, c: _Candidates, k: int,
    norm: float,
) -> None:  # fmt: skip
    """Record EOS candidates that rank among a sentence's K best (fairseq's rule)."""
    hits = (c.is_eos[:, :k] & torch.isfinite(c.scores[:, :k])).nonzero().tolist()
    for i, j in hits:
        sent = int(active[i])
        if len(finished[sent]) < k:
            row = i * k + int(c.beam[i, j])
            token_lps = history_lp[row].tolist() + [float(c.lp[i, j])]
            finished[sent].append(Hypothesis(history[row].tolist(), float(c.scores[i, j]) / norm, token_lps))


def search_batch(
    model: Transformer,
    src_ids: list[list[int]],
    cfg: DecodeConfig,
    processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
) -> list[list[Hypothesis]]:
    """Decode one batch of source id lists (each ending in EOS) by the config's method."""
    device = next(model.parameters()).device
    if cfg.no_repeat_ngram:
        processors = (NoRepeatNgram(cfg.no_repeat_ngram), *processors)
    src = pad(src_ids).to(device)
    limit = model.cfg.max_positions - 1
    max_lens = max_lengths(torch.tensor([len(s) for s in src_ids], device=device), cfg, limit)
    if cfg.search_method == "greedy":
        return [[h] for h in greedy_search(model, src, max_lens, cfg.length_penalty, processors)]
    return beam_search(model, src, max_lens, cfg.beam, cfg.length_penalty, processors)


def search_ids(
    model: Transformer,
    src_ids: list[list[int]],
    cfg: DecodeConfig,
    processors: tuple[Processor, ...] = DEFAULT_PROCESSORS,
) -> list[list[Hypothesis]]:
    """Decode many sentences: sorted by length into batches, returned in input order."""
    was_training = model.training
    model.eval()
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out: list[list[Hypothesis]] = [[] for _ in src_ids]
    for start in range(0, len(order), cfg.batch_size):
        chunk = order[start : start + cfg.batch_size]
        for i, hyps in zip(chunk, search_batch(model, [src_ids[i] for i in chunk], cfg, processors)):
            out[i] = hyps
    model.train(was_training)
    return out
