"""The decoding engine: a Transformer's decoder step, rebuilt once for decoding only.

Search asks the model for one position at a time. The model's own `decode` (model/transformer.py)
reads like the paper and serves training too; the engine computes the same step from the same
weights, prepared once when a Translator loads, with what decoding alone allows:

- q, k and v of self-attention as one product, and k and v of cross-attention as one, over
  weights concatenated once;
- weights in the arithmetic the step runs in, cast once: fp32; bf16 (weights and activations,
  scores and log-probabilities in fp32; autocast instead re-cast every weight at every product);
  int8 (int8 products with each row of the input scaled on its own, so that a batch decodes as
  its sentences do one by one; fp32 between them; the output layer in bf16 where the CPU has bf16
  arithmetic);
- self-attention keys/values in time-major buffers allocated once per batch, each step written
  in place and read without a copy, beams gathered into a second set of buffers that then swap.

The model's own decode stays the reference (decode.engine eager): the tests hold the engine to
it, search by search and control by control. decode.engine auto runs the engine where it measured
faster (bf16: greedy 1.25x autocast) and the model's decode where it did not (fp32, int8:
`benchmarks/levers.py`); `benchmarks/decode_profile.py` shows where a step's time goes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn

from mt_cli.data.tokenizer import PAD
from mt_cli.decode.precision import quantize_rows
from mt_cli.device import autocast, cpu_has_bf16
from mt_cli.model.decoder_cache import DecoderCache, keep_sentences
from mt_cli.model.transformer import DecoderLayer, Transformer, attention, key_mask


def fused(*layers: nn.Linear) -> nn.Linear:
    """One linear layer computing several side by side: x -> [x W1^T + b1, x W2^T + b2, ...]."""
    out = nn.Linear(layers[0].in_features, sum(layer.out_features for layer in layers))
    out.weight.data = torch.cat([layer.weight.detach() for layer in layers])
    out.bias.data = torch.cat([layer.weight.new_zeros(layer.out_features) if layer.bias is None else layer.bias.detach()
                               for layer in layers])  # fmt: skip
    return out.requires_grad_(False)


class StepLayer(nn.Module):
    """One decoder layer's weights as the step uses them (shared with the model where not changed)."""

    def __init__(self, layer: DecoderLayer, own: Callable[[nn.Module], nn.Module]) -> None:
        """`own`: how the step holds a module it takes as it is (a copy where it will be cast)."""
        super().__init__()
        sa, ca = layer.self_attn, layer.cross_attn
        self.n_heads = sa.n_heads
        self.qkv = fused(sa.q_proj, sa.k_proj, sa.v_proj)
        self.self_out = own(sa.out_proj)
        self.cross_q = own(ca.q_proj)
        self.cross_kv = fused(ca.k_proj, ca.v_proj)
        self.cross_out = own(ca.out_proj)
        self.fc1, self.fc2 = own(layer.feed_forward.fc1), own(layer.feed_forward.fc2)
        self.act = layer.feed_forward.act
        self.norms = nn.ModuleList(own(s.norm) for s in (layer.self_sublayer, layer.cross_sublayer, layer.ffn_sublayer))
        self.pre_norm = layer.self_sublayer.pre_norm

    def forward(self, x: Tensor, cache: StepCache, i: int) -> Tensor:
        """x (R, D): the layer's output at the new position, its keys/values written into the cache."""
        x = self._sublayer(0, x, lambda h: self._self_attention(h, cache, i))
        x = self._sublayer(1, x, lambda h: self._cross_attention(h, cache, i))
        return self._sublayer(2, x, lambda h: self.fc2(self.act(self.fc1(h))))

    def _sublayer(self, n: int, x: Tensor, f: Callable[[Tensor], Tensor]) -> Tensor:
        norm = self.norms[n]
        return x + f(norm(x)) if self.pre_norm else norm(x + f(x))

    def _self_attention(self, h: Tensor, cache: StepCache, i: int) -> Tensor:
        r, d = h.shape
        q, k, v = self.qkv(h).view(r, 3, self.n_heads, d // self.n_heads).unbind(1)  # (R, H, D/H) each
        keys, values = cache.write(i, k, v)  # (R, H, T, D/H): every position so far, this one included
        out = attention(q[:, :, None], keys, values, None, False, 0.0)  # (R, H, 1, D/H)
        return self.self_out(out.reshape(r, d))

    def _cross_attention(self, h: Tensor, cache: StepCache, i: int) -> Tensor:
        r, d = h.shape
        keys, values = cache.cross_k[i], cache.cross_v[i]  # (B, H, S, D/H)
        b = keys.size(0)
        # The G = R/B beams of one sentence are G queries against its keys: (R, D) -> (B, H, G, D/H).
        q = self.cross_q(h).view(b, r // b, self.n_heads, d // self.n_heads).transpose(1, 2)
        out = attention(q, keys, values, cache.cross_mask, False, 0.0)
        return self.cross_out(out.transpose(1, 2).reshape(r, d))

    def cross_keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """memory (B, S, D) -> keys and values (B, H, S, D/H) each."""
        b, s, d = memory.shape
        kv = self.cross_kv(memory).view(b, s, 2, self.n_heads, d // self.n_heads)
        # Contiguous, once per batch: attention read the interleaved view by copying it at every step.
        return kv[:, :, 0].transpose(1, 2).contiguous(), kv[:, :, 1].transpose(1, 2).contiguous()


class StepCache:
    """The engine's decoder state: what search's `reorder` contract asks of any cache.

    Self-attention keys/values per layer in time-major buffers (capacity, R, H, D/H) allocated
    once per batch, the first `length` positions of the first `rows` rows in use; a reorder
    gathers them into a second set of buffers and the two swap (a fresh buffer per step was
    a cold allocation each time). Cross-attention keys/values (B, H, S, D/H), one row per
    running sentence."""

    def __init__(self, self_k: list[Tensor], self_v: list[Tensor], cross_k: list[Tensor], cross_v: list[Tensor],
                 cross_mask: Tensor | None, output: tuple[Tensor, Tensor | None]) -> None:  # fmt: skip
        self.self_k, self.self_v = self_k, self_v
        self.spare_k, self.spare_v = [torch.empty_like(x) for x in self_k], [torch.empty_like(x) for x in self_v]
        self.cross_k, self.cross_v, self.cross_mask = cross_k, cross_v, cross_mask  # mask (B, 1, 1, S), True = real
        self.output = output  # the output layer's weight (V or V_s, D) and bias
        self.length = 0
        self.rows = self_k[0].size(1)

    def write(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k, v (R, H, D/H) of the new position -> layer i's keys and values (R, H, T, D/H) so far."""
        t, n = self.length, self.rows
        if t >= self.self_k[i].size(0):
            self._grow(i)
        self.self_k[i][t, :n] = k
        self.self_v[i][t, :n] = v
        # (T, R, H, D/H) -> (R, H, T, D/H), a strided view: attention reads it in place.
        return self.self_k[i][: t + 1, :n].permute(1, 2, 0, 3), self.self_v[i][: t + 1, :n].permute(1, 2, 0, 3)

    def _grow(self, i: int) -> None:
        """Room for twice as many steps in layer i's buffers."""
        for store in (self.self_k, self.self_v, self.spare_k, self.spare_v):
            old = store[i]
            store[i] = old.new_empty((2 * old.size(0), *old.shape[1:]))
            store[i][: old.size(0)] = old

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep decoder rows `rows` (surviving beams, in their new order) and, when some sentences
        finished, the source rows of the `sentences` that go on (None: all)."""
        t, n, m = self.length, self.rows, rows.numel()
        for main, spare in ((self.self_k, self.spare_k), (self.self_v, self.spare_v)):
            for i in range(len(main)):
                torch.index_select(main[i][:t, :n], 1, rows, out=spare[i][:t, :m])
                main[i], spare[i] = spare[i], main[i]
        self.rows = m
        if sentences is not None:
            self.cross_mask = keep_sentences(self.cross_k, self.cross_v, self.cross_mask, sentences)


PRECISIONS = ("fp32", "bf16", "int8")


class Engine(nn.Module):
    """A Transformer for search (the `Searchable` contract): its encoder, and the decoder step
    above in `precision` (fp32, bf16 or int8). The model is kept for what is not one step at a
    time (a whole target at once, as forced scoring asks), which it decodes itself."""

    def __init__(self, model: Transformer, precision: str = "fp32") -> None:
        super().__init__()
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
        dec = model.decoder
        self.model, self.cfg, self.start_token, self.precision = model, model.cfg, model.start_token, precision
        self.dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        own = _same if precision == "fp32" else _copy  # fp32 shares the model's unchanged modules
        self.layers = nn.ModuleList(StepLayer(layer, own) for layer in cast("list[DecoderLayer]", dec.layers))
        self.final_norm = own(dec.final_norm) if dec.final_norm is not None else None
        self.embed = dec.embeddings.token.weight.detach().to(self.dtype)
        self.embed_scale = dec.embeddings.scale
        self.positions = dec.embeddings.positions.to(self.dtype)
        # The output layer as decode/precision.py runs it for int8: bf16 where the CPU has bf16 arithmetic.
        out_bf16 = precision == "bf16" or (precision == "int8" and cpu_has_bf16())
        self.out_dtype = torch.bfloat16 if out_bf16 else torch.float32
        proj = model.output_projection
        weight, bias = model.float_output() if model.float_output is not None else (proj.weight, proj.bias)
        self.out_weight = weight.detach().to(self.out_dtype)
        self.out_bias = None if bias is None else bias.detach().to(self.out_dtype)
        if precision == "int8":
            quantize_rows(self.layers)
        else:
            self.layers.to(self.dtype)
            if self.final_norm is not None:
                self.final_norm.to(self.dtype)
        self.eval()

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        with autocast(self.precision == "bf16", src.device):  # once per batch: autocast costs little here
            return self.model.encode(src, src_mask)

    def new_cache(self, memory: Tensor, src_mask: Tensor, rows: int, vocab: Tensor | None) -> StepCache:
        memory = memory.to(self.dtype)
        cross = [layer.cross_keys_values(memory) for layer in cast("list[StepLayer]", self.layers)]
        h, dh = self.cfg.n_heads, self.cfg.d_model // self.cfg.n_heads
        empty = [memory.new_empty((16, rows, h, dh)) for _ in range(2 * len(cross))]
        if vocab is None:
            output = (self.out_weight, self.out_bias)
        else:
            output = (self.out_weight.index_select(0, vocab), None if self.out_bias is None else self.out_bias[vocab])
        return StepCache(empty[0::2], empty[1::2], [k for k, _ in cross], [v for _, v in cross], key_mask(src_mask),
                         output)  # fmt: skip

    def decode(
        self, tgt: Tensor, memory: Tensor | None, src_mask: Tensor | None,
        cache: StepCache | DecoderCache | None = None, vocab: Tensor | None = None,
    ) -> tuple[Tensor, StepCache | DecoderCache]:  # fmt: skip
        """The model's decode, one position at a time: tgt (R, 1) -> float logits (R, 1, V or V_s)."""
        if isinstance(cache, DecoderCache) or (cache is None and tgt.size(1) > 1):
            return self.model.decode(tgt, memory, src_mask, cache, vocab)  # several positions at once
        if cache is None:
            if memory is None or src_mask is None:
                raise ValueError("decode needs memory and src_mask when it has no cache")
            cache = self.new_cache(memory, src_mask, tgt.size(0), vocab)
        return self.step(tgt[:, 0], cache)[:, None], cache

    def step(self, tokens: Tensor, cache: StepCache) -> Tensor:
        """tokens (R,) at position cache.length -> logits (R, V) in fp32; the cache moves one step on."""
        x = self.embed[tokens].masked_fill((tokens == PAD)[:, None], 0.0)  # PAD, the start, embeds as zeros
        x = x * self.embed_scale + self.positions[cache.length]  # (R, D)
        for i, layer in enumerate(self.layers):
            x = layer(x, cache, i)
        if self.final_norm is not None:
            x = self.final_norm(x)
        cache.length += 1
        return torch.nn.functional.linear(x.to(self.out_dtype), *cache.output).float()


def _copy(module: nn.Module) -> nn.Module:
    """A module of its own, so that casting or quantizing the engine leaves the model as it was."""
    return copy.deepcopy(module).requires_grad_(False)


def _same(module: nn.Module) -> nn.Module:
    return module
