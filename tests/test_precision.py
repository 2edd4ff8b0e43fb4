"""int8 products: weights packed once for oneDNN give the int32 sums torch._int_mm gives, and the
engine translates the same whichever of the two multiplies."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_config
from mt_cli.decode import precision
from mt_cli.decode.engine import Engine
from mt_cli.decode.precision import Packed, quantize
from mt_cli.model.transformer import build_model

# Without VNNI (AVX2, or AVX-512 before it), oneDNN's int8 kernels add pairs of int8 products in
# int16 with saturation (vpmaddubsw): not the exact sums these tests compare. mt packs weights only
# on CPUs with AMX (precision.packs_weights), which all have VNNI.
needs_onednn = pytest.mark.skipif(
    not torch.backends.mkldnn.is_available() or not torch.cpu._is_vnni_supported(),
    reason="oneDNN's exact int8 products need VNNI (or PyTorch was built without oneDNN)",
)


@needs_onednn
@pytest.mark.parametrize("rows", [1, 2, 7, 64])  # one row takes its own way through (see Packed)
def test_packed_weights_give_the_exact_sums_of_int_mm_times_the_weight_scale(rows):
    torch.manual_seed(0)
    q, scale = quantize(torch.randn(48, 32))  # (out, in)
    x = torch.randint(-127, 128, (rows, 32), dtype=torch.int8)
    want = (x.int() @ q.int().t()).float() * scale  # exact: int32 sums of int8 products
    assert torch.equal(Packed(q)(x, scale), want)


@needs_onednn
def test_the_int8_engine_steps_alike_with_packed_and_plain_weights(tokenizer, monkeypatch):
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer)).eval()
    src = torch.randint(4, tokenizer.src_vocab_size, (3, 7))
    src_mask = torch.ones_like(src, dtype=torch.bool)[:, None, None, :]
    tgt = torch.randint(4, tokenizer.tgt_vocab_size, (6, 4))

    def logits(packed: bool) -> torch.Tensor:
        monkeypatch.setattr(precision, "packs_weights", lambda: packed)
        engine = Engine(model, "int8")
        with torch.inference_mode():
            memory = engine.encode(src, src_mask)
            out, cache = engine.decode(tgt[:, :1], memory, src_mask)
            steps = [out] + [
                engine.decode(tgt[:, t : t + 1], None, None, cache)[0] for t in range(1, 4)
            ]
        return torch.cat(steps, dim=1)

    plain, packed = logits(False), logits(True)
    # The same int32 sums, scaled in another order: equal to float rounding.
    torch.testing.assert_close(packed, plain, rtol=1e-5, atol=1e-5)
