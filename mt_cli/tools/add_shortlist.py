"""`mt shortlist`: build a vocabulary shortlist from a parallel corpus into a checkpoint.

`mt train` builds one from its training data by itself; this is for a checkpoint that has none
(an imported OPUS-MT model, a run from before shortlists) or to rebuild one with other sizes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

from mt_cli.config import CORPUS_CHUNK_LINES
from mt_cli.data.lexicon import IdPairs, build_lexicon
from mt_cli.data.sources import read_parallel
from mt_cli.decode.shortlist import Shortlist
from mt_cli.errors import MtError
from mt_cli.model import checkpoint


def add_shortlist(
    ckpt_path: Path,
    src_file: Path,
    tgt_file: Path,
    out: Path,
    per_source: int,
    frequent: int,
    log: Callable[[str], None] = print,
) -> Shortlist:
    """Write `ckpt_path` with a shortlist built from the line-aligned files to `out` (a new file,
    or the checkpoint itself, replaced atomically: its weights and settings stay as they were)."""
    if out.exists() and out.resolve() != ckpt_path.resolve():
        raise MtError(
            f"{out}: already exists; give a new file, or the checkpoint itself to add the "
            "shortlist in place"
        )
    if per_source < 1:
        raise MtError(
            f"train.shortlist_per_source {per_source}: a shortlist needs at least 1 target piece "
            "per source piece"
        )
    if frequent < 0:
        raise MtError(
            f"train.shortlist_frequent {frequent}: give 0 or more (the most frequent target pieces "
            "always allowed)"
        )
    ckpt = checkpoint.load(ckpt_path)
    corpus = read_parallel(src_file, tgt_file)
    log(f"{src_file} / {tgt_file}: {len(corpus.src)} pairs")

    def chunks() -> Iterator[IdPairs]:
        step = CORPUS_CHUNK_LINES  # lines tokenized and counted at a time
        for start in range(0, len(corpus.src), step):
            yield (
                ckpt.tokenizer.encode_src(corpus.src[start : start + step]),
                ckpt.tokenizer.encode_tgt(corpus.tgt[start : start + step]),
            )
            log(f"  counted {min(start + step, len(corpus.src))} pairs")

    tok = ckpt.tokenizer
    shortlist = Shortlist.of(
        build_lexicon(chunks(), tok.src_vocab_size, tok.tgt_vocab_size, per_source, frequent)
    )
    checkpoint.save(out, dataclasses.replace(ckpt, shortlist=shortlist.to_state()))
    log(f"wrote {out}: {per_source} target pieces per source piece, {frequent} most frequent")
    return shortlist
