"""One decoder layer as the decoding step runs it: the layer's own weights fused for one position at
a time (q, k and v of self-attention as one product; k and v of cross-attention as one) and cast
to the step's arithmetic once, sharing the model's modules where nothing changes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn

from mt_cli.decode.precision import (
    Int8Linear,
    fused_int8,
)
from mt_cli.model.layers import DecoderLayer
from mt_cli.model.ssru import SSRU


def fused(*layers: nn.Module) -> nn.Module:
    """One linear layer computing several side by side: x -> [x W1^T + b1, x W2^T + b2, ...]."""
    if all(isinstance(layer, Int8Linear) for layer in layers):
        return fused_int8(cast("list[Int8Linear]", list(layers)))
    layers = cast("tuple[nn.Linear, ...]", layers)
    out = nn.Linear(layers[0].in_features, sum(layer.out_features for layer in layers))
    out.weight.data = torch.cat([layer.weight.detach() for layer in layers])
    out.bias.data = torch.cat(
        [
            layer.weight.new_zeros(layer.out_features)
            if layer.bias is None
            else layer.bias.detach()
            for layer in layers
        ]
    )
    return out.requires_grad_(False)


class StepLayer(nn.Module):
    """One decoder layer's weights as the step uses them (shared with the model where not
    changed)."""

    qkv: nn.Module | None  # self-attention's q, k and v as one product; None with an SSRU
    self_out: nn.Module | None
    ssru: nn.Module | None  # an SSRU's x W and gate as one product; None with self-attention

    def __init__(self, layer: DecoderLayer, own: Callable[[nn.Module], nn.Module]) -> None:
        """`own`: how the step holds a module it takes as it is (a copy where it will be cast)."""
        super().__init__()
        sa, ca = layer.self_attn, layer.cross_attn
        self.n_heads = ca.n_heads
        # an SSRU in self-attention's place: x W and the gate's x W_f + b_f as one product
        if sa is None:
            ssru = cast(SSRU, layer.ssru)
            self.qkv, self.self_out, self.ssru = (
                None,
                None,
                fused(ssru.input_proj, ssru.forget_proj),
            )
        else:
            self.qkv, self.self_out, self.ssru = (
                fused(sa.q_proj, sa.k_proj, sa.v_proj),
                own(sa.out_proj),
                None,
            )
        self.cross_q = own(ca.q_proj)
        self.cross_kv = fused(ca.k_proj, ca.v_proj)
        self.cross_out = own(ca.out_proj)
        self.fc1, self.fc2 = own(layer.feed_forward.fc1), own(layer.feed_forward.fc2)
        self.act = layer.feed_forward.act
        self.norms = nn.ModuleList(
            own(s.norm) for s in (layer.self_sublayer, layer.cross_sublayer, layer.ffn_sublayer)
        )
        self.pre_norm = layer.self_sublayer.pre_norm

    def forward(
        self,
        x: Tensor,
        keys: Tensor,
        values: Tensor,
        cross_k: Tensor,
        cross_v: Tensor,
        cross_mask: Tensor | None,
        self_mask: Tensor | None = None,
    ) -> Tensor:
        """x (R, D) -> the layer's output at the new position. keys, values (T+1, R, H, D/H): the
        positions so far and, at the last, room where this one's are written; cross_k, cross_v
        (B, H, S, D/H) and cross_mask (B, 1, 1, S): the encoder side of the B sentences.
        self_mask (R, 1, 1, T+1), where rows began at different positions (decode/running_batch.py):
        the positions each row has (None: all)."""
        if self.ssru is None:
            x = self._sublayer(0, x, lambda h: self._self_attention(h, keys, values, self_mask))
        else:
            x = self._sublayer(0, x, lambda h: self._recurrence(h, keys))
        x = self._sublayer(1, x, lambda h: self._cross_attention(h, cross_k, cross_v, cross_mask))
        return self._sublayer(2, x, lambda h: self.fc2(self.act(self.fc1(h))))

    def _sublayer(self, n: int, x: Tensor, f: Callable[[Tensor], Tensor]) -> Tensor:
        norm = self.norms[n]
        return x + f(norm(x)) if self.pre_norm else norm(x + f(x))

    def _recurrence(self, h: Tensor, cell: Tensor) -> Tensor:
        """The SSRU's step (model/ssru.py): cell (1, R, H, D/H) holds c_{t-1} and gets c_t."""
        r, d = h.shape
        xw, gate = cast(nn.Module, self.ssru)(h).view(r, 2, d).unbind(1)  # (R, 2D) -> (R, D) each
        f = torch.sigmoid(gate)
        c = cell.view(r, d)
        new = f * c + (1 - f) * xw
        c.copy_(new)
        return torch.relu(new)

    def _self_attention(
        self, h: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None
    ) -> Tensor:
        r, d = h.shape
        # (R, H, D/H) each
        q, k, v = cast(nn.Module, self.qkv)(h).view(r, 3, self.n_heads, d // self.n_heads).unbind(1)
        keys[-1], values[-1] = k, v
        # (T+1, R, H, D/H) -> (R, H, T+1, D/H), a strided view: attention reads the cache in place.
        out = _attend(q[:, :, None], keys.permute(1, 2, 0, 3), values.permute(1, 2, 0, 3), mask)
        return cast(nn.Module, self.self_out)(out.reshape(r, d))  # (R, H, 1, D/H) -> (R, D)

    def _cross_attention(
        self, h: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None
    ) -> Tensor:
        r, d = h.shape
        b = keys.size(0)
        # The G = R/B beams of one sentence are G queries against its keys: (R, D) -> (B, H, G,
        # D/H).
        q = self.cross_q(h).view(b, r // b, self.n_heads, d // self.n_heads).transpose(1, 2)
        out = _attend(q, keys, values, mask)
        return self.cross_out(out.transpose(1, 2).reshape(r, d))

    def cross_keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """memory (B, S, D) -> keys and values (B, H, S, D/H) each."""
        b, s, d = memory.shape
        kv = self.cross_kv(memory).view(b, s, 2, self.n_heads, d // self.n_heads)
        # Contiguous, once per batch: attention read the interleaved view by copying it at every
        # step.
        return kv[:, :, 0].transpose(1, 2).contiguous(), kv[:, :, 1].transpose(1, 2).contiguous()


def _attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) V, PyTorch's fused kernel in every precision: the model's own
    `attention` avoids it in bf16 for training's backward pass, which decoding never runs, and
    under export its explicit products fixed the beam size at more than one."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def copied(module: nn.Module) -> nn.Module:
    """A module of its own, so that casting or quantizing the engine leaves the model as it was."""
    return copy.deepcopy(module).requires_grad_(False)


def shared(module: nn.Module) -> nn.Module:
    return module
