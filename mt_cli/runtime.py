"""Where and how tensors run: device choice, bf16 autocast, CPU threads."""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from mt_cli.config import TrainConfig
from mt_cli.distributed import broadcast
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


def amp_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for train.amp, or None for full fp32.

    `auto` is bf16 on CUDA only: on the 2-core AMX CPU whole-model autocast was not reliably
    faster. fp16 is for GPUs without bf16 and trains with a gradient scaler.
    """
    if amp == "fp16":
        if device.type != "cuda":
            raise MtError(f"train.amp fp16 needs a CUDA device, not {device}; use bf16 or off")
        return torch.float16
    if amp == "bf16":
        return torch.bfloat16 if device.type in ("cuda", "cpu") else None
    if amp == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return None


def autocast(dtype: torch.dtype | bool | None, device: torch.device) -> contextlib.AbstractContextManager:
    """Autocast to `dtype` (True: bf16); None or False: a no-op."""
    if not dtype:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16 if dtype is True else dtype)


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


def largest_fitting(fits, start: int, cap: int) -> int:
    """The largest n in [start, cap] with fits(n), assuming fits is True up to some n and False
    after: double while it fits, then bisect between the last fit and the first miss. 0 if
    even `start` does not fit."""
    if not fits(start):
        return 0
    low, high = start, start
    while high < cap:
        high = min(high * 2, cap)
        if not fits(high):
            break
        low = high
    else:
        return cap
    while high - low > max(low // 16, 1):  # within 1/16: finer would only cost more probes
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def probe_batch_tokens(objective: nn.Module, device: torch.device, amp, longest: int, vocab: int) -> int:
    """Padded tokens of the largest batch whose forward and backward fit in this GPU's memory,
    tried with the longest pairs the data holds (the worst case for activation memory)."""

    gen = torch.Generator(device).manual_seed(0)  # not the training RNG, which exact resume depends on

    def fits(tokens: int) -> bool:
        rows = max(1, tokens // longest)
        ids = torch.randint(4, vocab, (rows, longest), device=device, generator=gen)
        try:
            with autocast(amp, device):
                loss = objective(ids, ids, ids)
            loss.backward()
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            objective.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()

    return largest_fitting(fits, 1024, 1 << 20)


def auto_batch_tokens(objective, device, amp, data, cfg, d, log) -> int:
    """--batch-tokens auto: on CUDA, 80% of the largest batch that fits (probed on rank 0, the same
    for every rank) times processes and shares; elsewhere the default."""
    t = cfg.train
    default = TrainConfig.__dataclass_fields__["batch_tokens"].default
    if device.type != "cuda":
        log(f"batch_tokens auto probes GPU memory; on {device} it is the default, {default}")
        return default
    found = 0
    if d.main:
        longest = int(max(data.src_lens.max(), data.tgt_lens.max() + 1))
        found = probe_batch_tokens(objective, device, amp, longest, cfg.model.tgt_vocab_size)
        if found == 0:
            raise MtError(f"not even 1024 tokens of the longest pairs fit on {device}; lower train.max_len")
    found = broadcast(found, d)
    tokens = int(found * 0.8) * d.world * t.accumulate
    log(f"batch_tokens auto: {found} tokens fit one {device} process; using {tokens} per global batch")
    return tokens


class CompiledOrEager(torch.nn.Module):
    """torch.compile(module), or the module itself when compiling fails on first use: a missing
    compiler or an unsupported graph costs speed, never the run."""

    def __init__(self, module: torch.nn.Module, log) -> None:
        super().__init__()
        self.module, self.log = module, log
        self.compiled: Any = torch.compile(module)

    def forward(self, *args):
        if self.compiled is not None:
            try:
                return self.compiled(*args)
            except Exception as e:  # inductor and dynamo raise many types
                self.compiled = None
                self.log(
                    f"torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0][:200]}); training without it"
                )
        return self.module(*args)
