"""A running batch: sentences that join a search between two decoder steps and leave it as they
end (iteration-level scheduling, as Orca and vLLM schedule decoder-only models), for beam and
greedy search through the engine (decode/engine.py), of one model or an ensemble's.

A batch decoded the usual way (search.py) is formed, decoded to its longest sentence and only then
answered, while new sentences wait. Here `add` encodes new sentences in one encoder call and lays
their rows beside those running (running_cache.py), and each `step` returns the sentences that
ended at it. Each sentence is searched by the rule beam_search applies (greedy: one beam), at its
own step: its own positions, length limit and length penalty, its own shortlist columns (a row's
log-probabilities are normalised over its sentence's columns only), so its hypotheses are those
it gets decoded alone.

Plain requests only: no prefix, terms, n-gram ban or sampling, which name target ids or draw
(search.py decodes those). A decoder start of several ids (a target language) is read one id per
step, as the offline search steps through it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.data.collate import pad
from mt_cli.data.tokenizer import PAD
from mt_cli.decode.beam import by_score, choose, ranked
from mt_cli.decode.engine import Engine
from mt_cli.decode.ensemble import Ensemble, mean_log_probs
from mt_cli.decode.hypothesis import Hypothesis, Request, Searchable
from mt_cli.decode.processors import DEFAULT_PROCESSORS, Processor, Step
from mt_cli.decode.running_cache import RunningCache
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.stepping import max_lengths, step_log_probs
from mt_cli.decode.yielding import Yielding


@dataclass
class _Sentence:
    tag: Hashable  # what `step` returns it with
    length: int  # source tokens
    start: tuple[int, ...]  # decoder start ids still to read after the start token
    max_len: int  # longest output, EOS included
    t: int = 0  # outputs so far
    finished: list[Hypothesis] = field(default_factory=list)


class RunningBatch:
    """Sentences searched together, each joining when `add`ed and answered by the `step` at which
    it ends. `cfg`: beam or greedy search, its beam and length penalty; `shortlist` (where the
    config uses one) as search.py uses it; `before`, called ahead of each encoder call and step
    (a server's: decode/yielding.py). Several engines: an ensemble, their log-probabilities
    averaged at each step (decode/ensemble.py)."""

    def __init__(
        self,
        engine: Engine | Sequence[Engine],
        cfg: DecodeConfig,
        shortlist: Shortlist | None = None,
        before: Callable[[], None] | None = None,
    ) -> None:
        if cfg.search_method not in ("beam", "greedy") or cfg.no_repeat_ngram:
            raise ValueError("a running batch searches by beam or greedy, without an n-gram ban")
        self.engines = [engine] if isinstance(engine, Engine) else list(engine)
        self.cfg, self.shortlist, self.before = cfg, shortlist, before
        # an ensemble's: its shortest position table bounds every member's
        self.max_positions = min(e.cfg.max_positions for e in self.engines)
        self.k = cfg.beam if cfg.search_method == "beam" else 1
        self.device = next(self.engines[0].parameters()).device
        self.sentences: list[_Sentence] = []
        self.caches: list[RunningCache] = []  # one per engine
        self._reset()

    def _reset(self) -> None:
        k, dev = self.k, self.device
        self.scores = torch.zeros(0, k, device=dev)  # (n, K) each beam's sum of log-probabilities
        self.tokens = torch.zeros(0, dtype=torch.long, device=dev)  # (n*K,) each row's next input
        # (n*K, W): each row's outputs so far and their log-probabilities, right-aligned (the
        # last t of a sentence at output t; every sentence running gains one each step)
        self.history = torch.zeros(0, 0, dtype=torch.long, device=dev)
        self.history_lp = torch.zeros(0, 0, device=dev)
        self.allowed_ids: Tensor | None = None  # (n, V): each sentence's shortlist (None: none)
        self.vocab: Tensor | None = None  # the target ids the output layer scores (None: all)
        self.allowed: Tensor | None = None  # (n, V_s): allowed_ids at those columns
        self.listed: Tensor | None = None  # (V,): the ids in vocab (None: not cut yet)
        self.cut_at = 0  # the step count when vocab was last cut to the running sentences' union
        self.steps = 0
        self.caches = []

    @property
    def cache(self) -> RunningCache | None:
        """The (first) engine's cache; None while nothing runs."""
        return self.caches[0] if self.caches else None

    def __len__(self) -> int:
        """Sentences running."""
        return len(self.sentences)

    @property
    def rows(self) -> int:
        return len(self.sentences) * self.k

    @property
    def source_tokens(self) -> int:
        """The running sentences' source tokens (what a batch's token budget counts)."""
        return sum(s.length for s in self.sentences)

    @torch.inference_mode()
    def add(self, requests: Sequence[Request], tags: Sequence[Hashable]) -> None:
        """Sentences that join at the next step, encoded in one call; `step` returns each with its
        tag."""
        if any(r.prefix or r.constraints for r in requests):
            raise ValueError("a running batch takes no prefixes or terms")
        if not requests:
            return
        k, dev = self.k, self.device
        src = pad([list(r.src) for r in requests]).to(dev)
        mask = src != PAD
        if self.before is not None:
            self.before()
        new = [
            e.new_cache(e.encode(src, mask), mask, len(requests) * k, None, RunningCache)
            for e in self.engines
        ]
        if not self.caches:
            self.caches = cast("list[RunningCache]", new)
        else:
            for cache, joining in zip(self.caches, new):
                cache.add(cast(RunningCache, joining))
        for r, tag in zip(requests, tags):
            limit = self.max_positions - 1 - len(r.start)
            max_len = int(max_lengths(torch.tensor([len(r.src)]), self.cfg, limit)[0])
            self.sentences.append(_Sentence(tag, len(r.src), tuple(r.start), max_len))
        m = len(requests)
        scores = torch.zeros(m, k, device=dev)
        scores[:, 1:] = float("-inf")  # all beams start identical; let only the first one expand
        self.scores = torch.cat([self.scores, scores])
        # (an ensemble's other members read their own start token: _logits)
        first = torch.full((m * k,), self.engines[0].start_token, dtype=torch.long, device=dev)
        self.tokens = torch.cat([self.tokens, first])
        width = self.history.size(1)
        self.history = torch.cat([self.history, self.history.new_full((m * k, width), PAD)])
        self.history_lp = torch.cat([self.history_lp, self.history_lp.new_zeros(m * k, width)])
        if self.shortlist is not None:
            self._join_shortlist(self._allowed(src))

    def _allowed(self, src: Tensor) -> Tensor:
        """Each new sentence's shortlist (B, V): every id for one whose list is under the 2K
        candidates beam search takes, as search.py decodes such a sentence without one."""
        assert self.shortlist is not None
        allowed = self.shortlist.allowed(src)
        allowed[allowed.sum(dim=1) < 2 * self.k] = True
        return allowed

    def _join_shortlist(self, new: Tensor) -> None:
        """New sentences' shortlists (m, V). The output layer keeps its rows where they hold the
        new ones too (cutting them again costs a copy of its weight at every join): it may score
        ids that only sentences gone asked for, which each row's mask leaves out."""
        self.allowed_ids = _cat(self.allowed_ids, new)
        if self.listed is None or bool((new.any(dim=0) & ~self.listed).any()):
            self._cut_output()
            return
        allowed = new if self.vocab is None else new[:, self.vocab]
        self.allowed = torch.cat([cast(Tensor, self.allowed), allowed])

    def _cut_output(self) -> None:
        """The output layer's rows for the union of the running sentences' shortlists."""
        if self.allowed_ids is None or not self.caches:
            return
        self.listed = self.allowed_ids.any(dim=0)
        self.vocab = None if bool(self.listed.all()) else self.listed.nonzero().squeeze(1)
        self.allowed = self.allowed_ids if self.vocab is None else self.allowed_ids[:, self.vocab]
        self.cut_at = self.steps
        for e, cache in zip(self.engines, self.caches):
            cache.output = e.output.rows(self.vocab)

    @torch.inference_mode()
    def step(self) -> list[tuple[Hashable, list[Hypothesis]]]:
        """One decoder step of every running row: the sentences that ended at it, each with its tag
        and its hypotheses best first (as Search.batch gives them), in the order they joined."""
        if not self.caches:
            return []
        self.steps += 1
        if self.before is not None:
            self.before()
        each = [self._logits(e, cache) for e, cache in zip(self.engines, self.caches)]
        logits = each[0] if len(each) == 1 else mean_log_probs(each)
        n, k = len(self.sentences), self.k
        t = torch.tensor([s.t for s in self.sentences], device=self.device)
        at_limit = torch.tensor([s.max_len for s in self.sentences], device=self.device) <= t + 1
        sentence_of_row = torch.arange(n, device=self.device).repeat_interleave(k)
        step = Step(0, at_limit.repeat_interleave(k), None, sentence_of_row)
        lprobs = step_log_probs(logits[:, None], step, DEFAULT_PROCESSORS, self.allowed)
        # Sentences still reading their decoder start ids choose nothing at this step.
        reading = [i for i, s in enumerate(self.sentences) if s.start]
        live = torch.tensor(
            [i for i, s in enumerate(self.sentences) if not s.start],
            dtype=torch.long,
            device=self.device,
        )
        tok = torch.full((n, k), PAD, dtype=torch.long, device=self.device)
        beam = torch.arange(k, device=self.device).repeat(n, 1)
        lp = torch.zeros(n, k, device=self.device)
        done = torch.zeros(n, dtype=torch.bool, device=self.device)
        if live.numel():
            if reading:
                rows = (live[:, None] * k + torch.arange(k, device=self.device)).view(-1)
                lprobs = lprobs.index_select(0, rows)
            choice = choose(lprobs, self.scores[live], k, live)
            if self.vocab is not None:  # columns -> target ids (EOS's column is EOS: shortlist.py)
                choice.tok = self.vocab[choice.tok]
            self._finish(live, choice.ended)
            tok[live], beam[live], lp[live] = choice.tok, choice.beam, choice.lp
            self.scores[live] = choice.scores
            ended = torch.tensor([len(self.sentences[i].finished) >= k for i in live.tolist()])
            done[live] = ended.to(self.device) | at_limit[live]
        for i in reading:  # the next start id, on every beam
            tok[i] = self.sentences[i].start[0]
        return self._advance(done, tok, beam, lp, reading)

    def _logits(self, engine: Engine, cache: RunningCache) -> Tensor:
        """The step itself: each row at its own position -> logits (R, V or V_s)."""
        positions = cache.positions()
        tokens = self.tokens
        if engine.start_token != self.engines[0].start_token:  # an ensemble member's own start
            tokens = tokens.masked_fill(positions == 0, engine.start_token)
        keys, values = cache.next_step()
        logits = engine.step_fn(
            tokens,
            engine.positions.index_select(0, positions),
            keys,
            values,
            cache.cross_k,
            cache.cross_v,
            cache.cross_mask,
            *cache.output,
            engine.output.packed(cache.output[0]),
            self_mask=cache.self_mask(),
        )
        cache.length += 1
        return logits

    def _finish(self, live: Tensor, ended: list[tuple[int, int, float, float]]) -> None:
        """Record the hypotheses that end at this step, up to K per sentence, each normalised by
        its own length."""
        width, alpha = self.history.size(1), self.cfg.length_penalty
        for i, b, score, lp in ended:
            s = int(live[i])
            sent = self.sentences[s]
            if len(sent.finished) < self.k:
                row, t = s * self.k + b, sent.t
                tokens = self.history[row, width - t :].tolist()
                token_lps = self.history_lp[row, width - t :].tolist() + [lp]
                sent.finished.append(Hypothesis(tokens, score / (t + 1) ** alpha, token_lps))

    def _advance(
        self, done: Tensor, tok: Tensor, beam: Tensor, lp: Tensor, reading: list[int]
    ) -> list[tuple[Hashable, list[Hypothesis]]]:
        """The rows that go on, their beams in order, each given its next input; the sentences
        that ended leave, with their answers."""
        k, n = self.k, len(self.sentences)
        answers = [
            (s.tag, ranked([s.finished], by_score)[0])
            for s, d in zip(self.sentences, done.tolist())
            if d
        ]
        keep = (~done).nonzero().squeeze(1)
        reading_set = set(reading)
        for i, s in enumerate(self.sentences):
            if i in reading_set:
                s.start = s.start[1:]
            else:
                s.t += 1
        if keep.numel() == 0:
            self.sentences = []
            self._reset()
            return answers
        rows = (keep[:, None] * k + beam[keep]).view(-1)
        if keep.numel() < n or not torch.equal(rows, torch.arange(n * k, device=rows.device)):
            for cache in self.caches:
                cache.reorder(rows, keep if keep.numel() < n else None)
        self.sentences = [self.sentences[i] for i in keep.tolist()]
        self.scores, self.tokens = self.scores[keep], tok[keep].view(-1)
        # the history keeps as many columns as the longest output still running
        width = max(s.t for s in self.sentences)
        self.history = torch.cat([self.history.index_select(0, rows), tok[keep].view(-1, 1)], 1)
        self.history_lp = torch.cat(
            [self.history_lp.index_select(0, rows), lp[keep].view(-1, 1)], 1
        )
        cut = self.history.size(1) - width
        self.history, self.history_lp = self.history[:, cut:], self.history_lp[:, cut:]
        if self.allowed_ids is not None and keep.numel() < n:
            self.allowed_ids, self.allowed = (
                self.allowed_ids[keep],
                cast(Tensor, self.allowed)[keep],
            )
            if self.steps - self.cut_at >= 16:  # now and then, drop the rows nobody asks for
                self._cut_output()
        return answers


def _cat(old: Tensor | None, new: Tensor) -> Tensor:
    return new if old is None else torch.cat([old, new])


def running_batch(
    model: Searchable,
    cfg: DecodeConfig,
    processors: tuple[Processor, ...],
    shortlist: Shortlist | None,
) -> RunningBatch | None:
    """A running batch searching `model` (an engine, an ensemble of engines, either wrapped to
    step aside: decode/yielding.py) as Search would with `cfg` and `processors`, where that search
    allows one (beam or greedy, the default processors); else None."""
    inner: Any = model
    before = model.before if isinstance(model, Yielding) else None  # the server's: steps aside
    if isinstance(model, Yielding):
        inner = model.model
    plain = cfg.search_method != "sample" and not cfg.no_repeat_ngram
    if not plain or processors != DEFAULT_PROCESSORS:
        return None
    members = list(inner.members) if isinstance(inner, Ensemble) else [inner]
    return RunningBatch(cast("list[Engine]", members), cfg, shortlist, before)
