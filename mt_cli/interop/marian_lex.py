"""Marian's binary lexical shortlist (`lex.50.50.s2t.bin`): for each source id, its target ids.

The layout (Bergamot's marian-dev src/data/shortlist.{h,cpp}), all little-endian:

    uint64 magic 0xF11A48D5013417F5, uint64 checksum (over every 8 bytes after it)
    uint64 first: target ids 0..first-1 (the most frequent) are always candidates
    uint64 best: how many targets were kept per source id when it was built
    uint64 n_offsets, uint64 n_targets
    n_offsets x uint64: source id s has the targets at [offsets[s], offsets[s + 1])
    n_targets x uint32: target ids

Marian's batch shortlist is the first `first` ids, the targets of every source id in the batch,
then more ids from `first` up until the count is a multiple of eight (for its int8 kernels).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mt_cli.errors import MtError

MAGIC = 0xF11A48D5013417F5
_HEADER = struct.Struct("<6Q")
_MASK = 2**64 - 1


@dataclass(frozen=True)
class MarianLex:
    first: int
    best: int
    offsets: np.ndarray  # (n_src + 1,) uint64
    targets: np.ndarray  # uint32

    def of(self, src_id: int) -> np.ndarray:
        """The target ids the lexicon lists for source id `src_id`."""
        return self.targets[int(self.offsets[src_id]) : int(self.offsets[src_id + 1])]


def read_lex(path: Path, check: bool = True) -> MarianLex:
    """The shortlist at `path`; with `check`, its checksum and every offset and id verified, so
    that a damaged file is one clear error here rather than wrong candidates later."""
    buf = path.read_bytes()
    if len(buf) < _HEADER.size or struct.unpack_from("<Q", buf)[0] != MAGIC:
        raise MtError(
            f"{path}: not a Marian binary shortlist (no magic number 0x{MAGIC:X} at its start)"
        )
    _, checksum, first, best, n_offsets, n_targets = _HEADER.unpack_from(buf)
    want = _HEADER.size + 8 * n_offsets + 4 * n_targets
    if want != len(buf):
        raise MtError(
            f"{path}: its header says {want:,} bytes, the file has {len(buf):,}; copy the "
            "shortlist again"
        )
    if check and _checksum(buf) != checksum:
        raise MtError(f"{path}: checksum mismatch: the shortlist is damaged; copy it again")
    offsets = np.frombuffer(buf, dtype="<u8", count=n_offsets, offset=_HEADER.size)
    targets = np.frombuffer(buf, dtype="<u4", count=n_targets, offset=_HEADER.size + 8 * n_offsets)
    if check and (
        np.any(np.diff(offsets.astype(np.int64)) < 0) or (n_offsets and offsets[-1] > n_targets)
    ):
        raise MtError(
            f"{path}: its offsets run backwards or past its {n_targets:,} targets; "
            "the file is damaged"
        )
    return MarianLex(first, best, offsets, targets)


def _checksum(buf: bytes) -> int:
    """Marian's util::hashMem over the uint64 words after the checksum: boost's hash_combine with
    std::hash (the identity on integers), word by word."""
    seed = 0
    for (word,) in struct.iter_unpack("<Q", buf[16 : 16 + (len(buf) - 16) // 8 * 8]):
        seed ^= (word + 0x9E3779B9 + ((seed << 6) & _MASK) + (seed >> 2)) & _MASK
    return seed
