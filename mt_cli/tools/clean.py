"""`mt clean`: a parallel corpus without the pairs data/cleaning.py's rules remove, in bounded
memory.

Three passes, so that a corpus larger than memory streams through:
1. read the pairs a chunk at a time; write each pair's verdict (a byte: 0 kept, else the rule) to
   a file, and each kept pair's 64-bit key (data/cleaning.pair_key) to one of K bucket files by
   the key's value;
2. per bucket (1/K of the keys), mark every pair whose key came earlier as a duplicate, in the
   verdict file, opened as a memory map;
3. read the pairs again and write the kept ones, and the removed ones' line numbers and rules.
Memory holds a chunk of pairs and one bucket (the keys of 16 MB of input); the inputs are only read,
and the outputs appear, complete, when all is done.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mt_cli.config import DEVICE
from mt_cli.config.pipeline import CLEAN_RULES, CleanConfig
from mt_cli.data.cleaning import Sides, first_rule, pair_key
from mt_cli.data.languages import suffix_language
from mt_cli.data.text import clean_line, open_bytes
from mt_cli.errors import MtError
from mt_cli.files import atomic_open, check_readable, pair_paths, temp_dir

CODE = {rule: i + 1 for i, rule in enumerate(CLEAN_RULES)}  # a verdict byte; 0: kept
BUCKET_BYTES = 16 << 20  # input bytes per duplicate bucket: its keys are a few MB
MAX_BUCKETS = 256  # open files at once; past 4 GB of input the buckets grow instead
_KEYS = np.dtype([("key", "<u8"), ("line", "<u8")])

Log = Callable[[str], None]


@dataclass
class CleanReport:
    """What `mt clean` did: pairs read and kept, removals per rule, and the files written."""

    total: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    outputs: tuple[Path, Path, Path] | None = None

    @property
    def kept(self) -> int:
        return self.total - sum(self.removed.values())


def output_paths(prefix: Path, src_lang: str, tgt_lang: str) -> tuple[Path, Path, Path]:
    """The kept pairs' files (tools/synthetic.pair_paths) and PREFIX.removed.tsv."""
    return (*pair_paths(prefix, src_lang, tgt_lang), prefix.parent / f"{prefix.name}.removed.tsv")


