"""Where and how tensors run: device choice, autocast, CPU threads."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import logging
import os
import sys

import torch

from mt_cli.errors import MtError

log = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    """`auto` picks CUDA, then Apple's MPS, then the CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise MtError(f"device {name}: no CUDA device is available here; use device cpu or auto")
    if name == "mps" and not torch.backends.mps.is_available():
        raise MtError("device mps: MPS is not available here; use device cpu or auto")
    if name not in ("cpu", "mps") and not name.startswith("cuda"):
        raise MtError(f"device {name}: expected auto, cpu, cuda, cuda:N or mps")
    return torch.device(name)


def amp_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for train.amp, or None for full fp32.

    `auto` is bf16 on CUDA. On a CPU it is None here: where the CPU has bf16 arithmetic, training
    times both ways when it starts (train/hardware.py), since which is faster depends on the model's
    shape as much as on the CPU. fp16 is for GPUs without bf16 and trains with a gradient scaler.
    """
    if amp == "fp16":
        if device.type != "cuda":
            raise MtError(f"train.amp fp16 needs a CUDA device, not {device}; use bf16 or off")
        return torch.float16
    if amp == "bf16":
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise MtError(
                f"train.amp bf16: {torch.cuda.get_device_name(device)} has no bf16; "
                "set train.amp to fp16 (trains with a gradient scaler) or off"
            )
        if device.type == "cpu" and not cpu_has_bf16():
            cpu = f"this CPU ({torch.backends.cpu.get_cpu_capability()})"
            raise MtError(
                f"train.amp bf16: {cpu} has no bf16 arithmetic (AVX512-BF16 or AMX), "
                "so bf16 products run many times slower than fp32; set train.amp to off"
            )
        return torch.bfloat16 if device.type in ("cuda", "cpu") else None
    if amp == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return None


def decode_precision(precision: str, device: torch.device) -> str:
    """decode.precision as it runs on `device`: `auto` picks int8 on a CPU that multiplies int8 fast
    (VNNI or AMX: the fastest path measured there, BLEU within 0.15 of fp32), else fp32; bf16 on a
    GPU that has it, else fp32. A forced bf16 or int8 on a CPU without the arithmetic runs,
    emulated, and says so in one line."""
    if precision == "auto":
        if device.type == "cpu":
            return "int8" if cpu_has_int8() else "fp32"
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return "bf16" if bf16 else "fp32"
    if precision == "bf16" and device.type == "cpu" and not cpu_has_bf16():
        log.warning(
            "decode.precision bf16: this CPU (%s) has no bf16 arithmetic (AVX512-BF16 or AMX), "
            "so bf16 runs emulated, many times slower than fp32; int8 or fp32 are faster here",
            torch.backends.cpu.get_cpu_capability(),
        )
    if precision == "int8" and device.type == "cpu" and not cpu_has_int8():
        log.warning(
            "decode.precision int8: this CPU (%s) has no int8 arithmetic (VNNI or AMX), so int8 "
            "products run 19-55x slower than fp32's; fp32 is faster here",
            torch.backends.cpu.get_cpu_capability(),
        )
    return precision


def cpu_has_int8() -> bool:
    """Whether this CPU multiplies int8 in hardware (VNNI or AMX). Without it (an AVX2 AMD EPYC,
    measured by benchmarks/int8_cpu.py) torch's int8 product ran 19-55x slower than fp32's, and
    `mt translate` 10x slower in int8 than in fp32."""
    return bool(torch.cpu._is_vnni_supported() or torch.cpu._is_amx_tile_supported())


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware. Without it (an AVX2 AMD EPYC, measured) a
    2048x2048 bf16 product ran at about 1 GFLOP/s against fp32's 100."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def autocast(
    dtype: torch.dtype | bool | None, device: torch.device
) -> contextlib.AbstractContextManager:
    """Autocast to `dtype` (True: bf16); None or False: a no-op."""
    if not dtype:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16 if dtype is True else dtype)


def set_deterministic() -> None:
    """Kernels that give the same result every run, also on CUDA; set before CUDA starts work.

    cuBLAS needs a fixed workspace for it (CUBLAS_WORKSPACE_CONFIG, read when cuBLAS starts);
    an op with no deterministic kernel then raises instead of varying silently."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def set_threads(n: int) -> None:
    if n > 0:
        torch.set_num_threads(n)


@functools.cache
def keep_freed_memory() -> bool:
    """Keep memory the process frees for its next allocations, rather than handing each large block
    back to the OS (Linux, glibc): whether it took effect.

    glibc gives every block over 32 MB its own mapping and unmaps it when freed, so a decoder
    whose logits are that large (256k pieces x 128 rows of a beam: 130 MB) paid page faults on
    fresh memory for each product at every step: the whole search of an NLLB-shaped model ran
    30% slower for it (measured). Decoding processes call this once; the price is that their
    resident memory stays at its peak instead of falling between batches."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_max = -1, -4  # mallopt's parameters, from glibc's malloc.h
        return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, 2**31 - 1))
    except (OSError, AttributeError):  # another C library (musl has no mallopt)
        return False
