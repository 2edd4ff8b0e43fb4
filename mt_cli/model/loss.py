"""The training loss: label-smoothed cross-entropy, plainly and fused with the output layer, and
R-Drop's consistency term beside it."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from mt_cli.data.tokenizer import PAD
from mt_cli.model.transformer import Transformer


def label_smoothed_loss(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int = PAD
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed cross-entropy and summed NLL over the targets that are not `pad_id`.

    logits (..., V), target (...). The smoothed target puts 1 - eps on the gold token and spreads
    eps evenly over all V classes. PAD never reaches the decoder as content (it embeds as zeros) and
    search never picks it, so it needs no special place in the softmax.
    """
    lprobs = F.log_softmax(logits.float(), dim=-1).flatten(0, -2)  # (..., V) -> (N, V)
    target = target.reshape(-1)
    nll = F.nll_loss(lprobs, target, ignore_index=pad_id, reduction="sum")
    # Weighted, not indexed: lprobs[target != pad_id] would cost a slow index_put in the backward
    # pass.
    uniform = -(lprobs.sum(dim=-1) * (target != pad_id)).sum() / lprobs.size(-1)
    return (1.0 - smoothing) * nll + smoothing * uniform, nll


class OutputLayerLoss(torch.autograd.Function):
    """label_smoothed_loss(h @ weight.T, target) for training, a chunk of rows at a time.

    The (N, V) logits never exist whole: each chunk's logits, softmax and gradient stay in the
    CPU's cache, and the gradients are worked out in the forward pass, as the loss is. That cuts
    the memory traffic of the softmax over the vocabulary, the step's largest elementwise work.
    Under fp16 autocast they are worked out in the backward pass instead (the logits computed
    again): only there is the loss scale known, and fp16 gradients formed before it would lose
    the small probabilities to underflow. No PAD targets: training passes real target tokens only.
    """

    @staticmethod
    def forward(
        ctx: Any, h: Tensor, weight: Tensor, target: Tensor, smoothing: float, chunk: int
    ) -> Tensor:
        device = h.device.type
        # Under autocast the products run in its dtype: cast the (V, D) weight once here, not per
        # chunk and product, as autocast would inside this function (its weight cache is off here).
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype
        ctx.smoothing, ctx.chunk, ctx.dtype, ctx.deferred = (
            smoothing,
            chunk,
            dtype,
            dtype == torch.float16,
        )
        loss = torch.zeros((), device=h.device)
        grad_h, grad_w = torch.empty_like(h), torch.zeros_like(weight)
        with torch.autocast(device, enabled=False):
            w, x = weight.to(dtype), h.to(dtype)
            for i in range(0, h.size(0), chunk):
                rows, gold = x[i : i + chunk], target[i : i + chunk, None]
                lprobs = torch.log_softmax((rows @ w.t()).float(), dim=-1)  # (c, D) -> (c, V)
                loss += _chunk_loss(lprobs, gold, smoothing)
                if not ctx.deferred:
                    g = _logit_grads(lprobs, gold, smoothing).to(dtype)
                    grad_h[i : i + chunk] = g @ w
                    grad_w += g.t() @ rows
        ctx.save_for_backward(*((h, weight, target) if ctx.deferred else (grad_h, grad_w)))
        return loss

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor) -> tuple[Tensor, Tensor, None, None, None]:
        if not ctx.deferred:
            grad_h, grad_w = ctx.saved_tensors
            return grad_h * grad_loss, grad_w * grad_loss, None, None, None
        h, weight, target = ctx.saved_tensors
        grad_h, grad_w = torch.empty_like(h), torch.zeros_like(weight)
        with torch.autocast(h.device.type, enabled=False):
            w, x = weight.to(ctx.dtype), h.to(ctx.dtype)
            for i in range(0, h.size(0), ctx.chunk):
                rows, gold = x[i : i + ctx.chunk], target[i : i + ctx.chunk, None]
                lprobs = torch.log_softmax((rows @ w.t()).float(), dim=-1)
                # Scaled (the loss scale is in grad_loss) before the cast to fp16, as autograd
                # would.
                g = _logit_grads(lprobs, gold, ctx.smoothing).mul_(grad_loss).to(ctx.dtype)
                grad_h[i : i + ctx.chunk] = g @ w
                grad_w += g.t() @ rows
        return grad_h, grad_w, None, None, None


