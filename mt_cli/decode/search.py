"""Greedy search, and `Search`: the one entry from requests to hypotheses (beam, greedy or
sampling, in batches). The model is used only through start_token, encode, decode and the cache it
returns (`reorder`), so any model keeping that contract can be searched.

Every search returns scored hypotheses: the tokens (without EOS), each token's log-probability (EOS
included) and the score search ranked by, sum / length**alpha. Every step's log-probabilities go
through one list of processors (`processors.py`) before anything is picked. Beam search lives in
`beam.py`, sampling in `sampling.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.data.collate import pad
from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.decode.beam import beam_search
from mt_cli.decode.constraints import Constraints
from mt_cli.decode.hypothesis import Hypothesis, Request, Searchable
from mt_cli.decode.processors import (
    DEFAULT_PROCESSORS,
    ForcePrefix,
    NoRepeatNgram,
    Processor,
    Step,
)
from mt_cli.decode.sampling import Sampler
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.stepping import Pick, max_lengths, normalised, start_tokens, step_log_probs
from mt_cli.decode.topk import topk


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


def _greedy_hypothesis(row: list[int], lps: list[float], length_penalty: float) -> Hypothesis:
    n = row.index(EOS) + 1 if EOS in row else len(row)  # output length, EOS included
    token_lps = lps[:n]
    return Hypothesis(
        [t for t in row[:n] if t not in (EOS, PAD)],
        normalised(sum(token_lps), n, length_penalty),
        token_lps,
    )


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
        lengths, starts = [len(r.src) for r in requests], [r.start for r in requests]
        for chunk in batches(lengths, self.cfg, starts):
            for i, hyps in zip(chunk, self.batch([requests[i] for i in chunk], samples)):
                out[i] = hyps
            if progress is not None:
                progress(len(chunk))
        self.model.train(was_training)
        return out

    @torch.inference_mode()
    def batch(self, requests: Sequence[Request], samples: int = 1) -> list[list[Hypothesis]]:
        """Decode one batch by the config's method, each sentence with its own request (source ids,
        prefix, constraints, sampling key); `samples` draws per sentence. The shortlist is used
        where nothing else names target ids (no prefix, n-gram ban, terms or sampling)."""
        model, cfg = self.model, self.cfg
        device = next(model.parameters()).device
        # K draws: each sentence K times, draw d keyed (key, d)
        if cfg.search_method == "sample" and samples > 1:
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
        # the start tokens take positions too
        limit = model.cfg.max_positions - 1 - len(requests[0].start)
        max_lens = max_lengths(
            torch.tensor([len(r.src) for r in requests], device=device), cfg, limit
        )
        processors = self.processors
        if any(r.prefix for r in requests):  # room for the prefix and at least EOS after it
            needed = torch.tensor([len(r.prefix) + 1 for r in requests], device=device)
            max_lens = torch.maximum(max_lens, needed.clamp(max=limit))
            processors = (ForcePrefix([list(r.prefix) for r in requests], device), *processors)
        if cfg.no_repeat_ngram:
            processors = (NoRepeatNgram(cfg.no_repeat_ngram), *processors)
        listed = self._listed(src, processors, requests)
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

    def _listed(
        self, src: Tensor, processors: tuple[Processor, ...], requests: Sequence[Request]
    ) -> tuple[Tensor, Tensor] | None:
        """The shortlist's columns for this batch, where nothing else names target ids (a prefix,
        an n-gram ban, terms or sampling) and each row has the 2K columns beam search takes."""
        cfg = self.cfg
        plain = processors == DEFAULT_PROCESSORS and cfg.search_method != "sample"
        plain = plain and not any(r.constraints for r in requests)
        if self.shortlist is None or not plain:
            return None
        listed = self.shortlist.for_batch(src)
        return None if listed[0].numel() < 2 * cfg.beam else listed


def batches(
    lengths: Sequence[int], cfg: DecodeConfig, starts: Sequence[tuple[int, ...]] | None = None
) -> list[list[int]]:
    """Indices sorted by source length, cut into batches of at most decode.batch_size sentences and
    (where set) decode.batch_tokens source tokens; a longer sentence goes alone. Sentences of
    different `starts` (decoder start ids: target languages) never share a batch. Search and forced
    scoring alike batch by this rule."""
    budget = cfg.batch_tokens or float("inf")
    starts = starts or [()] * len(lengths)
    out: list[list[int]] = []
    tokens = 0
    for i in sorted(range(len(lengths)), key=lambda i: (starts[i], lengths[i])):
        if (
            not out
            or len(out[-1]) >= cfg.batch_size
            or tokens + lengths[i] > budget
            or (starts[i] != starts[out[-1][0]])
        ):
            out.append([])
            tokens = 0
        out[-1].append(i)
        tokens += lengths[i]
    return out


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
