"""Fast decoding arithmetic: int8 linear layers, and a bf16 output layer where the CPU has bf16 arithmetic.

`benchmarks/speed.py` measures each against fp32, in speed and in BLEU.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from mt_cli.device import cpu_has_bf16
from mt_cli.model.transformer import Transformer


class Bf16Linear(nn.Module):
    """A linear layer whose weight (and bias) is cast to bf16 once: float in, float32 out."""

    weight: Tensor
    bias: Tensor | None

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.register_buffer("weight", linear.weight.detach().to(torch.bfloat16), persistent=False)
        bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)
        self.register_buffer("bias", bias, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.linear(x.to(torch.bfloat16), self.weight, self.bias).float()


class Int8Linear(nn.Module):
    """A linear layer in int8 products: the weight quantized once per output row, the input per
    row at each call, int32 sums scaled back to float32.

    Each input row has its own scale, so a sentence's numbers never depend on the others in its
    batch: a batch translates exactly as its lines do one by one. PyTorch's dynamic int8 layer
    scales the whole input by one number, so there a long sentence changed its neighbours' words."""

    weight_t: Tensor
    scale: Tensor
    bias: Tensor | None

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127  # (out,)
        self.register_buffer("weight_t", torch.round(w / scale[:, None]).to(torch.int8).t().contiguous())  # (in, out)
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float())

    def forward(self, x: Tensor) -> Tensor:
        rows = x.reshape(-1, x.size(-1)).float()  # (..., in) -> (M, in)
        x_scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127  # (M, 1)
        q = torch.round(rows / x_scale).to(torch.int8)
        out = torch._int_mm(q, self.weight_t).float().mul_(x_scale).mul_(self.scale)  # (M, out)
        if self.bias is not None:
            out.add_(self.bias)
        return out.view(*x.shape[:-1], -1)


def quantize_rows(module: nn.Module) -> nn.Module:
    """Every nn.Linear inside `module` replaced by an Int8Linear, in place."""
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, Int8Linear(child))
        else:
            quantize_rows(child)
    return module


def quantize_int8(model: Transformer) -> Transformer:
    """int8 linear layers (Int8Linear) in the encoder and decoder, in place: CPU decoding only.

    The output layer (d_model x vocabulary) is the largest product of a decoding step; where the
    CPU has bf16 arithmetic it runs in bf16 (twice fp32's products here, and a shortlist slices
    its rows as floats), elsewhere in fp32.
    """
    quantize_rows(model.encoder)
    quantize_rows(model.decoder)
    if cpu_has_bf16():
        layer = Bf16Linear(model.output_projection)
        model.output_projection = layer  # type: ignore[assignment]  # nn.Linear's call, in bf16
        model.float_output = functools.cache(functools.partial(_as_floats, layer))
    return model


def _as_floats(layer: Bf16Linear) -> tuple[Tensor, Tensor | None]:
    """A bf16 output layer's weight and bias as float32, for a shortlist's rows; made once, on first use."""
    return layer.weight.float(), None if layer.bias is None else layer.bias.float()