def _chunk_loss(lprobs: Tensor, gold: Tensor, smoothing: float) -> Tensor:
    """A chunk's summed label-smoothed loss from its (c, V) log-probabilities; no PAD targets."""
    nll = -lprobs.gather(1, gold).sum()
    return (1.0 - smoothing) * nll - smoothing * lprobs.sum() / lprobs.size(-1)


def _logit_grads(lprobs: Tensor, gold: Tensor, smoothing: float) -> Tensor:
    """d loss / d logits = softmax - smoothed target, in place of the (c, V) log-probabilities."""
    return _minus_smoothed_target(lprobs.exp_(), gold, smoothing)


def _minus_smoothed_target(probs: Tensor, gold: Tensor, smoothing: float) -> Tensor:
    """probs - the smoothed target (1 - eps on the gold piece, eps spread over all), in place."""
    g = probs.sub_(smoothing / probs.size(-1))
    return g.scatter_add_(1, gold, torch.full(gold.shape, smoothing - 1.0, device=g.device))


def output_layer_loss(
    h: Tensor, weight: Tensor, target: Tensor, smoothing: float, chunk: int = 256
) -> Tensor:
    """Summed label-smoothed cross-entropy of the logits h (N, D) @ weight.T (V, D) -> (N, V)."""
    return OutputLayerLoss.apply(h, weight, target, smoothing, chunk)


def rdrop_loss(
    logits: Tensor, other: Tensor, target: Tensor, smoothing: float, alpha: float
) -> Tensor:
    """R-Drop (Liang et al. 2021): the same targets predicted twice under two dropout masks,
    logits and other (N, V), target (N,) without PAD. The paper's loss per pair is
    CE1 + CE2 + alpha * (KL(P1||P2) + KL(P2||P1)) / 2; halved here (as fairseq's criterion does),
    so that its cross-entropy part is on the usual loss's scale and the batch's token count still
    normalises it. Summed over the N targets."""
    p, q = F.log_softmax(logits.float(), dim=-1), F.log_softmax(other.float(), dim=-1)
    gold = target[:, None]
    ce = _chunk_loss(p, gold, smoothing) + _chunk_loss(q, gold, smoothing)
    # KL(P||Q) + KL(Q||P) = sum (p - q) * (log p - log q)
    kl = ((p.exp() - q.exp()) * (p - q)).sum()
    return 0.5 * ce + 0.25 * alpha * kl


class RDropOutputLayerLoss(torch.autograd.Function):
    """rdrop_loss(h1 @ weight.T, h2 @ weight.T, target), h = [h1; h2] (2N, D), a chunk of rows at a
    time, its gradients worked out in the forward pass as OutputLayerLoss does: the two (N, V)
    logits never exist whole. Not under fp16 autocast (the loss scale is known only later)."""

    @staticmethod
    def forward(
        ctx: Any,
        h: Tensor,
        weight: Tensor,
        target: Tensor,
        smoothing: float,
        alpha: float,
        chunk: int,
    ) -> Tensor:
        n, device = target.size(0), h.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype
        loss = torch.zeros((), device=h.device)
        grad_h, grad_w = torch.empty_like(h), torch.zeros_like(weight)
        with torch.autocast(device, enabled=False):
            w, x = weight.to(dtype), h.to(dtype)
            for i in range(0, n, chunk):
                j = min(i + chunk, n)
                gold = target[i:j, None]
                first, second = x[i:j], x[n + i : n + j]
                lp = torch.log_softmax((first @ w.t()).float(), dim=-1)  # (c, D) -> (c, V)
                lq = torch.log_softmax((second @ w.t()).float(), dim=-1)
                part, g1, g2 = _rdrop_chunk(lp, lq, gold, smoothing, alpha)
                loss += part
                grad_h[i:j] = g1.to(dtype) @ w
                grad_h[n + i : n + j] = g2.to(dtype) @ w
                grad_w += g1.to(dtype).t() @ first + g2.to(dtype).t() @ second
        ctx.save_for_backward(grad_h, grad_w)
        return loss

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor) -> tuple[Tensor | None, ...]:
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_loss, grad_w * grad_loss, None, None, None, None


