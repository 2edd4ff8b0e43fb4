"""`mt backtranslate`: target-language text translated into synthetic sources by a model of the
other direction, written as aligned pairs that `mt train` takes beside the real ones (data.pairs,
with a weight and a tag: docs/pipeline.md)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mt_cli.config import DEVICE
from mt_cli.decode.translator import Translator
from mt_cli.files import atomic_open, check_readable, pair_paths
from mt_cli.tools.synthetic import read_translations, translate_corpus

Log = Callable[[str], None]


@dataclass(frozen=True)
class Backtranslated:
    """What `mt backtranslate` wrote: the synthetic sources, the real targets, the pairs and the
    blank lines left out."""

    src: Path
    tgt: Path
    pairs: int
    blank: int


def backtranslate(
    checkpoint: Path,
    mono: Path,
    prefix: Path,
    device: str = DEVICE,
    log: Log = lambda _: None,
    **decoding: Any,
) -> Backtranslated:
    """Translate MONO (target-language text, one sentence per line) with CHECKPOINT (a model from
    that language into the source language) and write PREFIX.<source> (its translations) beside
    PREFIX.<target> (MONO's lines). The translation goes in chunks under PREFIX.chunks/, kept until
    the pairs are written: a rerun after a kill goes on from the last chunk."""
    check_readable(mono, "monolingual file")
    tr = Translator.load(checkpoint, device, **decoding)
    cfg = tr.model.cfg
    synthetic_lang, mono_lang = next(iter(cfg.target_langs), ""), next(iter(cfg.source_langs), "")
    src_path, tgt_path = pair_paths(prefix, synthetic_lang, mono_lang)
    work = prefix.parent / f"{prefix.name}.chunks"
    total = translate_corpus(tr, mono, work, [checkpoint], 1, log)
    pairs = 0
    with atomic_open(src_path) as out_src, atomic_open(tgt_path) as out_tgt:
        for line, hyps in read_translations(mono, work, total):
            if hyps and line.strip():
                out_src.write(hyps[0][0] + "\n")
                out_tgt.write(line + "\n")
                pairs += 1
    shutil.rmtree(work, ignore_errors=True)
    return Backtranslated(src_path, tgt_path, pairs, total - pairs)
