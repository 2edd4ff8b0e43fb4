"""Several training processes, one model: torch.distributed as `torchrun` sets it up.

`torchrun --nproc_per_node=N -m mt_cli train ...` starts N copies of `mt train`; each reads
RANK, WORLD_SIZE and LOCAL_RANK from the environment, joins one process group (NCCL on CUDA,
gloo on the CPU), and trains its share of every global batch under DistributedDataParallel.
Without torchrun, WORLD_SIZE is unset and nothing here does anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from mt_cli.config import TrainConfig
from mt_cli.errors import MtError


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    timeout_s: float = TrainConfig.dist_timeout_s  # the one default, train.dist_timeout_s

    @property
    def main(self) -> bool:
        """Rank 0: the one process that writes checkpoints, logs and progress."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1


def from_env(timeout_s: float) -> Dist:
    """The ranks torchrun gave this process (rank 0 of 1 when it did not start it)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    return Dist(rank, world, int(os.environ.get("LOCAL_RANK", "0")), timeout_s)


def device_for(d: Dist, device: torch.device) -> torch.device:
    """One GPU per process: rank r on a node takes cuda:LOCAL_RANK."""
    if d.active and device.type == "cuda":
        torch.cuda.set_device(d.local_rank)
        return torch.device("cuda", d.local_rank)
    return device


@contextmanager
def process_group(d: Dist, device: torch.device) -> Iterator[None]:
    """Join the job's process group for the duration (a no-op for one process).

    The timeout bounds every collective: a rank that died or hangs ends the others' wait with an
    error after `timeout_s`, not a silent hang.
    """
    if not d.active:
        yield
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if backend == "nccl":
        # Collectives that time out raise here, in this thread, where the handler below turns them
        # into one line. By default NCCL's watchdog thread kills the process itself on a timeout,
        # before Python sees any error. (A user's own setting is kept.)
        os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
    try:
        dist.init_process_group(backend, timeout=timedelta(seconds=d.timeout_s))
    except Exception as e:  # rendezvous failures come in several types
        raise MtError(
            f"rank {d.rank}: could not join the {backend} process group ({_first_line(e)})"
        ) from None
    try:
        yield
    except MtError:
        raise
    # dist.DistError is one; gloo's transport errors are plain RuntimeErrors
    except RuntimeError as e:
        if not _lost_contact(e):
            raise
        raise MtError(
            f"rank {d.rank}: lost contact with the other processes ({_first_line(e)}). If one "
            "died, its own "
            f"error is printed above; if one hung, the job gave up after {d.timeout_s:.0f} s "
            "(train.dist_timeout_s)"
        ) from None
    finally:
        dist.destroy_process_group()


def _lost_contact(e: BaseException) -> bool:
    """Whether an error means the other processes are gone or stuck, rather than a bug here."""
    words = ("gloo", "NCCL", "Connection", "connection", "Timed out", "timed out", "Broken pipe")
    return isinstance(e, dist.DistError) or any(w in str(e) for w in words)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def barrier(d: Dist) -> None:
    """Wait until every rank gets here. At the end of training, so that no process leaves the
    group (tearing down its gloo or NCCL connections) while another still has a collective with
    it in flight: the rank that left first could abort in its teardown."""
    if d.active:
        dist.barrier()


def all_sum(values: list[float], d: Dist) -> list[float]:
    """Element-wise sum over ranks (in float64, so that sums of losses lose nothing)."""
    if not d.active:
        return values
    t = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return t.tolist()


def sum_tensor(t: torch.Tensor, d: Dist) -> torch.Tensor:
    """A tensor summed over ranks, left on its device: the all-reduce is queued, not waited for."""
    if d.active:
        dist.all_reduce(t)
    return t


def broadcast(obj: Any, d: Dist) -> Any:
    """Rank 0's `obj`, on every rank."""
    if not d.active:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(obj: Any, d: Dist) -> list[Any] | None:
    """Every rank's `obj`, as a list on rank 0 (None elsewhere)."""
    if not d.active:
        return [obj]
    out = [None] * d.world if d.main else None
    dist.gather_object(obj, out, dst=0)
    return out
