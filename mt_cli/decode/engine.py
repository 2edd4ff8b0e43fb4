"""The decoding engine: the one cached decoder, a Transformer's decoder step rebuilt once for
decoding.

Search asks for one position at a time. The model (model/transformer.py) reads like the paper and
decodes a whole target at once, as training, forced scoring and alignment read it; the engine
computes each next position from the same weights, prepared once when a model loads for
decoding, with what decoding alone allows:

- q, k and v of self-attention as one product, and k and v of cross-attention as one, over
  weights concatenated once;
- weights in the arithmetic the step runs in, cast once: fp32; bf16 (weights and activations,
  scores and log-probabilities in fp32; autocast instead re-cast every weight at every product);
  int8 (int8 products with each row of the input scaled on its own, so that a batch decodes as
  its sentences do one by one, the output layer's too; fp32 between them, and in the softmax);
- self-attention keys/values in time-major buffers allocated once per batch, each step written
  in place and read without a copy, beams gathered into a second set of buffers that then swap;
- the step itself (`Step`) a pure function of tensors, so that decode/compiled.py can compile it
  ahead of time with every size free; eager and compiled, the engine runs that one function.

The model's teacher-forced decode is the reference: the tests hold the engine to it, step by
step, search by search and control by control. decode/plan.py decides once per loaded model
which precision runs and whether the step is compiled; `benchmarks/levers.py` measures each
choice and `benchmarks/decode_profile.py` shows where a step's time goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn

from mt_cli.data.tokenizer import PAD
from mt_cli.decode.precision import (
    Int8Linear,
    Packed,
    int8_linear,
    is_quantized,
    quantize_rows,
)
from mt_cli.decode.step_cache import StepCache
from mt_cli.decode.step_layer import StepLayer, copied, shared
from mt_cli.device import autocast
from mt_cli.model.layers import DecoderLayer
from mt_cli.model.transformer import Transformer, key_mask

PRECISIONS = ("fp32", "bf16", "int8")


class Step(nn.Module):
    """One decoder step as a pure function of tensors, the same eager and compiled
    (decode/compiled.py): the weights it holds are the decoder's, fused and cast (shared with the
    model where unchanged)."""

    embed: Tensor

    def __init__(self, model: Transformer, precision: str) -> None:
        super().__init__()
        dec = model.decoder
        self.dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        # fp32 shares the model's unchanged modules, and so does int8 where the model's layers are
        # int8 already (a Translator's model, quantized as it loaded); else a copy to cast.
        own = (
            shared if precision == "fp32" or (precision == "int8" and is_quantized(dec)) else copied
        )
        self.layers = nn.ModuleList(
            StepLayer(layer, own) for layer in cast("list[DecoderLayer]", dec.layers)
        )
        self.final_norm = own(dec.final_norm) if dec.final_norm is not None else None
        self.register_buffer(
            "embed", dec.embeddings.token.weight.detach().to(self.dtype), persistent=False
        )
        self.embed_scale = dec.embeddings.scale
        self.int8 = precision == "int8"
        if self.int8:
            quantize_rows(self.layers)  # those that are not int8 yet
        else:
            self.layers.to(self.dtype)
            if self.final_norm is not None:
                self.final_norm.to(self.dtype)

    def forward(
        self,
        tokens: Tensor,
        position: Tensor,
        keys: list[Tensor],
        values: list[Tensor],
        cross_k: list[Tensor],
        cross_v: list[Tensor],
        cross_mask: Tensor | None,
        out_weight: Tensor,
        out_scale: Tensor | None,
        out_bias: Tensor | None,
        out_packed: Packed | None = None,
        self_mask: Tensor | None = None,
    ) -> Tensor:
        """tokens (R,) and their position's sinusoid (D,) -> logits (R, V) in fp32; each layer's
        keys and values (T+1, R, H, D/H) get this position's at T (StepCache.next_step). The output
        layer (V, D), its rows cut to a shortlist where one is used: float, or int8 with a scale per
        row (`out_scale`), given packed for oneDNN as `out_packed` where that is faster (eager
        only). Rows that began at different steps (decode/running_batch.py, eager only): each its
        own position's sinusoid (R, D), and `self_mask` (R, 1, 1, T+1) the positions it has."""
        # PAD, the start, embeds as zeros
        x = self.embed[tokens].masked_fill((tokens == PAD)[:, None], 0.0)
        x = x * self.embed_scale + position  # (R, D)
        for i, layer in enumerate(self.layers):
            x = layer(x, keys[i], values[i], cross_k[i], cross_v[i], cross_mask, self_mask)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if out_scale is not None:
            return int8_linear(x, out_weight.t(), out_scale, out_bias, out_packed)
        return torch.nn.functional.linear(x, out_weight, out_bias).float()


