"""Marian's binary model format (`model.bin`, `*.intgemm.alphas.bin`): its items, read directly.

The layout (marian-dev src/common/binary.cpp; Bergamot's fork writes the same):

    uint64 version (1), uint64 n
    n headers of 4 x uint64: name length (with its NUL), type, shape length, data length
    n names (NUL-terminated), then n shapes (int32 each)
    uint64 pad, then pad bytes (the data starts on a 256-byte boundary)
    n data blocks, each `data length` bytes (padded to 256 bytes by the writer)

A type is a size in bytes plus class bits: float32 is 0x404, float16 0x402. Bergamot's int8
students store their matrices as intgemm8 (0x4101, the class intgemm 0x4000 + signed 0x100 + 1
byte), architecture-agnostic: the int8 values of the matrix transposed (shape (in, out) is stored
as out rows of `in` values), then one float32, the quantization multiplier q: a weight is
int8 / q. Embeddings (`Wemb`) are stored in their own order, rows first. Each int8 matrix `X` may
have an item `X_QuantMultA`: the fixed multiplier its input is quantized with (the "alphas" of
`gemm-precision: int8shiftAlphaAll`). `special:model.yml` is the training config as text.

Marian's float models (`model.npz`, what `marian` writes while training) hold the same items as
a numpy archive: float32 (or float16) arrays of the same names and shapes, and
`special:model.yml` as an int8 array of the text's bytes. `read_model` reads either.
"""

from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import yaml

from mt_cli.errors import MtError

VERSION = 1
# INT8: text (the yml)
FLOAT32, FLOAT16, INT8, INTGEMM8, INTGEMM16 = (
    0x404,
    0x402,
    0x101,
    0x4101,
    0x4102,
)
_NUMPY = {FLOAT32: np.float32, FLOAT16: np.float16, INTGEMM8: np.int8, INTGEMM16: np.int16}
_NAMES = {FLOAT32: "float32", FLOAT16: "float16", INTGEMM8: "intgemm8", INTGEMM16: "intgemm16"}


@dataclass(frozen=True)
class Item:
    """One named array of the file: its shape, Marian type and raw bytes (padding included)."""

    name: str
    shape: tuple[int, ...]
    type: int
    data: bytes

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def read_model(path: Path) -> dict[str, Item]:
    """Every item of Marian's model at `path`: a binary model (.bin) or a numpy archive (.npz)."""
    return read_npz(path) if path.suffix == ".npz" else read_items(path)


def read_npz(path: Path) -> dict[str, Item]:
    """The items of a Marian `.npz` model, as a binary model's; one clear MtError for a file that is
    not a numpy archive of arrays or holds an array type mt does not read."""
    kinds = {np.dtype(np.float32): FLOAT32, np.dtype(np.float16): FLOAT16, np.dtype(np.int8): INT8}
    items = {}
    try:
        with np.load(path, allow_pickle=False) as archive:  # never unpickles: arrays only
            for name in archive.files:
                array = archive[name]
                kind = kinds.get(array.dtype)
                if kind is None or (kind == INT8 and name != "special:model.yml"):
                    raise MtError(
                        f"{path}: array {name} is {array.dtype}; "
                        "mt reads float32 and float16 models"
                    )
                items[name] = Item(
                    name, tuple(array.shape), kind, np.ascontiguousarray(array).tobytes()
                )
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise MtError(
            f"{path}: not a readable Marian .npz model ({reason}); copy or download it again"
        ) from None
    return items


def read_items(path: Path) -> dict[str, Item]:
    """Every item of the binary model at `path`, by name; one clear MtError for a file that is not
    one, is cut short, or holds a type mt does not read."""
    buf = path.read_bytes()
    reader = _Reader(buf, path)
    version, count = reader.take("<QQ")
    if version != VERSION:
        raise MtError(
            f"{path}: not a Marian binary model (it starts with version {version}, not {VERSION})"
        )
    if count > len(buf) // 32:  # each header alone takes 32 bytes
        raise MtError(
            f"{path}: not a Marian binary model (it claims {count:,} items in {len(buf):,} bytes)"
        )
    headers = [reader.take("<QQQQ") for _ in range(count)]
    names = [reader.raw(name_len)[:-1].decode("utf-8", "replace") for name_len, _, _, _ in headers]
    shapes = [reader.take(f"<{shape_len}i") for _, _, shape_len, _ in headers]
    (pad,) = reader.take("<Q")
    reader.raw(pad)
    items = {}
    for name, (_, kind, _, size), shape in zip(names, headers, shapes):
        items[name] = Item(name, tuple(shape), kind, reader.raw(size, name))
    return items


