"""Greedy and beam search over a batch. The model is used only through start_token, encode, decode, cache.

Beam search keeps one flat (sentences x beam) batch. Each step scores 2K candidates per sentence;
EOS candidates among the best K are finished, the best K others go on (as fairseq does). A sentence
leaves the batch once it has K finished hypotheses, so later steps cost only what is still running.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.data import pad
from mt_cli.model import Transformer
from mt_cli.tokenizer import EOS, PAD


def max_lengths(src_lens: Tensor, cfg: DecodeConfig, limit: int) -> Tensor:
    """Longest output (EOS included) each sentence may get: ratio * source length + offset."""
    lens = (src_lens.float() * cfg.max_len_ratio).long() + cfg.max_len_offset
    return lens.clamp(min=1, max=limit)


def _allowed_logits(logits: Tensor) -> Tensor:
    """(N, 1, V) -> (N, V) float logits with PAD at -inf: it is never an output (CTranslate2 drops
    it too), so the same weights score the same here, in Hugging Face and in CTranslate2."""
    logits = logits[:, -1].float()
    logits[:, PAD] = float("-inf")
    return logits


def _limit_to_eos(scores: Tensor, at_limit: Tensor) -> Tensor:
    """Rows at their length limit may only end: all but EOS to -inf, in place. EOS keeps its own
    score (a log-probability over every token but PAD), not 1."""
    if bool(at_limit.any()):
        eos = scores[:, EOS].clone()
        scores[at_limit] = float("-inf")
        scores[:, EOS] = eos
    return scores


def _top_log_probs(logits: Tensor, at_limit: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """The n best (log-probability, token) of each row: (N, 1, V) -> (N, n), (N, n).

    A sentence's 2K best candidates are among the 2K best tokens of each of its beams, so the beam
    search adds beam scores to (N, 2K) values, not to the whole (N, V) vocabulary.
    """
    lp = _limit_to_eos(torch.log_softmax(_allowed_logits(logits), dim=-1), at_limit)
    return lp.topk(n, dim=-1)


@torch.inference_mode()
def greedy_search(model: Transformer, src: Tensor, max_lens: Tensor) -> list[list[int]]:
    """src (B, S) padded ids -> best token ids for each sentence, without EOS."""
    b = src.size(0)
    src_mask = src != PAD
    memory = model.encode(src, src_mask)
    out = torch.full((b, int(max_lens.max())), PAD, dtype=torch.long, device=src.device)
    active = torch.arange(b, device=src.device)  # original row of each running sentence
    tokens = torch.full((b, 1), model.start_token, dtype=torch.long, device=src.device)
    cache = None
    for t in range(out.size(1)):
        logits, cache = model.decode(tokens, memory, src_mask, cache)
        # The most probable token is the largest logit: greedy needs no softmax.
        next_tok = _limit_to_eos(_allowed_logits(logits), max_lens[active] <= t + 1).argmax(dim=-1)
        out[active, t] = next_tok
        keep = (next_tok != EOS).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if keep.numel() < active.numel():
            cache.reorder(keep, keep)
            active, next_tok = active[keep], next_tok[keep]
        tokens = next_tok[:, None]
        memory = src_mask = None  # from here on the decoder reads the source only through the cache
    return [_strip(row) for row in out.tolist()]


@torch.inference_mode()
def beam_search(model: Transformer, src: Tensor, max_lens: Tensor, beam: int, length_penalty: float) -> list[list[int]]:
    """src (B, S) padded ids -> the best finished hypothesis per sentence, by score / length**alpha."""
    b, k, dev = src.size(0), beam, src.device
    src_mask = src != PAD
    memory = model.encode(src, src_mask)  # (B, S, D): one row per sentence, shared by its K beams
    active = torch.arange(b, device=dev)
    scores = torch.zeros(b, k, device=dev)
    scores[:, 1:] = float("-inf")  # all beams start identical; let only the first one expand
    history = torch.full((b * k, 0), PAD, dtype=torch.long, device=dev)
    tokens = torch.full((b * k, 1), model.start_token, dtype=torch.long, device=dev)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    cache = None
    for t in range(int(max_lens.max())):
        n = active.numel()
        logits, cache = model.decode(tokens, memory, src_mask, cache)
        at_limit = max_lens[active] <= t + 1  # (n,)
        lp, tok = _top_log_probs(logits, at_limit.repeat_interleave(k), 2 * k)  # (n*K, 2K)
        cand = (scores[:, :, None] + lp.view(n, k, 2 * k)).view(n, 2 * k * k)
        top_scores, top_idx = cand.topk(2 * k, dim=1)  # (n, 2K)
        top_beam, top_tok = top_idx // (2 * k), tok.view(n, 2 * k * k).gather(1, top_idx)
        is_eos = top_tok == EOS
        _finish(finished, active, history, top_scores, top_beam, is_eos, k, (t + 1) ** length_penalty)
        # The K best candidates that are not EOS carry on.
        rank = is_eos.long() * 2 * k + torch.arange(2 * k, device=dev)
        pick = rank.topk(k, dim=1, largest=False).indices  # (n, K)
        scores = top_scores.gather(1, pick)
        next_beam, next_tok = top_beam.gather(1, pick), top_tok.gather(1, pick)
        done = torch.tensor([len(finished[s]) >= k for s in active.tolist()], device=dev) | at_limit
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        # Flat rows of the surviving beams: sentence i's beam j sits at row i*K + j.
        src_rows = (keep[:, None] * k + next_beam[keep]).view(-1)
        cache.reorder(src_rows, keep if keep.numel() < n else None)
        history = torch.cat([history.index_select(0, src_rows), next_tok[keep].view(-1, 1)], dim=1)
        tokens = next_tok[keep].view(-1, 1)
        scores, active = scores[keep], active[keep]
        memory = src_mask = None  # the cache holds the cross-attention keys and values
    return [max(hyps, key=lambda h: h[0])[1] if hyps else [] for hyps in finished]


def _finish(finished, active, history, top_scores, top_beam, is_eos, k: int, norm: float) -> None:
    """Record EOS candidates that rank among a sentence's K best (fairseq's rule)."""
    hits = (is_eos[:, :k] & torch.isfinite(top_scores[:, :k])).nonzero().tolist()
    for i, j in hits:
        sent = int(active[i])
        if len(finished[sent]) < k:
            seq = history[i * k + int(top_beam[i, j])].tolist()
            finished[sent].append((float(top_scores[i, j]) / norm, seq))


def _strip(row: list[int]) -> list[int]:
    return row[: row.index(EOS)] if EOS in row else [t for t in row if t != PAD]


def decode_batch(model: Transformer, src_ids: list[list[int]], cfg: DecodeConfig) -> list[list[int]]:
    """Decode one batch of source id lists (each ending in EOS) with greedy or beam search."""
    device = next(model.parameters()).device
    src = pad(src_ids).to(device)
    limit = model.cfg.max_positions - 1
    max_lens = max_lengths(torch.tensor([len(s) for s in src_ids], device=device), cfg, limit)
    if cfg.beam == 1:
        return greedy_search(model, src, max_lens)
    return beam_search(model, src, max_lens, cfg.beam, cfg.length_penalty)


def translate_ids(model: Transformer, src_ids: list[list[int]], cfg: DecodeConfig) -> list[list[int]]:
    """Decode many sentences: sorted by length into batches, returned in input order."""
    was_training = model.training
    model.eval()
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out: list[list[int]] = [[] for _ in src_ids]
    for start in range(0, len(order), cfg.batch_size):
        chunk = order[start : start + cfg.batch_size]
        for i, hyp in zip(chunk, decode_batch(model, [src_ids[i] for i in chunk], cfg)):
            out[i] = hyp
    model.train(was_training)
    return out
