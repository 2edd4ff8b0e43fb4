"""The engine's decoder step compiled ahead of time for one checkpoint, precision and CPU.

torch.export traces the step (decode/engine.py's `Step`) with every size free: rows, source
length, steps so far, shortlist. AOTInductor compiles it, weights frozen in, into a package kept
beside the checkpoint (`best.pt` -> `best.pt.compiled/int8-<key>.pt2`). Building takes tens of
seconds, once; a later process loads the package in milliseconds through PyTorch's C++ loader,
without importing the compiler. The key names what the code was built for (the checkpoint file's
size and time, the precision, torch's version, the CPU's instruction sets, the step's source): a
changed checkpoint, another torch, another CPU or another mt builds a new package rather than
running a wrong one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from mt_cli.config import DecodeConfig
from mt_cli.decode import engine as engine_module
from mt_cli.decode import precision as precision_module
from mt_cli.decode.engine import Engine
from mt_cli.device import decode_precision
from mt_cli.errors import MtError
from mt_cli.model import checkpoint

# The code a package compiles (the step, and the int8 layer it may use): when it changes, older
# packages stop matching rather than run what the code no longer says.
_STEP_CODE = b"".join(Path(str(m.__file__)).read_bytes() for m in (engine_module, precision_module))
log = logging.getLogger(__name__)


def compile_checkpoint(path: Path, precision: str | None = None) -> tuple[Path, bool]:
    """The compiled step of the checkpoint at `path` in `precision` (None: the one it decodes in,
    its decode.precision), built unless it already is: its package, and whether it was built now.
    Built as a Translator loads it (decode.engine compiled), so the package holds the very weights
    translation will run."""
    # it builds through the plan, which uses this module
    from mt_cli.decode.translator import (
        Translator,
    )

    ckpt = checkpoint.load(path) if precision is None else None  # checks the file; loaded once
    wanted = ckpt.config.decode.precision if ckpt is not None else str(precision)
    # checked; auto
    precision = decode_precision(DecodeConfig(precision=wanted).precision, torch.device("cpu"))
    package = package_path(path, precision) if path.is_file() else None
    if package is not None and package.exists():
        return package, False
    ckpt = ckpt or checkpoint.load(path)
    tr = Translator.from_checkpoint(
        ckpt, device="cpu", source=path, precision=precision, engine="compiled"
    )
    return package_path(path, tr.plan.precision), True


def compile_or_say(path: Path, whose: str, say: Callable[[str], None]) -> None:
    """compile_checkpoint(path) where it can be built; where it cannot (no C++ compiler, say) one
    line through `say`: the checkpoint stands, and translation runs the step uncompiled."""
    try:
        package, _ = compile_checkpoint(path)
    except MtError as e:
        say(f"decoder step not compiled ({e}); translation runs it uncompiled")
        return
    say(f"compiled {whose} decoder step for this CPU: {package}")


def cpu_features() -> str:
    """What compiled CPU code depends on: the instruction sets PyTorch found."""
    flags = [torch.backends.cpu.get_cpu_capability()]
    for name, probe in (
        ("avx512bf16", torch.cpu._is_avx512_bf16_supported),
        ("vnni", torch.cpu._is_vnni_supported),
        ("amx", torch.cpu._is_amx_tile_supported),
    ):
        if probe():
            flags.append(name)
    return "+".join(flags)


def package_path(checkpoint: Path, precision: str) -> Path:
    """Where the compiled step of `checkpoint` in `precision` for this torch and CPU is kept."""
    stat = checkpoint.stat()
    what = (
        f"{stat.st_size} {stat.st_mtime_ns} {precision} {torch.__version__} {cpu_features()}"
    ).encode()
    key = hashlib.sha256(what + _STEP_CODE).hexdigest()[:16]
    return checkpoint.with_name(checkpoint.name + ".compiled") / f"{precision}-{key}.pt2"


def load(path: Path) -> Callable[[list[Tensor]], Tensor]:
    """A compiled step from its package: a function of the step's inputs as a flat list."""
    try:
        loader = torch._C._aoti.AOTIModelPackageLoader(str(path), "model", False, 1, -1)
    except RuntimeError as e:
        raise MtError(
            f"{path}: not a compiled decoder step this torch can load ({e}); delete it to rebuild"
        ) from e
    return lambda inputs: loader.boxed_run(inputs)[0]


