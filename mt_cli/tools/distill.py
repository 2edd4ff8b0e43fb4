"""`mt distill`: sequence-level knowledge distillation (Kim & Rush 2016). The teachers (one model,
or an ensemble) translate the training sources with beam search; a student, usually smaller and
faster, trains on their translations (optionally beside the original pairs); the result is a
student checkpoint that decodes with int8 weights on a CPU, with its vocabulary shortlist, and its
CTranslate2 export.

OUT/teacher/   the teachers' translations, in chunks (tools/synthetic.py): a rerun goes on from
               the last one written
OUT/distilled.de, OUT/distilled.en   the student's training pairs
OUT/student/   the student's run (mt train's: a rerun resumes it)
OUT/student.pt the student, int8 by default; OUT/ct2/ its CTranslate2 export
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mt_cli.config import DEVICE, Config
from mt_cli.config.pipeline import DistillConfig
from mt_cli.data.languages import suffix_language
from mt_cli.data.sources import TextPair
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.files import atomic_open, pair_paths
from mt_cli.interop import export_refusal
from mt_cli.model import checkpoint
from mt_cli.tools.synthetic import read_translations, translate_corpus
from mt_cli.train.inputs import DataSpec, PairSpec
from mt_cli.train.loop import train

Log = Callable[[str], None]
MONOLINGUAL = "monolingual"  # the label of a pair whose sources have no translations of their own


@dataclass(frozen=True)
class Distilled:
    """What `mt distill` wrote: the training pairs (and how many), the student, its export."""

    src: Path
    tgt: Path
    pairs: int
    student: Path
    ct2: Path | None


def distill(
    teachers: list[Path],
    data: DataSpec,
    out: Path,
    cfg: Config,
    dcfg: DistillConfig = DistillConfig(),
    device: str = DEVICE,
    log: Log = lambda _: None,
) -> Distilled:
    """Translate data's training sources with the teachers, train the student `cfg` describes on
    the translations, and write OUT/student.pt and OUT/ct2."""
    main = data.pairs[0]
    if len(data.pairs) != 1 or not isinstance(main.train, TextPair):
        raise MtError(
            "mt distill reads its training pairs from one pair of text files "
            "(data.pairs: one {src, tgt})"
        )
    source = main.train
    if main.label == MONOLINGUAL and dcfg.original_weight:
        raise MtError(
            f"{source.src} is monolingual: "
            "distill.original_weight needs the sources' own translations"
        )
    src_lang = main.source_lang or suffix_language(source.src) or ""
    tgt_lang = main.target_lang or suffix_language(source.tgt) or ""
    tr = Translator.load(teachers, device, beam=dcfg.teacher_beam or None)  # None: the teacher's
    log(
        f"teacher{'s' if len(teachers) > 1 else ''} {', '.join(map(str, teachers))} translating "
        f"{source.src} (beam {tr.cfg.beam}, {dcfg.nbest} best kept)"
    )
    total = translate_corpus(tr, Path(source.src), out / "teacher", teachers, dcfg.nbest, log)
    del tr  # the teachers' memory, before the student trains
    paths = pair_paths(out / "distilled", src_lang, tgt_lang)
    pairs = _write_pairs(Path(source.src), out / "teacher", total, paths, dcfg)
    log(f"{pairs} teacher pairs from {total} source lines in {paths[0]} and {paths[1]}")
    taught = PairSpec(TextPair(*paths), main.valid, src_lang, tgt_lang)
    extra = (
        [PairSpec(source, None, src_lang, tgt_lang, dcfg.original_weight)]
        if dcfg.original_weight
        else []
    )
    train(
        DataSpec.with_extra(taught, extra, data.tokenizer, data.cache),
        out / "student",
        cfg,
        log=log,
    )
    student, ct2 = _finish(out, dcfg, log)
    return Distilled(paths[0], paths[1], pairs, student, ct2)


def monolingual_spec(
    src: Path, valid_src: Path, valid_tgt: Path, cache: Path | None = None
) -> DataSpec:
    """Distillation data from monolingual sources: the teachers' translations are the only
    targets. The source file stands in as its pair's target file, which distill never reads where
    distill.original_weight is 0 (the languages are the files' suffixes: the validation target's
    names the target language)."""
    valid = TextPair(valid_src, valid_tgt)
    langs = (
        suffix_language(src) or suffix_language(valid_src) or "",
        suffix_language(valid_tgt) or "",
    )
    return DataSpec((PairSpec(TextPair(src, src), valid, *langs, label=MONOLINGUAL),), None, cache)


def _write_pairs(
    src: Path, work: Path, total: int, paths: tuple[Path, Path], dcfg: DistillConfig
) -> int:
    """The kept translations as pairs: each line's `nbest` best whose cross-entropy is within
    distill.max_cross_entropy; blank lines and empty translations are left out."""
    pairs = 0
    with atomic_open(paths[0]) as out_src, atomic_open(paths[1]) as out_tgt:
        for line, hyps in read_translations(src, work, total):
            for text, logprob in hyps[: dcfg.nbest]:
                if (
                    line.strip()
                    and text.strip()
                    and (not dcfg.max_cross_entropy or -logprob <= dcfg.max_cross_entropy)
                ):
                    out_src.write(line + "\n")
                    out_tgt.write(text + "\n")
                    pairs += 1
    if not pairs:
        raise MtError(
            f"no teacher translation was kept from {src}: "
            "raise distill.max_cross_entropy (or set it to 0)"
        )
    return pairs


def _finish(out: Path, dcfg: DistillConfig, log: Log) -> tuple[Path, Path | None]:
    """OUT/student.pt: the student's best checkpoint, decoding with its shortlist (and in int8 on a
    CPU where its training found int8 as good as fp32); OUT/ct2: its CTranslate2 export, where
    CTranslate2 is installed."""
    ckpt = checkpoint.load(out / "student" / "best.pt")
    decode = dataclasses.replace(ckpt.config.decode, shortlist=ckpt.shortlist is not None)
    ckpt = dataclasses.replace(ckpt, config=dataclasses.replace(ckpt.config, decode=decode))
    checkpoint.save(out / "student.pt", ckpt)
    if importlib.util.find_spec("ctranslate2") is None:
        log(
            "CTranslate2 export skipped: pip install ctranslate2 transformers (then mt export "
            "--format ct2)"
        )
        return out / "student.pt", None
    refusal = export_refusal(ckpt.config.model, "ct2")
    # a student begun from an SSRU teacher's layers (--init-layers) stays one
    if refusal is not None:
        log(f"CTranslate2 export skipped: {refusal}")
        return out / "student.pt", None
    from mt_cli.interop.ct2 import export_ct2

    shutil.rmtree(out / "ct2", ignore_errors=True)  # the export of an earlier, interrupted finish
    quantization = None if dcfg.ct2_quantization == "none" else dcfg.ct2_quantization
    return out / "student.pt", export_ct2(ckpt, out / "ct2", quantization)
