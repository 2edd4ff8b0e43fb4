"""`mt doctor`: what is wrong with a parallel corpus, each finding with how to fix it.

Unlike training, which stops at the first undecodable byte, the doctor reads every line (bad
bytes replaced) so that one run reports everything.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mt_cli.config import DoctorConfig
from mt_cli.data.text import has_empty_side, read_lines
from mt_cli.data.tokenizer import UNK, Tokenizer
from mt_cli.errors import MtError

EXAMPLES = 5  # line numbers shown per finding


@dataclass
class Finding:
    severity: str  # "error": training would stop; "warning": worth fixing; "info": a figure
    check: str
    where: str
    count: int
    fix: str
    lines: list[int] = field(default_factory=list)  # 1-based, the first few


@dataclass
class Side:
    path: Path
    lines: list[str]
    bad_utf8: list[int]  # line numbers holding bytes that are not UTF-8


def read_side(path: Path) -> Side:
    """Every line, cleaned as training reads it, with undecodable bytes replaced (and noted)."""
    bad: list[int] = []
    lines = read_lines(path, "replace", bad)
    return Side(path, lines, bad)


def _finding(severity: str, check: str, where: str, hits: list[int], fix: str) -> list[Finding]:
    return [Finding(severity, check, where, len(hits), fix, hits[:EXAMPLES])] if hits else []


def check_pair(name: str, src: Side, tgt: Side, max_chars: int, max_ratio: float) -> list[Finding]:
    """Findings of one line-aligned pair of files; `name` says which (train, valid, test)."""
    where = f"{name}: {src.path} / {tgt.path}"
    return _file_findings(name, where, src, tgt) + _line_findings(
        where, src, tgt, max_chars, max_ratio
    )


def _file_findings(name: str, where: str, src: Side, tgt: Side) -> list[Finding]:
    """What is wrong with the files as a whole: unequal line counts, bytes that are not UTF-8."""
    out: list[Finding] = []
    if len(src.lines) != len(tgt.lines):
        out.append(
            Finding(
                "error",
                "line counts differ",
                where,
                abs(len(src.lines) - len(tgt.lines)),
                f"{src.path} has {len(src.lines)} lines, {tgt.path} {len(tgt.lines)}; "
                "the files must be line-aligned: re-export them together",
            )
        )
    for side in (src, tgt):
        out += _finding(
            "error",
            "not UTF-8",
            f"{name}: {side.path}",
            side.bad_utf8,
            "convert the file to UTF-8 (iconv -f LATIN1 -t UTF-8), or drop those lines",
        )
    return out


def _line_findings(
    where: str, src: Side, tgt: Side, max_chars: int, max_ratio: float
) -> list[Finding]:
    """What is suspect in the pairs of lines: empty sides, repeats, copies, lengths."""
    out: list[Finding] = []
    pairs = list(zip(src.lines, tgt.lines))
    n = lambda cond: [i for i, (s, t) in enumerate(pairs, start=1) if cond(s, t)]  # noqa: E731
    out += _finding(
        "warning",
        "empty or blank side",
        where,
        n(has_empty_side),
        "mt train drops these pairs; remove them to keep the files honest",
    )
    seen: Counter = Counter()
    dup = []
    for i, pair in enumerate(pairs, start=1):
        if pair[0].strip() and seen[pair]:
            dup.append(i)
        seen[pair] += 1
    out += _finding(
        "warning",
        "duplicate pairs",
        where,
        dup,
        "mt clean removes them (and near-exact ones) unless the repeats are wanted",
    )
    out += _finding(
        "warning",
        "source = target",
        where,
        n(lambda s, t: s.strip() and s.strip() == t.strip()),
        "untranslated copies teach the model to copy; mt clean removes them",
    )
    out += _finding(
        "warning",
        "over-long lines",
        where,
        n(lambda s, t: max(len(s), len(t)) > max_chars),
        f"lines over {max_chars} characters; mt train drops pairs over train.max_len tokens, so "
        "split or drop them",
    )
    out += _finding(
        "warning",
        "length-ratio outliers",
        where,
        _ratio_outliers(pairs, max_ratio),
        f"one side over {max_ratio:g}x longer than usual for this corpus: often a misalignment; "
        "check those lines; mt clean drops pairs of very unequal lengths",
    )
    return out


def _ratio_outliers(pairs: list[tuple[str, str]], max_ratio: float) -> list[int]:
    """Pairs whose character-length ratio is `max_ratio` times off this corpus's median ratio
    (a median, so that Chinese-English, say, is not flagged as a whole)."""
    ratios = [(len(s) + 1) / (len(t) + 1) for s, t in pairs if not has_empty_side(s, t)]
    if not ratios:
        return []
    median = statistics.median(ratios)
    out = []
    for i, (s, t) in enumerate(pairs, start=1):
        if not has_empty_side(s, t) and max(len(s), len(t)) >= 10:
            r = (len(s) + 1) / (len(t) + 1) / median
            if r > max_ratio or r < 1 / max_ratio:
                out.append(i)
    return out


def check_overlap(train: Side, name: str, other: Side) -> list[Finding]:
    """Sentences of a valid/test source file that also occur in the training source: scores on
    them measure memory, not translation."""
    known = {line.strip() for line in train.lines if line.strip()}
    hits = [i for i, line in enumerate(other.lines, start=1) if line.strip() in known]
    return _finding(
        "warning",
        "overlap with train",
        f"{name}: {other.path}",
        hits,
        f"these {name} sentences are in {train.path}; remove them from train (or from {name})",
    )


def unknown_rate(tokenizer: Tokenizer, side: Side, source: bool) -> list[Finding]:
    ids = tokenizer.encode_src(side.lines) if source else tokenizer.encode_tgt(side.lines)
    total = sum(len(x) for x in ids)
    hits = [i for i, x in enumerate(ids, start=1) if UNK in x]
    unk = sum(x.count(UNK) for x in ids)
    rate = unk / max(total, 1)
    fix = f"{unk} of {total} pieces ({100 * rate:.3f}%) are unknown"
    fix += (
        "; retrain the tokenizer on this data or raise character_coverage" if rate > 0.001 else ""
    )
    return [
        Finding(
            "warning" if rate > 0.001 else "info",
            "unknown pieces",
            str(side.path),
            unk,
            fix,
            hits[:EXAMPLES],
        )
    ]


def diagnose(
    files: dict[str, tuple[Path, Path]],
    tokenizer: Tokenizer | None = None,
    limits: DoctorConfig = DoctorConfig(),
) -> list[Finding]:
    """`files` maps "train" (required), "valid" and "test" to (source, target) paths."""
    sides = {name: (read_side(s), read_side(t)) for name, (s, t) in files.items()}
    findings: list[Finding] = []
    for name, (src, tgt) in sides.items():
        findings.append(
            Finding("info", "lines", f"{name}: {src.path} / {tgt.path}", len(src.lines), "-")
        )
        findings += check_pair(name, src, tgt, limits.max_chars, limits.max_ratio)
        if name != "train":
            findings += check_overlap(sides["train"][0], name, src)
        if tokenizer is not None:
            findings += unknown_rate(tokenizer, src, True) + unknown_rate(tokenizer, tgt, False)
    return findings


def preflight(files: dict[str, tuple[Path, Path]], log: Callable[[str], None]) -> list[Finding]:
    """The doctor's warnings, logged before `mt train` starts work.

    Its errors (misaligned files, bytes that are not UTF-8) are left to the readers, which stop
    on them with the file and line, or, with train.on_bad_utf8 skip/replace, count what they did.
    """
    findings = [f for f in diagnose(files) if f.severity == "warning"]
    for f in findings:
        lines = ", ".join(map(str, f.lines)) + (", ..." if f.count > len(f.lines) else "")
        log(f"data warning: {f.check}: {f.count} in {f.where} (lines {lines}): {f.fix}")
    if findings:
        log(
            "(mt doctor --src ... --tgt ... --json lists these in full; mt clean --src ... --tgt "
            "... --out-prefix P"
            " writes the corpus without them; --set train.doctor=false skips the checks)"
        )
    return findings


def as_json(findings: list[Finding]) -> list[dict]:
    return [asdict(f) for f in findings]


def as_table(findings: list[Finding]) -> str:
    rows = [("severity", "check", "where", "count", "lines", "fix")]
    for f in findings:
        lines = ", ".join(map(str, f.lines)) + (
            ", ..." if f.count > len(f.lines) and f.lines else ""
        )
        rows.append((f.severity, f.check, f.where, str(f.count), lines, f.fix))
    return "\n".join("| " + " | ".join(r) + " |" for r in [rows[0], ("---",) * 6, *rows[1:]])


def run(
    src: Path,
    tgt: Path,
    valid: tuple[Path | None, Path | None] = (None, None),
    test: tuple[Path | None, Path | None] = (None, None),
    tokenizer_dir: Path | None = None,
    limits: DoctorConfig = DoctorConfig(),
    json_output: bool = False,
) -> tuple[str, bool]:
    """The report as text (a Markdown table or JSON) and whether it holds an error."""
    files = {"train": (src, tgt)}
    for name, (s, t) in (("valid", valid), ("test", test)):
        if s is not None and t is not None:
            files[name] = (s, t)
        elif s is not None or t is not None:
            raise MtError(f"--{name}-src and --{name}-tgt go together; give both or neither")
    tokenizer = Tokenizer.load(tokenizer_dir) if tokenizer_dir is not None else None
    findings = diagnose(files, tokenizer, limits)
    text = (
        json.dumps(as_json(findings), ensure_ascii=False, indent=1)
        if json_output
        else as_table(findings)
    )
    return text, any(f.severity == "error" for f in findings)
