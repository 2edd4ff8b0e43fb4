"""Fast decoding arithmetic: dynamic int8 linear layers, and a bf16 output layer where the CPU has AMX.

`benchmarks/speed.py` measures each against fp32, in speed and in BLEU.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch
from torch import Tensor, nn

from mt_cli.model.transformer import Transformer


class Bf16Linear(nn.Module):
    """A bias-free linear layer whose weight is cast to bf16 once: float in, float32 out."""

    weight: Tensor

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.register_buffer("weight", linear.weight.detach().to(torch.bfloat16), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return (x.to(torch.bfloat16) @ self.weight.t()).float()


def quantize_int8(model: Transformer) -> Transformer:
    """Dynamic int8 linear layers (weights int8, activations quantized per batch), in place: CPU decoding only.

    The output layer (d_model x vocabulary) is the largest product of a decoding step, and dynamic
    int8 did not speed it up where it was measured (`benchmarks/levers.py`); where the CPU
    multiplies bf16 in hardware (AMX) it runs in bf16 instead, several times faster.
    """
    from torch.ao.quantization import quantize_dynamic

    if torch.cpu._is_amx_tile_supported() and model.output_projection.bias is None:
        model.output_projection = Bf16Linear(model.output_projection)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch marks its quantized tensor constructors as deprecated
        quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=True)
    model.float_output = functools.cache(functools.partial(_as_floats, model.output_projection))
    return model


def _as_floats(layer: nn.Module) -> tuple[Tensor, Tensor | None]:
    """An int8 or bf16 output layer's weight and bias as floats: the numbers it multiplies by.
    Unpacked once, on first use (a shortlist's): unpacking a packed int8 weight per batch cost more
    than the shortlist saved (58k x 512)."""
    weight: Any = layer.weight() if callable(layer.weight) else layer.weight  # a quantized Linear's is a method
    bias: Any = getattr(layer, "bias", None)
    bias = bias() if callable(bias) else bias
    weight = weight.dequantize() if weight.is_quantized else weight.float()
    return weight, None if bias is None else bias.float()
