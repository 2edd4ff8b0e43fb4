"""What torch.compile could give the decoder step: one step of a checkpoint's decoder as a pure
function (no cache object, no Python between layers), eager and compiled, timed at fixed shapes.

    python benchmarks/compile_probe.py --checkpoint RUN/best.pt [--beam 5] [--steps 20]

A batch of 64 sentences (x beam rows) of 16 source tokens decodes --steps steps with every row
fed its argmax, over a shortlist of 1,500 target pieces, without reorders: the step alone. Rows:
the model's own decode (the reference), the same step as a pure function (fused q/k/v), that
function under torch.compile (inductor, dynamic shapes, frozen weights; the compile time is
printed: a user's process would pay it unless the compiled step were cached), and both in bf16
weights. Each timed 5 times after one untimed pass, fastest kept. Prints only: it probes a lever
before it is built.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from speed import machine  # the CPU and its flags, as every speed table names them
from torch import Tensor, nn

from mt_cli.data.tokenizer import EOS, PAD
from mt_cli.decode.engine import fused
from mt_cli.model import checkpoint
from mt_cli.model.transformer import Transformer


class PureStep(nn.Module):
    """One decoder step: tokens (R,) and the position's sinusoid (D,) -> logits (R, V_s); the new
    keys/values are written into the last position of the given (T+1, R, H, D/H) buffers."""

    def __init__(self, model: Transformer, dtype: torch.dtype) -> None:
        super().__init__()
        dec = copy.deepcopy(model.decoder)  # its own modules: casting them leaves the model as it was
        self.token = dec.embeddings.token.weight.detach().to(dtype)
        self.scale, self.h = dec.embeddings.scale, model.cfg.n_heads
        layers = nn.ModuleList()
        for lay in dec.layers:
            sa, ca = lay.self_attn, lay.cross_attn
            layers.append(nn.ModuleDict(dict(
                qkv=fused(sa.q_proj, sa.k_proj, sa.v_proj), so=sa.out_proj, cq=ca.q_proj, co=ca.out_proj,
                fc1=lay.feed_forward.fc1, fc2=lay.feed_forward.fc2, n1=lay.self_sublayer.norm,
                n2=lay.cross_sublayer.norm, n3=lay.ffn_sublayer.norm)))  # fmt: skip
        self.layers = layers.to(dtype)

    def forward(self, tokens: Tensor, pos: Tensor, keys: list[Tensor], values: list[Tensor], cross_k: list[Tensor],
                cross_v: list[Tensor], out_w: Tensor) -> Tensor:  # fmt: skip
        r, h = tokens.size(0), self.h
        x = self.token[tokens].masked_fill((tokens == PAD)[:, None], 0.0) * self.scale + pos.to(self.token.dtype)
        for i, m in enumerate(self.layers):
            d = x.size(-1)
            q, k, v = m["qkv"](x).view(r, 3, h, d // h).unbind(1)
            keys[i][-1], values[i][-1] = k, v
            a = F.scaled_dot_product_attention(
                q[:, :, None], keys[i].permute(1, 2, 0, 3), values[i].permute(1, 2, 0, 3)
            )
            x = m["n1"](x + m["so"](a.reshape(r, d)))
            b = cross_k[i].size(0)
            cq = m["cq"](x).view(b, r // b, h, d // h).transpose(1, 2)
            a = F.scaled_dot_product_attention(cq, cross_k[i], cross_v[i])
            x = m["n2"](x + m["co"](a.transpose(1, 2).reshape(r, d)))
            x = m["n3"](x + m["fc2"](F.relu(m["fc1"](x))))
        return F.linear(x, out_w).float()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    model = checkpoint.load(args.checkpoint).build_model(torch.device("cpu")).eval()
    cfg, sentences, steps = model.cfg, 64, args.steps
    rows = sentences * args.beam
    src = torch.randint(4, cfg.src_vocab_size, (sentences, 16), generator=torch.Generator().manual_seed(0))
    src[:, -1] = EOS
    vocab = torch.arange(1500)
    with torch.inference_mode():
        mask = src != PAD
        memory = model.encode(src, mask)
        base = model.new_cache(memory, mask, vocab=vocab)

    def reference() -> None:
        cache, tokens = model.new_cache(memory, mask, vocab=vocab), torch.zeros(rows, 1, dtype=torch.long)
        for _ in range(steps):
            logits, cache = model.decode(tokens, None, None, cache)
            tokens = logits[:, -1].argmax(-1, keepdim=True).clamp(min=4)

    def pure(step: Callable, dtype: torch.dtype) -> Callable[[], None]:
        h, dh, n = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.dec_layers
        ck, cv = [c.to(dtype) for c in base.cross_k], [c.to(dtype) for c in base.cross_v]
        out_w = base.output[0].to(dtype)

        def run() -> None:
            kb = [torch.empty(steps, rows, h, dh, dtype=dtype) for _ in range(n)]
            vb = [torch.empty(steps, rows, h, dh, dtype=dtype) for _ in range(n)]
            tokens = torch.zeros(rows, dtype=torch.long)
            for t in range(steps):
                logits = step(tokens, model.decoder.embeddings.positions[t], [b[: t + 1] for b in kb],
                              [b[: t + 1] for b in vb], ck, cv, out_w)  # fmt: skip
                tokens = logits.argmax(-1).clamp(min=4)

        return run

    import torch._inductor.config as inductor

    inductor.freezing = True  # weights as constants: prepacked for the CPU's kernels
    variants: dict[str, Callable[[], None]] = {"the model's own decode": reference}
    for name, dtype in (("fp32", torch.float32), ("bf16 weights", torch.bfloat16)):
        step = PureStep(model, dtype)
        variants[f"pure step, {name}"] = pure(step, dtype)
        variants[f"pure step, {name}, torch.compile"] = pure(torch.compile(step, dynamic=True, fullgraph=True), dtype)
    print(f"{args.checkpoint}: {rows} rows ({sentences} sentences x beam {args.beam}), {steps} steps; {machine()}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}\n")  # fmt: skip
    print("| step | ms per step | first pass (s; compiling where compiled) |\n|---|---|---|")
    with torch.inference_mode():
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            first = time.perf_counter() - start
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                run()
                best = min(best, time.perf_counter() - start)
            print(f"| {name} | {1000 * best / steps:.2f} | {first:.1f} |")


if __name__ == "__main__":
    main()
