"""Static int8 for the decoder step: PyTorch 2 export quantization with the x86 Inductor quantizer
(torchao), compiled ahead of time, against mt's int8 (a scale per input row, computed at each
product) compiled the same way. The static step's encoder runs in fp32, mt's int8 in int8.

    pip install torchao==0.18.0    # not a dependency of mt: this probe alone uses it
    python benchmarks/static_int8_probe.py --checkpoint RUN/best.pt --data ../shared/data/multi30k

The engine's fp32 step (decode/engine.py) is exported with every size free, prepared with the
quantizer's static configuration (int8 weights per output channel, int8 activations with one
scale per tensor fixed by calibration), calibrated by translating --calibrate lines of val.SRC
with it, converted, and compiled with AOTInductor (weights frozen, Inductor's int8 oneDNN
kernels). Then each step translates the first --n lines of test2016.SRC, beam 5 and greedy,
taking turns over --rounds rounds, fastest kept; BLEU against the reference beside each. Prints
only: it probes a lever before it is built.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from speed import machine  # the CPU and its flags, as every speed table names them

from mt_cli.decode import compiled
from mt_cli.decode.engine import Engine
from mt_cli.decode.translator import Translator
from mt_cli.metrics import score


def static_int8(
    engine: Engine, translator: Translator, calibration: list[str], package: Path
) -> None:
    """Quantize engine's fp32 step statically, calibrating on `calibration`, into `package`."""
    import torch._inductor
    from torchao.quantization.pt2e import allow_exported_model_train_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    example, dims = compiled._example(engine)
    with torch.no_grad():
        graph = torch.export.export(
            engine.step_fn, example, dynamic_shapes=dims, strict=False
        ).module()
        quantizer = X86InductorQuantizer().set_global(
            get_default_x86_inductor_quantization_config(is_dynamic=False)
        )
        prepared = prepare_pt2e(graph, quantizer)
        allow_exported_model_train_eval(prepared)  # search puts its model in eval mode
        n = engine.cfg.dec_layers

        def observed(
            flat: list,
        ) -> torch.Tensor:  # the engine's flat inputs, as the prepared graph takes them
            rest = flat[2 + 4 * n :]
            layers = [flat[2 + i * n : 2 + (i + 1) * n] for i in range(4)]
            return prepared(
                flat[0], flat[1], *layers, rest[0], rest[1], rest[2] if len(rest) > 2 else None
            )

        engine.compiled = observed  # the observers see real decoding's activations
        translator.translate(calibration)
        engine.compiled = None
        quantized = convert_pt2e(prepared)
        program = torch.export.export(quantized, example, dynamic_shapes=dims, strict=False)
        torch._inductor.aoti_compile_and_package(
            program, package_path=str(package), inductor_configs={"freezing": True}
        )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--src", default="de")
    p.add_argument("--tgt", default="en")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--calibrate", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    lines = (args.data / f"test2016.{args.src}").read_text(encoding="utf-8").splitlines()[: args.n]
    refs = (args.data / f"test2016.{args.tgt}").read_text(encoding="utf-8").splitlines()[: args.n]
    calibration = (
        (args.data / f"val.{args.src}").read_text(encoding="utf-8").splitlines()[: args.calibrate]
    )
    fp32 = Translator.load(args.checkpoint, "cpu", engine="step")
    per_row = Translator.load(args.checkpoint, "cpu", precision="int8", engine="compiled")
    variants = {"int8, a scale per input row (mt's), compiled": per_row}
    with tempfile.TemporaryDirectory() as tmp:
        package = Path(tmp) / "static.pt2"
        start = time.perf_counter()
        static_int8(fp32.engine, fp32, calibration, package)
        print(f"static int8: calibrated and compiled in {time.perf_counter() - start:.0f} s")
        static = Translator.load(args.checkpoint, "cpu", engine="step")
        static.engine.compiled = compiled.load(package)
        variants[
            "int8 static (x86 Inductor quantizer, one calibrated scale per tensor), compiled"
        ] = static
        best: dict[tuple[str, int], float] = {}
        bleu: dict[tuple[str, int], float] = {}
        for beam in (5, 1):
            runs = {name: tr.with_options(beam=beam) for name, tr in variants.items()}
            for _ in range(args.rounds):
                for name, tr in runs.items():
                    start = time.perf_counter()
                    out = tr.translate(lines)
                    speed = len(lines) / (time.perf_counter() - start)
                    best[name, beam] = max(best.get((name, beam), 0.0), speed)
                    bleu[name, beam] = score(out, [refs], ("bleu",))["bleu"]
    print(
        f"\n{args.checkpoint}, the first {len(lines)} lines of test2016.{args.src}; {machine()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}\n"
    )
    print("| int8 step | beam 5 sent/s | BLEU | greedy sent/s | BLEU |\n|---|---|---|---|---|")
    for name in variants:
        print(
            f"| {name} | {best[name, 5]:.1f} | {bleu[name, 5]:.2f} | {best[name, 1]:.1f} | "
            f"{bleu[name, 1]:.2f} |"
        )


if __name__ == "__main__":
    main()
