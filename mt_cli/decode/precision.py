"""int8 decoding arithmetic: linear layers in int8 products, each input row scaled on its own.

`benchmarks/speed.py` measures int8 against fp32, in speed and in BLEU.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from mt_cli.model.transformer import Transformer


def int8_linear(
    x: Tensor, weight_t: Tensor, scale: Tensor, bias: Tensor | None, packed: Packed | None = None
) -> Tensor:
    """x (..., in) float -> (..., out) float32: x quantized per row, an int8 product with
    weight_t (in, out), int32 sums scaled back by the row's scale and the weight's per-column one.

    Each input row has its own scale, so a sentence's numbers never depend on the others in its
    batch: a batch translates exactly as its lines do one by one. PyTorch's dynamic int8 layer
    scales the whole input by one number, so there a long sentence changed its neighbours' words.
    `packed`, the same weight in oneDNN's layout (`Packed`), gives the same int32 sums faster."""
    rows = x.reshape(-1, x.size(-1)).float()  # (..., in) -> (M, in)
    x_scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127  # (M, 1)
    q = torch.round(rows / x_scale).to(torch.int8)
    if packed is None:
        out = torch._int_mm(q, weight_t).float().mul_(x_scale).mul_(scale)  # (M, out)
    else:
        out = packed(q, scale).mul_(x_scale)
    if bias is not None:
        out.add_(bias)
    return out.view(*x.shape[:-1], -1)


@functools.cache  # asked at every int8 product; the CPU does not change
def packs_weights() -> bool:
    """Whether int8 products go through weights packed once for oneDNN (`Packed`): on CPUs with
    AMX, where oneDNN's int8 kernels use its tile unit and `torch._int_mm`, repacking the weight at
    every call, measured up to 2x slower. Elsewhere `torch._int_mm` stays (not yet measured
    against oneDNN there)."""
    return torch.backends.mkldnn.is_available() and torch.cpu._is_amx_tile_supported()


class Packed:
    """An int8 weight (out, in) packed once into oneDNN's blocked layout. Called with int8 rows
    (M, in) and the weight's per-row scale (out,), it returns (M, out) float32: the exact int32
    sums times the weight's scales, as `torch._int_mm` then `.mul_(scale)` give. The input's scale
    is passed as 1 (rows are scaled after, each by its own), so nothing depends on the batch."""

    def __init__(self, weight: Tensor) -> None:
        self.weight = torch.ops.onednn.qlinear_prepack(weight, None)
        self.zero = torch.zeros(weight.size(0), dtype=torch.int64)

    def __call__(self, q: Tensor, scale: Tensor) -> Tensor:
        one = q.size(0) == 1
        if one:  # oneDNN runs a single row through its slow reference kernel, two rows not
            q = q.expand(2, -1).contiguous()
        out = torch.ops.onednn.qlinear_pointwise(
            q, 1.0, 0, self.weight, scale, self.zero, None, 1.0, 0, torch.float32, "none", [], ""
        )
        return out[:1] if one else out


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
        return int8_linear(x, self.weight_t, self.scale, self.bias, self.packed())

    def packed(self) -> Packed | None:
        """The weight packed for oneDNN, made on first use where it is faster (`packs_weights`);
        never while torch.export traces the step (the compiled step multiplies the plain weight)."""
        if (
            torch.compiler.is_compiling()
            or self.weight_t.device.type != "cpu"
            or not packs_weights()
        ):
            return None
        cached = self.__dict__.get("_packed")
        if cached is None or cached[0] is not self.weight_t:  # a new weight (to(), load_state_dict)
            cached = self.__dict__["_packed"] = (
                self.weight_t,
                Packed(self.weight_t.t().contiguous()),
            )
        return cached[1]


def fused_int8(layers: list[Int8Linear]) -> Int8Linear:
    """One int8 layer computing several side by side, exactly as they do: per-row input scales
    depend on the input alone, so concatenating output columns changes no number."""
    out = Int8Linear()
    out.register_buffer("weight_t", torch.cat([layer.weight_t for layer in layers], dim=1))
    out.register_buffer("scale", torch.cat([layer.scale for layer in layers]))
    biases = [
        layer.bias if layer.bias is not None else layer.scale.new_zeros(layer.out_features)
        for layer in layers
    ]
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
    int8 = Int8Linear(model.output_projection, rows_first=True)
    model.output_projection = int8  # type: ignore[assignment]
    return model


def is_quantized(module: nn.Module) -> bool:
    return any(isinstance(m, Int8Linear) for m in module.modules())
