"""`mt translate` and `mt score` on files: lines read as they come (stdin too), a chunk at a time,
one output line written for every input line, progress on a terminal, and a file output that
appears only when complete, so an interrupted run never leaves half a file."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from mt_cli.config import DEVICE, DocumentConfig, OutputConfig
from mt_cli.decode.hypothesis import Hypothesis, as_object, pair_score, score_object
from mt_cli.decode.translator import Translator
from mt_cli.documents import kind_of
from mt_cli.documents.encoding import read_document, written
from mt_cli.documents.protect import Masked, Protector
from mt_cli.errors import MtError
from mt_cli.files import atomic_open, atomic_write_bytes, check_readable, check_writable
from mt_cli.tools.line_inputs import LineInputs, SideInputs, count_lines, input_lines
from mt_cli.tools.translation_progress import Progress

# lines read, decoded and written at a time: memory stays flat however long the input
CHUNK_LINES = 10_000


def translate_stream(
    tr: Translator,
    lines: Iterable[str],
    out: IO[str],
    output: OutputConfig = OutputConfig(),
    side: SideInputs | None = None,
    progress: Progress | None = None,
    protector: Protector | None = None,
) -> int:
    """Translate lines as they come, a chunk at a time, one output line (text or JSON) for each,
    with each line's prefix and terms from `side` and its protected spans carried through;
    returns how many were written."""
    nbest = output.nbest if output.format == "jsonl" else 1
    count = 0
    it = iter(lines)
    while chunk := list(itertools.islice(it, CHUNK_LINES)):
        prefixes, terms = side.for_chunk(chunk) if side is not None else (None, None)
        masked = [protector.mask(line) for line in chunk] if protector is not None else []
        requests = tr.requests(
            [m.text for m in masked] if masked else chunk, prefixes, terms, first_line=count
        )
        found = tr.search_requests(
            requests, nbest, output.alignment, progress.advance if progress else None
        )
        if masked:
            pairs = zip(found, masked)
            found = [_restored(protector, hyps, m) for hyps, m in pairs]  # type: ignore[arg-type]
        for line, hyps, r in zip(chunk, found, requests):
            detected = r.source_lang if r is not None else ""
            out.write(
                render(hyps, not line.strip(), output, tr.tokenizer.tgt_pieces, detected) + "\n"
            )
        count += len(chunk)
    if side is not None:
        side.finish(count)
    if progress is not None:
        progress.close()
    return count


def _restored(protector: Protector, hyps: list[Hypothesis], masked: Masked) -> list[Hypothesis]:
    if not masked.spans:
        return hyps
    return [dataclasses.replace(h, text=protector.restore(h.text, masked)) for h in hyps]


def translate_file(
    checkpoint_path: Path | Sequence[Path],
    input_path: Path | None,
    output_path: Path | None,
    device: str = DEVICE,
    output: OutputConfig = OutputConfig(),
    inputs: LineInputs = LineInputs(),
    document: DocumentConfig = DocumentConfig(),
    **decoding: Any,
) -> int | None:
    """`mt translate`: load the checkpoint (several: an ensemble) with any decoding settings
    (DecodeConfig's fields), then translate INPUT (stdin when None) to OUTPUT (stdout when None):
    one line for each line, or a document of another type as a whole; returns how many lines
    (None for an office file)."""
    kind = kind_of(input_path, document.input_type)
    # before the model loads
    output_path = _output_target(input_path, output_path, output.in_place, inputs)
    protector = Protector(document.protect_pattern) if document.protect else None
    tr = Translator.load(checkpoint_path, device, **decoding)
    tr = tr.for_languages(document.source_lang or None, inputs.target_lang)
    if kind != "lines":
        return _translate_whole(tr, input_path, output_path, output, inputs, document, kind)
    side = SideInputs(inputs, input_path)
    # Read lazily, from a handle opened before the output's rename: in place, the lines still come
    # from the input's own inode while its replacement is written beside it.
    lines = input_lines(input_path)
    progress = Progress.on_terminal(
        lambda: count_lines(input_path) if input_path and input_path.is_file() else None
    )
    if output_path is None:
        return translate_stream(tr, lines, sys.stdout, output, side, progress, protector)
    with atomic_open(output_path, "w") as out:
        return translate_stream(tr, lines, out, output, side, progress, protector)


def _output_target(
    input_path: Path | None, output_path: Path | None, in_place: bool, inputs: LineInputs
) -> Path | None:
    """Where the translation goes (None: stdout), with its paths checked before any work: with
    in_place the input file itself (through a symlink, the file it names), and without, never a
    file this run reads (the output would replace it)."""
    if input_path is not None:
        check_readable(input_path, "input file")
    if in_place:
        if input_path is None:
            raise MtError(
                "output.in_place writes over the input file; give one (stdin cannot be replaced)"
            )
        if output_path is not None and not _same_file(input_path, output_path):
            raise MtError(
                f"{output_path}: not the input {input_path}, "
                "which output.in_place writes over; drop one"
            )
        output_path = input_path.resolve()
    elif output_path is not None:
        read = {
            "input": input_path,
            "prefix file": inputs.prefix_file,
            "glossary": inputs.glossary_file,
            "constraints file": inputs.constraints_file,
        }
        for what, path in read.items():
            if path is not None and _same_file(path, output_path):
                fix = (
                    ", or set output.in_place to replace it once translated"
                    if what == "input"
                    else ""
                )
                raise MtError(
                    f"{output_path}: the {what} itself, which this output would replace; write "
                    f"elsewhere{fix}"
                )
    if output_path is not None:
        check_writable(output_path)
    return output_path


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through symlinks, ./ or hard links); False when either is
    missing."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _translate_whole(
    tr: Translator,
    input_path: Path | None,
    output_path: Path | None,
    output: OutputConfig,
    inputs: LineInputs,
    document: DocumentConfig,
    kind: str,
) -> int | None:
    """A document read whole, translated with its structure kept, written whole; its lines (None
    for an office file)."""
    if (
        output.format != "text"
        or inputs.prefix_file
        or inputs.constraints_file
        or inputs.glossary_file
    ):
        raise MtError(
            f"a {kind} document is translated as a whole: output.format jsonl, n-best, prefixes, "
            "constraints and"
            " glossaries need document.input_type lines"
        )
    where = str(input_path) if input_path is not None else "stdin"
    # Line endings (CRLF in subtitles and PO files) come out as they were: the bytes are decoded
    # whole.
    raw = input_path.read_bytes() if input_path is not None else sys.stdin.buffer.read()
    text = read_document(raw, kind, where)
    options = {k: v for k, v in dataclasses.asdict(document).items() if k != "input_type"}
    try:
        translated = tr.translate_document(text, kind, **options)
    except MtError as e:
        raise MtError(f"{where}: {e}") from None
    if output_path is None:
        sys.stdout.buffer.write(written(translated))
    else:
        atomic_write_bytes(output_path, written(translated))
    return translated.count("\n") if isinstance(translated, str) else None


def score_file(
    checkpoint_path: Path,
    src_path: Path,
    tgt_path: Path,
    output_path: Path | None,
    device: str = DEVICE,
    fmt: str = "text",
    normalize: bool = False,
    languages: tuple[str | None, str | None] = (None, None),
    **decoding: Any,
) -> int:
    """`mt score`: the log-probability of each line of TGT as a translation of the same line of SRC,
    a chunk of lines at a time; OUTPUT (stdout when None) appears only when complete. `languages`:
    (source, target), for a model that is told them."""
    OutputConfig(format=fmt)  # the one check of output.format
    for given in (src_path, tgt_path):
        if output_path is not None and _same_file(given, output_path):
            raise MtError(
                f"{output_path}: also an input ({given}); the scores would replace it: give "
                "another output"
            )
    tr = Translator.load(checkpoint_path, device, scoring=True, **decoding)
    tr = tr.for_languages(*languages)
    pairs = itertools.zip_longest(input_lines(src_path), input_lines(tgt_path))
    pieces, count = tr.tokenizer.tgt_pieces, 0
    with contextlib.ExitStack() as stack:
        out = (
            sys.stdout
            if output_path is None
            else stack.enter_context(atomic_open(output_path, "w"))
        )
        while chunk := list(itertools.islice(pairs, CHUNK_LINES)):
            if any(src is None or tgt is None for src, tgt in chunk):
                n = count + next(
                    i for i, (src, tgt) in enumerate(chunk) if src is None or tgt is None
                )
                raise MtError(
                    f"{src_path} and {tgt_path} differ in length: one ends after {n} lines"
                )
            for h in tr.score([src for src, _ in chunk], [tgt for _, tgt in chunk]):
                out.write(render_score(h, fmt, normalize, pieces) + "\n")
            count += len(chunk)
    return count


def render(
    hyps: list[Hypothesis],
    blank: bool,
    out: OutputConfig,
    pieces: Callable[[list[int]], list[str]],
    source_lang: str = "",
) -> str:
    """One output line (without its newline) for one input line's hypotheses, best first (JSON:
    with the language identified in the line, where the source was "auto")."""
    if out.format == "text":
        return hyps[0].text
    return json.dumps(as_object(hyps, blank, out, pieces, source_lang), ensure_ascii=False)


def render_score(
    h: Hypothesis, fmt: str, normalize: bool, pieces: Callable[[list[int]], list[str]]
) -> str:
    """`mt score`'s line for one pair: the summed log-probability (divided by the token count, EOS
    included, with `normalize`), or a JSON object with the tokens and their log-probabilities."""
    if fmt == "text":
        return repr(pair_score(h, normalize))
    return json.dumps(score_object(h, normalize, pieces), ensure_ascii=False)
