"""int8 decoding arithmetic: linear layers in int8 products, each input row scaled on its own.

`benchmarks/speed.py` measures int8 against fp32, in speed and in BLEU.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mt_cli.model.transformer import Transformer


def int8_linear(x: Tensor, weight_t: Tensor, scale: Tensor, bias: Tensor | None) -> Tensor:
    """x (..., in) float -> (..., out) float32: x quantized per row, an int8 product with
    weight_t (in, out), int32 sums scaled back by the row's scale and the weight's per-column one.

    Each input row has its own scale, so a sentence's numbers never depend on the others in its
    batch: a batch translates exactly as its lines do one by one. PyTorch's dynamic int8 layer
    scales the whole input by one number, so there a long sentence changed its neighbours' words."""
    rows = x.reshape(-1, x.size(-1)).float()  # (..., in) -> (M, in)
    x_scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127  # (M, 1)
    q = torch.round(rows / x_scale).to(torch.int8)
    out = torch._int_mm(q, weight_t).float().mul_(x_scale).mul_(scale)  # (M, out)
    if bias is not None:
        out.add_(bias)
    return out.view(*x.shape[:-1], -1)


def quantize(weight: Tensor) -> tuple[Tensor, Tensor]:
    """A float weight (out, in) -> int8 (out, in) and its per-row scale (out,)."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127
    return torch.round(w / scale[:, None]).to(torch.int8), scale


class Int8Linear(nn.Module):
    """A linear layer in int8 products (`int8_linear`): the weight quantized once per output row.

    `rows_first` keeps the int8 weight as (out, in) and multiplies by its transposed view, which
    measured twice as fast as an (in, out) copy for an output layer of 256k pieces (and lets a
    shortlist slice its rows); hidden layers keep (in, out), faster for some of their shapes."""

    weight_t: Tensor
    scale: Tensor
    bias: Tensor | None

    def __init__(self, linear: nn.Linear | None = None, rows_first: bool = False) -> None:
        super().__init__()
        if linear is None:  # filled by `fused`
            return
        q, scale = quantize(linear.weight)
        self.register_buffer("weight_t", q.t() if rows_first else q.t().contiguous())  # (in, out)
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float())

    @property
    def out_features(self) -> int:
        return self.weight_t.size(1)

    def forward(self, x: Tensor) -> Tensor:
        return int8_linear(x, self.weight_t, self.scale, self.bias)


def fused_int8(layers: list[Int8Linear]) -> Int8Linear:
    """One int8 layer computing several side by side, exactly as they do: per-row input scales
    depend on the input alone, so concatenating output columns changes no number."""
    out = Int8Linear()
    out.register_buffer("weight_t", torch.cat([layer.weight_t for layer in layers], dim=1))
    out.register_buffer("scale", torch.cat([layer.scale for layer in layers]))
    biases = [layer.bias if layer.bias is not None else layer.scale.new_zeros(layer.out_features) for layer in layers]
    out.register_buffer("bias", torch.cat(biases))
    return out


def quantize_rows(module: nn.Module) -> nn.Module:
    """Every nn.Linear inside `module` replaced by an Int8Linear, in place."""
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, Int8Linear(child))
        else:
            quantize_rows(child)
    return module


def quantize_int8(model: Transformer) -> Transformer:
    """Every linear layer of the model in int8 (Int8Linear), in place: CPU decoding only.

    The output layer (d_model x vocabulary) is the largest product of a decoding step; it is
    int8 too, its weight kept rows first. Embeddings stay as they are (they are looked up, not
    multiplied), so a tied output weight keeps its float copy in the embedding table."""
    quantize_rows(model.encoder)
    quantize_rows(model.decoder)
    model.output_projection = Int8Linear(model.output_projection, rows_first=True)  # type: ignore[assignment]
    return model


def is_quantized(module: nn.Module) -> bool:
    return any(isinstance(m, Int8Linear) for m in module.modules())