def clean_corpus(
    src: Path,
    tgt: Path,
    prefix: Path,
    cfg: CleanConfig,
    device: str = DEVICE,
    log: Log = lambda _: None,
) -> CleanReport:
    """Write the kept pairs of SRC/TGT to PREFIX.<lang> (or .src/.tgt) and the removed pairs' line
    numbers and rules to PREFIX.removed.tsv."""
    for path in (src, tgt):
        check_readable(path, "corpus file")
    src_lang = cfg.source_lang or suffix_language(src) or ""
    tgt_lang = cfg.target_lang or suffix_language(tgt) or ""
    outputs = output_paths(prefix, src_lang, tgt_lang)
    for out in outputs:
        if out.exists() and any(out.samefile(p) for p in (src, tgt)):
            raise MtError(
                f"{out}: also an input; "
                "mt clean never writes over its inputs: give another output prefix"
            )
    judges = _Judges(cfg, src_lang, tgt_lang, device, log)
    buckets = max(1, min(MAX_BUCKETS, (src.stat().st_size + tgt.stat().st_size) // BUCKET_BYTES))
    prefix.parent.mkdir(parents=True, exist_ok=True)
    work = temp_dir(prefix.parent, f".{prefix.name}.clean.")
    try:
        total = _judge(src, tgt, judges, work, buckets, log)
        codes = (
            np.memmap(work / "codes", dtype=np.uint8, mode="r+", shape=(total,))
            if total
            else np.zeros(0, np.uint8)
        )
        if "duplicate" in cfg.rules:
            for b in range(buckets):
                _mark_duplicates(work / f"keys.{b}", codes)
        counts = np.bincount(codes, minlength=len(CLEAN_RULES) + 1)
        report = CleanReport(
            total, {r: int(counts[CODE[r]]) for r in CLEAN_RULES if counts[CODE[r]]}, outputs
        )
        _write(src, tgt, codes, outputs)
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pairs(src: Path, tgt: Path) -> Iterator[tuple[bytes, bytes]]:
    """The raw lines of both files together; files of different lengths stop the run."""
    with open_bytes(src) as a, open_bytes(tgt) as b:
        for n, (x, y) in enumerate(itertools.zip_longest(a, b), start=1):
            if x is None or y is None:
                short, long = (src, tgt) if x is None else (tgt, src)
                raise MtError(
                    f"{short} ends after {n - 1} lines but {long} goes on: "
                    "the files must be line-aligned"
                )
            yield x, y


def _decode(raw: bytes, first: bool) -> str | None:
    try:
        return clean_line(raw.decode("utf-8"), first)
    except UnicodeDecodeError:
        return None


def _judge(src: Path, tgt: Path, judges: _Judges, work: Path, buckets: int, log: Log) -> int:
    """Pass 1: every pair's verdict to work/codes, the kept pairs' keys to work/keys.B; the pair
    count."""
    pairs, total = _pairs(src, tgt), 0
    with contextlib.ExitStack() as stack:
        codes = stack.enter_context(open(work / "codes", "wb"))
        keys = [stack.enter_context(open(work / f"keys.{b}", "wb")) for b in range(buckets)]
        while chunk := list(itertools.islice(pairs, judges.cfg.batch_lines)):
            texts = [
                (_decode(x, total + i == 0), _decode(y, total + i == 0))
                for i, (x, y) in enumerate(chunk)
            ]
            verdicts = judges.verdicts(texts)
            codes.write(bytes(verdicts))
            kept = [
                (total + i, s, t) for i, ((s, t), v) in enumerate(zip(texts, verdicts)) if v == 0
            ]
            if kept and "duplicate" in judges.cfg.rules:
                found = [(pair_key(s, t), n) for n, s, t in kept]  # type: ignore[arg-type]
                rows = np.array(found, dtype=_KEYS)
                which = rows["key"] % buckets
                for b in np.unique(which):
                    keys[int(b)].write(rows[which == b].tobytes())
            total += len(chunk)
            if total % 1_000_000 < len(chunk):
                log(f"  {total:,} pairs checked")
    return total


def _mark_duplicates(bucket: Path, codes: np.ndarray) -> None:
    """Pass 2, one bucket: each pair whose key an earlier pair has is marked a duplicate."""
    rows = np.fromfile(bucket, dtype=_KEYS)
    if len(rows) < 2:
        return
    # by key, then by line: the first of a key stays
    order = np.lexsort((rows["line"], rows["key"]))
    key, line = rows["key"][order], rows["line"][order]
    later = np.concatenate([[False], key[1:] == key[:-1]])
    codes[line[later]] = CODE["duplicate"]


def _write(src: Path, tgt: Path, codes: np.ndarray, outputs: tuple[Path, Path, Path]) -> None:
    """Pass 3: the kept pairs as they were read (cleaned of BOM and CR), the removed ones' line
    numbers."""
    names = {code: rule for rule, code in CODE.items()}
    with (
        atomic_open(outputs[0]) as out_src,
        atomic_open(outputs[1]) as out_tgt,
        atomic_open(outputs[2]) as removed,
    ):
        for n, (x, y) in enumerate(_pairs(src, tgt)):
            if codes[n]:
                removed.write(f"{n + 1}\t{names[int(codes[n])]}\n")
                continue
            out_src.write(clean_line(x.decode("utf-8"), n == 0) + "\n")
            out_tgt.write(clean_line(y.decode("utf-8"), n == 0) + "\n")


class _Judges:
    """The rules of one run, the models among them loaded once: pair rules (data/cleaning.py),
    language identification (lingua, among the pair's languages and clean.language_others) and a
    model's cross-entropy (clean.score_checkpoint, and the reverse model)."""

    def __init__(
        self, cfg: CleanConfig, src_lang: str, tgt_lang: str, device: str, log: Log
    ) -> None:
        self.cfg, self.langs = cfg, (src_lang, tgt_lang)
        self.identifier: Any = None
        if "language" in cfg.rules:
            self.identifier = _identifier(src_lang, tgt_lang, cfg.language_others, log)
        self.scorers: list[Any] = []
        if "score" in cfg.rules and cfg.score_checkpoint:
            from mt_cli.decode.translator import Translator

            paths = [cfg.score_checkpoint, cfg.score_reverse_checkpoint]
            self.scorers = [Translator.load(Path(p), device, scoring=True) for p in paths if p]
            log(
                f"scoring with {' and '.join(p for p in paths if p)}: cross-entropy per token over "
                f"{cfg.max_cross_entropy:g} removes a pair"
            )

    def verdicts(self, texts: list[tuple[str | None, str | None]]) -> list[int]:
        """Each pair's verdict byte: 0 (kept) or the code of the first rule that removes it."""
        out = []
        for s, t in texts:
            if s is None or t is None:
                out.append(CODE["encoding"] if "encoding" in self.cfg.rules else 0)
                continue
            rule = first_rule(Sides(s, t, *self.langs), self.cfg) or self._language(s, t)
            out.append(CODE[rule] if rule else 0)
        if self.scorers:
            kept = [i for i, v in enumerate(out) if v == 0 and texts[i][0] is not None]
            scored = [texts[i] for i in kept]
            for i, ce in zip(kept, self._cross_entropy(scored)):  # type: ignore[arg-type]
                if ce > self.cfg.max_cross_entropy:
                    out[i] = CODE["score"]
        return out

    def _language(self, src: str, tgt: str) -> str:
        if self.identifier is None:
            return ""
        for text, lang in zip((src, tgt), self.langs):
            if sum(ch.isalpha() for ch in text) < self.cfg.language_min_letters:
                continue
            found = self.identifier.confidences(text)
            mine = found.get(lang)
            if (
                mine is not None
                and mine < self.cfg.language_min_confidence
                and max(found.values()) > mine
            ):
                return "language"
        return ""

    def _cross_entropy(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Each pair's cross-entropy per target token (EOS included), the mean over both models'
        directions."""
        if not pairs:
            return []
        src, tgt = [p[0] for p in pairs], [p[1] for p in pairs]
        sums = np.zeros(len(pairs))
        for k, scorer in enumerate(self.scorers):
            given, wanted = (src, tgt) if k == 0 else (tgt, src)
            try:
                found = scorer.score(given, wanted)
            except MtError as e:
                raise MtError(
                    f"clean.score_checkpoint: {e} (lower clean.max_words: the length rule drops it)"
                ) from None
            sums += [-sum(h.token_logprobs) / max(len(h.token_logprobs), 1) for h in found]
        return list(sums / len(self.scorers))


def _identifier(src_lang: str, tgt_lang: str, others: tuple[str, ...], log: Log) -> Any:
    """lingua restricted to the pair's languages and `others`; None (said why) where it cannot
    run."""
    if not (src_lang and tgt_lang):
        log(
            "language: skipped, the languages are not known (name them: clean.source_lang, "
            "clean.target_lang)"
        )
        return None
    if importlib.util.find_spec("lingua") is None:
        log("language: skipped, lingua is not installed (pip install 'mt-cli[serve]')")
        return None
    from mt_cli.data.language_id import LanguageIdentifier

    identifier = LanguageIdentifier(list(dict.fromkeys((src_lang, tgt_lang, *others))))
    unknown = [c for c in (src_lang, tgt_lang) if c not in identifier.known()]
    if unknown:
        log(f"language: {', '.join(unknown)} not known to lingua; those sides are not identified")
    return identifier


def summary(report: CleanReport) -> str:
    """Pairs removed per rule, then kept, as a small table."""
    share = (lambda n: f"{100 * n / report.total:.2f}%") if report.total else (lambda n: "-")
    rows = [(rule, n) for rule, n in report.removed.items()] + [("kept", report.kept)]
    lines = [f"{rule:<10} {n:>12,} {share(n):>8}" for rule, n in rows]
    if report.outputs:
        lines.append("wrote " + ", ".join(str(p) for p in report.outputs))
    return "\n".join(lines)
