"""Where and how tensors run: device choice, bf16 autocast, CPU threads."""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from mt_cli.errors import MtError

if TYPE_CHECKING:
    from mt_cli.model import Transformer


def resolve_device(name: str) -> torch.device:
    """`auto` picks CUDA, then Apple's MPS, then the CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise MtError(f"--device {name}: no CUDA device is available here; use --device cpu or auto")
    if name == "mps" and not torch.backends.mps.is_available():
        raise MtError("--device mps: MPS is not available here; use --device cpu or auto")
    if name not in ("cpu", "mps") and not name.startswith("cuda"):
        raise MtError(f"--device {name}: expected auto, cpu, cuda, cuda:N or mps")
    return torch.device(name)


def use_bf16(amp: str, device: torch.device) -> bool:
    """`auto` turns bf16 on for CUDA only: on the 2-core AMX CPU whole-model autocast was not reliably faster."""
    if amp == "bf16":
        return device.type in ("cuda", "cpu")
    return amp == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()


def autocast(enabled: bool, device: torch.device) -> contextlib.AbstractContextManager:
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def set_threads(n: int) -> None:
    if n > 0:
        torch.set_num_threads(n)


class Bf16Linear(nn.Module):
    """A bias-free linear layer whose weight is cast to bf16 once: float in, float32 out."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.register_buffer("weight", linear.weight.detach().to(torch.bfloat16), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return (x.to(torch.bfloat16) @ self.weight.t()).float()


def quantize_int8(model: Transformer) -> Transformer:
    """Dynamic int8 linear layers (weights int8, activations quantized per batch), in place: CPU decoding only.

    The output layer (d_model x vocabulary) is the largest product of a decoding step, and int8 does
    not speed it up on this kind of CPU (5.7 ms against 5.6 in fp32 for 320 rows x 8k); where the
    CPU multiplies bf16 in hardware (AMX) it runs in bf16 instead, 5x faster.
    """
    from torch.ao.quantization import quantize_dynamic

    if torch.cpu._is_amx_tile_supported() and model.output_projection.bias is None:
        model.output_projection = Bf16Linear(model.output_projection)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch marks its quantized tensor constructors as deprecated
        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=True)
