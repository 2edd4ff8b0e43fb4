"""A whole corpus translated for training data (`mt backtranslate`, `mt distill`): in chunks, each
written atomically, so a killed run starts again at the first chunk it had not finished.

WORK/manifest.json names what is translated and how (the input file, the models, the decoding
settings, the chunk size); a rerun with anything else changed refuses to mix its chunks with the
old ones. WORK/chunk-NNNNNN.jsonl holds, per input line, its hypotheses best first as
[text, log-probability per token (EOS included)].
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mt_cli.data.sources import file_digest
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.files import atomic_write_text
from mt_cli.tools.line_inputs import count_lines, input_lines

Log = Callable[[str], None]
CHUNK_LINES = 5000  # a few minutes of beam search on a CPU: little is lost to a kill


def translate_corpus(
    tr: Translator,
    src: Path,
    work: Path,
    models: list[Path],
    nbest: int = 1,
    log: Log = lambda _: None,
    chunk_lines: int = CHUNK_LINES,
) -> int:
    """Translate SRC into WORK's chunks (the ones already there are kept); the line count."""
    total = count_lines(src)
    _check_manifest(work, src, models, tr, nbest, chunk_lines, total)
    chunks = (total + chunk_lines - 1) // chunk_lines
    lines = input_lines(src, "source")
    done_before = sum(_chunk(work, i).is_file() for i in range(chunks))
    if done_before:
        log(f"{work}: {done_before} of {chunks} chunks already translated; going on from there")
    start = time.monotonic()
    for i in range(chunks):
        chunk = list(itertools.islice(lines, chunk_lines))
        if _chunk(work, i).is_file():
            continue
        found = tr.search(chunk, nbest=nbest)
        atomic_write_text(
            _chunk(work, i),
            "".join(json.dumps(_entry(hyps), ensure_ascii=False) + "\n" for hyps in found),
        )
        done = min((i + 1) * chunk_lines, total)
        rate = (done - done_before * chunk_lines) / max(time.monotonic() - start, 1e-9)
        log(f"  translated {done:,} of {total:,} lines ({rate:,.1f} lines/s)")
    return total


def _entry(hyps: list[Any]) -> list[list[Any]]:
    return [
        [h.text, sum(h.token_logprobs) / max(len(h.token_logprobs), 1)] for h in hyps if h.tokens
    ]


def read_translations(
    src: Path, work: Path, total: int, chunk_lines: int = CHUNK_LINES
) -> Iterator[tuple[str, list]]:
    """Each source line with its hypotheses ([text, log-probability per token], best first; none
    for a blank line), from WORK's chunks, in order."""
    lines = input_lines(src, "source")
    for i in range((total + chunk_lines - 1) // chunk_lines):
        with open(_chunk(work, i), encoding="utf-8") as f:
            # the chunk first: zip stops on it without taking a line
            for entry, line in zip(f, lines):
                yield line, json.loads(entry)


def _chunk(work: Path, i: int) -> Path:
    return work / f"chunk-{i:06d}.jsonl"


def _check_manifest(
    work: Path,
    src: Path,
    models: list[Path],
    tr: Translator,
    nbest: int,
    chunk_lines: int,
    total: int,
) -> None:
    """Write WORK/manifest.json, or check that the one there describes this same translation."""
    # Contents, not modification times: a corpus copied again (a fresh checkout, rsync without -t)
    # is the same work and keeps hours of translation; an edited one is not.
    manifest = {
        "source": str(src.resolve()),
        "sha256": file_digest(src),
        "lines": total,
        "models": [str(Path(m).resolve()) for m in models],
        "model_sha256": [file_digest(Path(m)) for m in models],
        "decode": {
            k: v
            for k, v in dataclasses.asdict(tr.cfg).items()
            if k not in ("batch_size", "batch_tokens")
        },
        "target": tr.direction.target,
        "nbest": nbest,
        "chunk_lines": chunk_lines,
    }
    path = work / "manifest.json"
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(k for k in manifest if old.get(k) != json.loads(json.dumps(manifest[k])))
        if changed:
            raise MtError(
                f"{work}: translated before with other {', '.join(changed)}; "
                "give another output folder, or remove this one to start over"
            )
        return
    work.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(manifest, indent=1) + "\n")
