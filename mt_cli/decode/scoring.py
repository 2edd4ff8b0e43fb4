"""Forced decoding: the model's log-probability of given translations, token by token.

A pair's score is the sum of the natural-log probabilities of its target tokens, EOS included,
each read with the model fed the source and the target so far: the quantity beam search sums
(over every token but PAD, as search's step does), so a hypothesis of `mt translate
--length-penalty 0` scores the same here when its text re-encodes to the same pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

from mt_cli.config import DecodeConfig
from mt_cli.data.collate import collate
from mt_cli.data.tokenizer import PAD
from mt_cli.decode.attention_maps import align_batch
from mt_cli.decode.ensemble import ForcedEnsemble
from mt_cli.decode.hypothesis import Hypothesis
from mt_cli.decode.search import batches
from mt_cli.model.transformer import Transformer

T = TypeVar("T")
Forced = Transformer | ForcedEnsemble  # what reads a whole target at once


@torch.inference_mode()
def force_batch(
    model: Forced, src_ids: list[list[int]], tgt_ids: list[list[int]]
) -> list[Hypothesis]:
    """Source ids (each ending in EOS) and target ids (no EOS) -> one Hypothesis per pair, its score
    the plain sum of its token log-probabilities (EOS included)."""
    device = next(model.parameters()).device
    src, tgt_in, tgt_out = (t.to(device) for t in collate(src_ids, tgt_ids, model.start_token))
    src_mask = src != PAD
    memory = model.encode(src, src_mask)
    logits = model.decode(tgt_in, memory, src_mask).float()  # type: ignore[arg-type]  # (B, T, V)
    logits[..., PAD] = float("-inf")  # never an output, as in search
    lprobs = torch.log_softmax(logits, dim=-1).gather(2, tgt_out[..., None]).squeeze(2)  # (B, T)
    out = []
    for row, tokens in zip(lprobs.tolist(), tgt_ids):
        token_lps = row[: len(tokens) + 1]  # the target's tokens and EOS; the rest is padding
        out.append(Hypothesis(list(tokens), sum(token_lps), token_lps))
    return out


def force(
    model: Forced,
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
    cfg: DecodeConfig,
    start: tuple[int, ...] = (),
) -> list[Hypothesis]:
    """Many pairs: batches of similar length, returned in input order. `start`: target ids the
    decoder reads before each target (an M2M100 or NLLB model's target language), not scored."""
    found = _batched(force_batch, model, src_ids, [[*start, *ids] for ids in tgt_ids], cfg)
    if not start:
        return found
    cut = [(h.tokens[len(start) :], h.token_logprobs[len(start) :]) for h in found]
    return [Hypothesis(tokens, sum(lps), lps) for tokens, lps in cut]


def align(
    model: Transformer, src_ids: list[list[int]], tgt_ids: list[list[int]], cfg: DecodeConfig
) -> list[list[int]]:
    return _batched(align_batch, model, src_ids, tgt_ids, cfg)


def _batched(
    fn: Callable[[Any, list[list[int]], list[list[int]]], list[T]],
    model: Any,
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
    cfg: DecodeConfig,
) -> list[T]:
    """`fn` over batches cut as search cuts them (search.batches: decode.batch_size sentences,
    decode.batch_tokens source tokens), its results in input order."""
    was_training = model.training
    model.eval()
    out: list[T | None] = [None] * len(src_ids)
    for chunk in batches([len(s) for s in src_ids], cfg):
        found = fn(model, [src_ids[i] for i in chunk], [tgt_ids[i] for i in chunk])
        for i, item in zip(chunk, found):
            out[i] = item
    model.train(was_training)
    return out  # type: ignore[return-value]  # every slot is filled