def build(engine: Engine, path: Path) -> None:
    """Compile `engine`'s step into a package at `path` (atomically: an interrupted build leaves
    none)."""
    compiler = os.environ.get("CXX", "g++")
    if shutil.which(compiler) is None:
        raise MtError(
            f"decode.engine compiled builds C++ with {compiler}, which is not installed here; "
            "install g++ (Debian: apt-get install g++) or set CXX, or use decode.engine eager"
        )
    import torch._inductor  # the compiler: imported only when building

    log.info(
        "compiling the decoder step for this CPU, once (%s precision, about 15-30 s): %s",
        engine.precision,
        path,
    )
    example, dims = _example(engine)
    with torch.no_grad():
        program = torch.export.export(engine.step_fn, example, dynamic_shapes=dims, strict=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.stem}.{os.getpid()}.partial.pt2")  # the builder wants .pt2
        try:
            # freezing: the weights become constants of the compiled code. Not prepacked into
            # oneDNN's layouts: its products then keep state for every new number of rows, memory
            # that grows with the lines translated and buys no speed.
            options = {"freezing": True, "cpp.weight_prepack": False}
            torch._inductor.aoti_compile_and_package(
                program, package_path=str(partial), inductor_configs=options
            )
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)


def _example(engine: Engine) -> tuple[tuple, dict]:
    """Inputs of the step's shapes (2 sentences x 3 beams, 5 source tokens, 4 positions, 7 pieces)
    and which of their sizes are free."""
    from torch.export import Dim

    cfg = engine.cfg
    b, g, s, t, v = 2, 3, 5, 4, 7
    out_weight, out_scale, out_bias = engine.output.rows(torch.arange(v))
    r, h, dh, n = b * g, cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.dec_layers
    dt = engine.dtype
    # An SSRU layer's "keys" are its cell, one position that never grows, and it has no values.
    recurrent = [layer.ssru is not None for layer in engine.step_fn.layers]
    example = (
        torch.full((r,), 4, dtype=torch.long),
        engine.positions[t - 1].clone(),
        [torch.zeros(1 if rec else t, r, h, dh, dtype=dt) for rec in recurrent],
        [
            torch.zeros(0, dtype=dt) if rec else torch.zeros(t, r, h, dh, dtype=dt)
            for rec in recurrent
        ],
        [torch.zeros(b, h, s, dh, dtype=dt) for _ in range(n)],
        [torch.zeros(b, h, s, dh, dtype=dt) for _ in range(n)],
        torch.ones(b, 1, 1, s, dtype=torch.bool),
        out_weight,
        out_scale,
        out_bias,
    )
    rows, steps = Dim("rows", min=1, max=1 << 20), Dim("steps", min=1, max=1 << 16)
    sents, src, vocab = (
        Dim("sentences", min=1, max=1 << 16),
        Dim("source", min=1, max=1 << 16),
        Dim("vocab", min=1),
    )
    dims = {
        "tokens": {0: rows},
        "position": None,
        "keys": [{1: rows} if rec else {0: steps, 1: rows} for rec in recurrent],
        "values": [None if rec else {0: steps, 1: rows} for rec in recurrent],
        "cross_k": [{0: sents, 2: src}] * n,
        "cross_v": [{0: sents, 2: src}] * n,
        "cross_mask": {0: sents, 3: src},
        "out_weight": {0: vocab},
        "out_scale": None if out_scale is None else {0: vocab},
        "out_bias": None if out_bias is None else {0: vocab},
    }
    return example, dims
