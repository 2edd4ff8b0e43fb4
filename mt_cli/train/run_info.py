"""RUN/run.json: what a run trained on and where, written once when it starts, for `mt report`."""

from __future__ import annotations

import json
import platform

import torch

from mt_cli import __version__
from mt_cli.data.cache import TokenCorpus
from mt_cli.data.mixture import MixedCorpus
from mt_cli.files import atomic_write_text
from mt_cli.train.context import RunContext
from mt_cli.train.corpora import ValidSet


def write_run_info(
    ctx: RunContext,
    fingerprints: dict,
    train_data: TokenCorpus | MixedCorpus,
    valid: list[ValidSet],
    amp: torch.dtype | None,
) -> None:
    """RUN/run.json: the data and the environment of the run, for `mt report`."""
    sources, device = ctx.data.sources(), ctx.device
    corpora = train_data.corpora if isinstance(train_data, MixedCorpus) else [train_data]
    sizes = iter([len(c) for c in corpora] + [len(v.pairs) for v in valid])
    left = iter([{k: v for k, v in c.counts.items() if v} for c in corpora])
    data = {
        role: {"source": s.describe(), "fingerprint": fingerprints[role], "pairs": next(sizes)}
        for role, s in sources.items()
        if role.startswith("train")
    }
    for entry in data.values():
        entry["left_out"] = next(left)
    data.update(
        {
            role: {"source": s.describe(), "fingerprint": fingerprints[role], "pairs": next(sizes)}
            for role, s in sources.items()
            if role.startswith("valid")
        }
    )
    name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or platform.machine()
    )
    environment = {
        "mt": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "device": f"{device} ({name})",
        "processes": ctx.dist.world,
        "threads per process": torch.get_num_threads(),
        "autocast": str(amp) if amp else "off (fp32)",
    }
    atomic_write_text(
        ctx.paths.run_info, json.dumps({"data": data, "environment": environment}, indent=1) + "\n"
    )