def model_config(items: dict[str, Item], path: Path) -> dict:
    """The training options the file carries (`special:model.yml`), as a dict."""
    item = items.get("special:model.yml")
    if item is None:
        raise MtError(
            f"{path}: no special:model.yml item: mt needs the model's own config to rebuild it"
        )
    text = item.data.split(b"\0", 1)[0].decode("utf-8")
    config = yaml.safe_load(text)
    if not isinstance(config, dict):
        raise MtError(f"{path}: special:model.yml is not a mapping of options")
    return config


def floats(item: Item, path: Path) -> torch.Tensor:
    """A float item as a float32 tensor of its shape; an int8/int16 one dequantized (value / q),
    in the order Marian means it: (in, out) for a matrix, rows first for embeddings."""
    if item.type not in (INTGEMM8, INTGEMM16):  # float32, float16 (any other type: _values says so)
        return torch.from_numpy(_values(item, path).astype(np.float32).reshape(item.shape))
    values, multiplier = integers(item, path)
    return values.float() / multiplier


def integers(item: Item, path: Path) -> tuple[torch.Tensor, float]:
    """An intgemm item's integer values in its shape's order and its quantization multiplier q
    (value = integer / q). Matrices are stored transposed: shape (in, out) holds out rows of in."""
    if item.type not in (INTGEMM8, INTGEMM16):
        raise MtError(f"{path}: item {item.name} is {_type_name(item.type)}, not an intgemm matrix")
    values = _values(item, path)
    width = values.itemsize * item.elements
    if len(item.data) < width + 4:
        raise MtError(
            f"{path}: item {item.name} has no quantization multiplier after its values; "
            "the file is damaged"
        )
    (multiplier,) = struct.unpack_from("<f", item.data, width)
    flat = torch.from_numpy(values.copy())
    if "Wemb" in item.name or len(item.shape) != 2:  # embeddings (and vectors) keep their own order
        return flat.reshape(item.shape), float(multiplier)
    n_in, n_out = item.shape
    # out rows of in values -> (in, out)
    return flat.reshape(n_out, n_in).t().contiguous(), float(multiplier)


def _values(item: Item, path: Path) -> np.ndarray:
    kind = _NUMPY.get(item.type)
    if kind is None:
        raise MtError(
            f"{path}: item {item.name} is {_type_name(item.type)}, which mt does not read "
            "(float32, float16, intgemm8"
            " or intgemm16); a model packed for one CPU (intgemm8avx2, ...) must be converted back "
            "to intgemm8 with"
            " Marian's marian-conv first"
        )
    width = np.dtype(kind).itemsize * item.elements
    if len(item.data) < width:
        raise MtError(
            f"{path}: item {item.name} holds {len(item.data)} bytes, "
            f"its shape {item.shape} needs {width}"
        )
    return np.frombuffer(item.data, dtype=kind, count=item.elements)


def _type_name(kind: int) -> str:
    return _NAMES.get(kind, f"type {kind:#x}")


class _Reader:
    """Reads the buffer front to back; running past its end is one error naming the file."""

    def __init__(self, buf: bytes, path: Path) -> None:
        self.buf, self.path, self.pos = buf, path, 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.raw(size))

    def raw(self, size: int, what: str = "its item table") -> bytes:
        end = self.pos + size
        if end > len(self.buf):
            raise MtError(
                f"{self.path}: cut short: {what} needs bytes up to {end:,}, the file has "
                f"{len(self.buf):,};"
                " copy or download the model again"
            )
        out, self.pos = self.buf[self.pos : end], end
        return out
