"""The training log's speed: tokens/s and MFU (model FLOPs per second against the device's peak)
over the steps since the last log line, measured in this process."""

from __future__ import annotations

import re
import time
from typing import Any

import torch

# Dense tensor-core peaks in FLOP/s from the vendors' data sheets, (bf16/fp16, fp32 without TF32).
CUDA_PEAKS = {
    "H200": (989e12, 67e12),
    "H100": (989e12, 67e12),  # SXM; PCIe is lower, so MFU on a PCIe card reads low
    "A100": (312e12, 19.5e12),
    "L40S": (362e12, 91.6e12),
    "A10": (125e12, 31.2e12),
    "L4": (121e12, 30.3e12),
    "V100": (125e12, 15.7e12),
    "T4": (65e12, 8.1e12),
}


class Throughput:
    """Counts the tokens (and so the FLOPs) of the updates since the window started; `read` gives
    their rate and restarts the window. Under torchrun every process does the same work in the same
    time, so MFU against one device's peak times the process count is the job's."""

    def __init__(self, model: Any, peak_flops: float, processes: int, now: float) -> None:
        self.per_src, self.per_tgt = linear_flops(model, 1, 0), linear_flops(model, 0, 1)
        self.peak = peak_flops * processes
        self.restart(now)

    def restart(self, now: float) -> None:
        """A new window from `now`: after validation, say, which is not training."""
        self.tokens, self.flops, self.start = 0, 0.0, now

    def count(self, src_tokens: int, tgt_tokens: int) -> None:
        """One update's tokens: the target tokens are what tokens/s counts."""
        self.tokens += tgt_tokens
        self.flops += self.per_src * src_tokens + self.per_tgt * tgt_tokens

    def read(self, now: float) -> tuple[float, float]:
        """(target tokens per second, MFU) over the window, which then restarts at `now`."""
        seconds = max(now - self.start, 1e-9)
        rates = self.tokens / seconds, self.flops / seconds / self.peak
        self.restart(now)
        return rates


def linear_flops(model: Any, n_src: int, n_tgt: int, out: int | None = None) -> float:
    """6 x (weights a token passes through) x tokens: forward 2, backward 4. Attention scores are
    left out; at sentence lengths (tens of tokens) they add about 1%.

    Any model with .encoder and .decoder (mt's, or Hugging Face's MarianModel); `out` is the
    output layer's weight count, read from mt's model when not given."""
    enc = sum(m.weight.numel() for m in model.encoder.modules() if isinstance(m, torch.nn.Linear))
    dec = sum(m.weight.numel() for m in model.decoder.modules() if isinstance(m, torch.nn.Linear))
    out = model.output_projection.weight.numel() if out is None else out
    return 6.0 * (enc * n_src + (dec + out) * n_tgt)


def matmul_peak(
    dtype: torch.dtype, device: torch.device = torch.device("cpu"), n: int = 2048, reps: int = 10
) -> float:
    """FLOP/s of an n x n matrix product: what this machine reaches at best, for CPUs with no data
    sheet.

    Sized to about a second: fewer repetitions where they would take longer, and n halved while
    one product would take over half a second (bf16 on a CPU without bf16 arithmetic ran about 100
    times slower than fp32). The figure is a rate either way, and the start of a training run
    should not wait minutes for it."""
    # Its own generator: measuring must not move the training RNG (exact resume depends on it).
    gen = torch.Generator(device).manual_seed(0)

    def timed(size: int, times: int) -> float:
        a, b = (
            torch.randn(size, size, dtype=dtype, device=device, generator=gen) for _ in range(2)
        )
        a @ b  # warm-up: kernels chosen, memory touched
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # the warm-up product is done before the timer starts
        start = time.perf_counter()
        for _ in range(times):
            a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    small = 256
    one = timed(small, 2) / 2 * (n / small) ** 3  # estimated seconds of one n x n product
    while n > small and one > 0.5:
        n, one = n // 2, one / 8
    reps = max(1, min(reps, int(1.0 / one)))
    return 2.0 * n**3 * reps / timed(n, reps)


def datasheet_peak(name: str, half: bool) -> float | None:
    """The data sheet's peak for a CUDA device name, matched as a whole word of the name, longest
    model first: "NVIDIA L40S" is an L40S, not an L4; "NVIDIA A10G" is none of them (None)."""
    words = set(re.split(r"[\s_-]+", name.upper()))
    for key in sorted(CUDA_PEAKS, key=len, reverse=True):
        if key in words:
            low, fp32 = CUDA_PEAKS[key]
            return low if half else fp32
    return None


def peak_flops(device: torch.device, half: bool) -> tuple[float, str]:
    """(peak FLOP/s, where the figure comes from) for the precision training runs in."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = datasheet_peak(name, half)
        if peak is not None:
            return peak, f"{name} data sheet"
    dtype = torch.bfloat16 if half else torch.float32
    return matmul_peak(dtype, device), f"a 2048x2048 {dtype} matmul timed on {device}"