class Output:
    """The output layer as the step takes it: a weight (V, D) in the step's arithmetic (int8 with
    a scale per row), its bias, and the rows of a batch's shortlist, cut once per batch."""

    def __init__(self, model: Transformer, precision: str) -> None:
        proj = model.output_projection
        self.scale: Tensor | None = None
        self.bias: Tensor | None = None if proj.bias is None else proj.bias.detach()
        # int8: the model's own layer (int8 already: shared), or one of the same kind, rows first.
        self.int8 = (
            proj
            if isinstance(proj, Int8Linear)
            else Int8Linear(proj, True)
            if precision == "int8"
            else None
        )
        if self.int8 is not None:
            self.weight: Tensor = self.int8.weight_t.t()
            self.scale = self.int8.scale
        else:
            self.weight = proj.weight.detach().to(
                torch.bfloat16 if precision == "bf16" else torch.float32
            )
            self.bias = None if self.bias is None else self.bias.to(self.weight.dtype)

    def packed(self, weight: Tensor) -> Packed | None:
        """The int8 layer's weight packed for oneDNN (Int8Linear.packed) where `weight` is the whole
        of it; None for a shortlist's rows, which change with every batch."""
        return self.int8.packed() if self.int8 is not None and weight is self.weight else None

    def rows(self, vocab: Tensor | None) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """(weight, scale, bias) at target ids `vocab` (None: all)."""
        if vocab is None:
            return self.weight, self.scale, self.bias
        scale, bias = (
            None if t is None else t.index_select(0, vocab) for t in (self.scale, self.bias)
        )
        return self.weight.index_select(0, vocab), scale, bias


class Engine(nn.Module):
    """A Transformer for search (the `Searchable` contract): its encoder, and the decoder step
    above in `precision` (fp32, bf16 or int8), run op by op or, given `compiled`, as compiled
    ahead of time for this CPU. The model is kept for its encoder (in whatever arithmetic the
    model's own layers are: the Translator quantizes them for int8) and is not changed."""

    def __init__(
        self,
        model: Transformer,
        precision: str = "fp32",
        compiled: Callable[[list[Tensor]], Tensor] | None = None,
    ) -> None:
        super().__init__()
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
        self.model, self.cfg, self.start_token, self.precision = (
            model,
            model.cfg,
            model.start_token,
            precision,
        )
        self.step_fn = Step(model, precision)
        # the step compiled (decode/compiled.py); it takes the step's inputs as a flat list
        self.compiled = compiled
        self.dtype = self.step_fn.dtype
        self.positions = model.decoder.embeddings.positions.to(self.dtype)
        self.output = Output(model, precision)
        self.eval()

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        # once per batch: autocast costs little here
        with autocast(self.precision == "bf16", src.device):
            return self.model.encode(src, src_mask)

    def new_cache(
        self,
        memory: Tensor,
        src_mask: Tensor,
        rows: int,
        vocab: Tensor | None,
        kind: type[StepCache] = StepCache,
    ) -> StepCache:
        """A cache of `kind` for `rows` rows of the sentences in memory (B, S, D)."""
        memory = memory.to(self.dtype)
        cross = [
            layer.cross_keys_values(memory)
            for layer in cast("list[StepLayer]", self.step_fn.layers)
        ]
        output = self.output.rows(vocab)
        mask = key_mask(src_mask)
        # the compiled step takes a mask always, and so does a running batch, whose sources grow
        if mask is None and (self.compiled is not None or kind is not StepCache):
            mask = src_mask[:, None, None, :]
        recurrent = [
            layer.ssru is not None for layer in cast("list[StepLayer]", self.step_fn.layers)
        ]
        keys, values = [k for k, _ in cross], [v for _, v in cross]
        return kind(len(cross), rows, self.cfg.n_heads, keys, values, mask, output, recurrent)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        src_mask: Tensor | None,
        cache: StepCache | None = None,
        vocab: Tensor | None = None,
    ) -> tuple[Tensor, StepCache]:
        """The next positions: tgt (R, T) continuing `cache` (None: from position 0, a cache built
        from memory (B, S, D) with R/B rows per sentence) -> float logits (R, T, V or V_s) and the
        cache one step on. Several positions (a decoder start of more than one token) are stepped
        through in turn. `vocab` (V_s,), read when the cache is built: a shortlist's target ids."""
        if cache is None:
            if memory is None or src_mask is None:
                raise ValueError("decode needs memory and src_mask when it has no cache")
            cache = self.new_cache(memory, src_mask, tgt.size(0), vocab)
        if tgt.size(1) == 1:  # the usual case: a view, no copy of the (R, V) logits
            return self.step(tgt[:, 0], cache)[:, None], cache
        return torch.stack([self.step(tgt[:, t], cache) for t in range(tgt.size(1))], dim=1), cache

    def step(self, tokens: Tensor, cache: StepCache) -> Tensor:
        """tokens (R,) at position cache.length -> logits (R, V) in fp32; the cache moves one step
        on."""
        keys, values = cache.next_step()
        position = self.positions[cache.length]
        if self.compiled is None:
            logits = self.step_fn(
                tokens,
                position,
                keys,
                values,
                cache.cross_k,
                cache.cross_v,
                cache.cross_mask,
                *cache.output,
                self.output.packed(cache.output[0]),
            )
        else:  # the same inputs, flat, each contiguous as the compiled code assumes
            flat = [
                tokens.contiguous(),
                position,
                *keys,
                *values,
                *cache.cross_k,
                *cache.cross_v,
                cast(Tensor, cache.cross_mask),  # never None with a compiled step (new_cache)
                *(t for t in cache.output if t is not None),
            ]
            logits = self.compiled(flat)
        cache.length += 1
        return logits
