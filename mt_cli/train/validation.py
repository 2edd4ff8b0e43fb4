"""Validation: loss with teacher forcing and BLEU of real decoding, for one model or an average."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from mt_cli.config import Config
from mt_cli.data.collate import collate
from mt_cli.data.pairs import Pairs, make_batches
from mt_cli.data.tokenizer import PAD, Tokenizer
from mt_cli.decode.search import as_requests
from mt_cli.decode.shortlist import Shortlist
from mt_cli.decode.translator import Translator
from mt_cli.device import autocast
from mt_cli.metrics import score
from mt_cli.model.loss import label_smoothed_loss
from mt_cli.model.transformer import Transformer
from mt_cli.train.corpora import ValidSet

LOSS_CHUNK = 1024  # target tokens whose (chunk, V) logits exist at a time


@dataclass
class Validation:
    loss: float
    nll: float
    bleu: float
    # each direction's BLEU, where a run has several
    by_pair: dict[str, float] = field(default_factory=dict)


def validate_all(
    model: Transformer,
    tokenizer: Tokenizer,
    sets: list[ValidSet],
    cfg: Config,
    device: torch.device,
    amp: torch.dtype | None = None,
    shortlist: Shortlist | None = None,
) -> Validation:
    """Each direction's validation (`validate`), and for several their mean loss and BLEU: the
    best checkpoint of a multilingual run is the one best on average."""
    found = [
        validate(model, tokenizer, s.pairs, s.refs, cfg, device, amp, shortlist, s.start)
        for s in sets
    ]
    if len(found) == 1:
        return found[0]
    n = len(found)
    return Validation(
        sum(v.loss for v in found) / n,
        sum(v.nll for v in found) / n,
        sum(v.bleu for v in found) / n,
        {s.name: v.bleu for s, v in zip(sets, found)},
    )


def validate(
    model: Transformer,
    tokenizer: Tokenizer,
    pairs: Pairs,
    refs: list[str],
    cfg: Config,
    device: torch.device,
    amp: torch.dtype | None = None,
    shortlist: Shortlist | None = None,
    start: tuple[int, ...] = (),
) -> Validation:
    """Validation loss with teacher forcing, and BLEU of the same decoding `mt translate` does.

    The loss batches by train.valid_batch_tokens (no gradients are kept, so they can be larger than
    training's), and the output layer runs on a chunk of target tokens at a time: the float (tokens,
    V) logits of a whole batch are never built at once. `start`: the ids the decoder reads after its
    start token (the pairs' targets begin with them: an M2M100 model's target language)."""
    model.eval()
    loss_sum = nll_sum = 0.0
    n_tokens = 0
    with torch.inference_mode(), autocast(amp, device):
        for batch in make_batches(
            pairs.src_lens, pairs.tgt_lens, cfg.train.valid_batch_tokens, seed=0
        ):
            src, tgt_in, tgt_out = (
                t.to(device) for t in collate(*pairs.take(batch), model.start_token)
            )
            keep = tgt_out != PAD
            # (N, D), (N,): real target tokens only
            h, gold = (
                model.hidden(src, tgt_in, keep),
                tgt_out[keep],
            )
            for i in range(0, h.size(0), LOSS_CHUNK):
                logits = model.output_projection(h[i : i + LOSS_CHUNK])
                loss, nll = label_smoothed_loss(
                    logits, gold[i : i + LOSS_CHUNK], cfg.train.label_smoothing
                )
                loss_sum, nll_sum = loss_sum + loss.item(), nll_sum + nll.item()
            n_tokens += int(keep.sum())
        # The live model decodes as a loaded one would (decode/plan.py), uncompiled: its engine is
        # built from the weights as they are now, and leaves them as they are.
        translator = Translator(model, tokenizer, cfg.decode, shortlist=shortlist)
        found = translator.search_requests(as_requests(pairs.src, start))
    model.train()
    bleu = score([hyps[0].text for hyps in found], [refs], metrics=("bleu",))["bleu"]
    return Validation(loss_sum / n_tokens, nll_sum / n_tokens, bleu)