def _rdrop_chunk(
    lp: Tensor, lq: Tensor, gold: Tensor, smoothing: float, alpha: float
) -> tuple[Tensor, Tensor, Tensor]:
    """One chunk's rdrop_loss and its gradients by the two logits, from their log-probabilities.

    With d = lp - lq and kl = sum p * d per row, d/dz1 of sum (p - q) * d is p * (d - kl) + p - q
    (the softmax's Jacobian applied to d + 1 - q / p), and the same for z2 with p and q swapped."""
    p, q, d = lp.exp(), lq.exp(), lp - lq
    kl_pq, kl_qp = (p * d).sum(-1, keepdim=True), (-q * d).sum(-1, keepdim=True)
    ce = _chunk_loss(lp, gold, smoothing) + _chunk_loss(lq, gold, smoothing)
    loss = 0.5 * ce + 0.25 * alpha * (kl_pq.sum() + kl_qp.sum())
    g1 = (p * (d - kl_pq) + p - q).mul_(0.25 * alpha)
    g2 = (q * (-d - kl_qp) + q - p).mul_(0.25 * alpha)
    # the cross-entropy's share last: it turns p and q into their gradients in place
    g1.add_(_minus_smoothed_target(p, gold, smoothing), alpha=0.5)
    g2.add_(_minus_smoothed_target(q, gold, smoothing), alpha=0.5)
    return loss, g1, g2


class TranslationLoss(torch.nn.Module):
    """The training objective as one module: DistributedDataParallel wraps it, so that the
    encoder, decoder and the fused output layer all run inside the one forward it watches."""

    def __init__(self, model: Transformer, smoothing: float, rdrop: float = 0.0) -> None:
        super().__init__()
        self.model = model
        self.smoothing = smoothing
        self.rdrop = rdrop  # R-Drop's alpha; 0: off

    def forward(
        self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, at: Tensor | None = None
    ) -> Tensor:
        """Summed label-smoothed loss over the real (non-PAD) target tokens; `at`: their flat
        indices into tgt_out, when the caller has them (training's batches do)."""
        if self.rdrop > 0 and self.training:
            return self._rdrop(src, tgt_in, tgt_out, at)
        if torch.compiler.is_compiling():
            # The fused loss loops over chunks of a data-dependent count, which would break the
            # graph; inductor fuses the softmax over the vocabulary by itself. With the real
            # tokens' indices given, the logits are formed at those only; without them (picking
            # them has a data-dependent size), at every position, PAD weighted out.
            if at is None:
                return label_smoothed_loss(self.model(src, tgt_in), tgt_out, self.smoothing)[0]
            logits = self.model(src, tgt_in, at)  # (N, V)
            gold = tgt_out.flatten().index_select(0, at)
            return label_smoothed_loss(logits, gold, self.smoothing)[0]
        if at is None:
            at = _real_tokens(tgt_out)
        h = self.model.hidden(src, tgt_in, at)  # (N, D), real target tokens only
        gold = tgt_out.flatten().index_select(0, at)
        # an imported model's output bias: not fused
        if self.model.output_projection.bias is not None:
            return label_smoothed_loss(self.model.output_projection(h), gold, self.smoothing)[0]
        return output_layer_loss(h, self.model.output_projection.weight, gold, self.smoothing)

    def _rdrop(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, at: Tensor | None) -> Tensor:
        """The batch twice in one pass (B -> 2B rows, each row its own dropout mask), as the
        paper runs it: one larger batch uses the cores better than two passes. The output layer
        and the loss run fused, as in the plain loss; compiled (inductor fuses them itself),
        under fp16 or with an output bias, on whole logits."""
        if at is None:
            at = _real_tokens(tgt_out)
        both = torch.cat([at, at + tgt_out.numel()])  # flat indices into the (2B, T) targets
        h = self.model.hidden(torch.cat([src, src]), torch.cat([tgt_in, tgt_in]), both)  # (2N, D)
        gold = tgt_out.flatten().index_select(0, at)
        device = h.device.type
        fp16 = torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.half
        output = self.model.output_projection
        if torch.compiler.is_compiling() or fp16 or output.bias is not None:
            first, second = output(h).chunk(2)  # (N, V) each
            return rdrop_loss(first, second, gold, self.smoothing, self.rdrop)
        return RDropOutputLayerLoss.apply(h, output.weight, gold, self.smoothing, self.rdrop, 256)


def _real_tokens(tgt_out: Tensor) -> Tensor:
    """Flat indices (N,) of tgt_out's (B, T) real, non-PAD, targets."""
    return (tgt_out != PAD).flatten().nonzero().squeeze(1)
