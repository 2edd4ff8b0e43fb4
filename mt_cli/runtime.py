"""Where and how tensors run: device choice, bf16 autocast, CPU threads."""

from __future__ import annotations

import contextlib
import warnings

import torch
from torch import nn

from mt_cli.errors import MtError


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


def quantize_int8(model: nn.Module) -> nn.Module:
    """Dynamic int8 linear layers (weights int8, activations quantized per batch): CPU decoding only."""
    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch marks its quantized tensor constructors as deprecated
        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
