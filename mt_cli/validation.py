"""Validation: loss with teacher forcing and BLEU of real decoding, for one model or an average."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt_cli.config import Config
from mt_cli.data import Pairs, collate, make_batches
from mt_cli.evaluate import score
from mt_cli.loss import label_smoothed_loss
from mt_cli.model import Transformer
from mt_cli.runtime import autocast
from mt_cli.search import translate_ids
from mt_cli.tokenizer import PAD, Tokenizer


@dataclass
class Validation:
    loss: float
    nll: float
    bleu: float


def validate(
    model: Transformer, tokenizer: Tokenizer, pairs: Pairs, refs: list[str], cfg: Config, device, amp=None
) -> Validation:
    """Validation loss with teacher forcing, and BLEU of the same decoding `mt translate` does."""
    model.eval()
    loss_sum = nll_sum = 0.0
    n_tokens = 0
    with torch.inference_mode(), autocast(amp, device):
        for batch in make_batches(pairs.src_lens, pairs.tgt_lens, cfg.train.batch_tokens, seed=0):
            src, tgt_in, tgt_out = (t.to(device) for t in collate(*pairs.take(batch), model.start_token))
            keep = tgt_out != PAD
            loss, nll = label_smoothed_loss(model(src, tgt_in, keep), tgt_out[keep], cfg.train.label_smoothing)
            loss_sum, nll_sum = loss_sum + loss.item(), nll_sum + nll.item()
            n_tokens += int(keep.sum())
        hyps = tokenizer.decode_tgt(translate_ids(model, pairs.src, cfg.decode))
    model.train()
    bleu = score(hyps, [refs], metrics=("bleu",))["bleu"]
    return Validation(loss_sum / n_tokens, nll_sum / n_tokens, bleu)
