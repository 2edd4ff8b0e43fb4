"""Settings of single commands: what `mt translate` writes, the server, the corpus check, the
tuning grid and the quickstart. Properties of a call, not of a model: never saved in checkpoints."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mt_cli.config.fields import language, option
from mt_cli.errors import MtError


def _check(ok: bool, message: str) -> None:
    """A command's own setting is wrong: the message alone (it is no config file's fault)."""
    if not ok:
        raise MtError(message)


@dataclass(frozen=True)
class OutputConfig:
    """What `mt translate` writes for each input line, and where. A property of the call, not of the
    model: not part of Config, not saved in checkpoints."""

    section = "output"
    format: str = option(
        "text",
        "text (a line for each input line: its best translation; mt score: its score) or jsonl "
        "(a JSON object for each, with its scores).",
        cli=True,
    )
    nbest: int = option(
        1, "jsonl: also the K best hypotheses, best first (K <= beam; sampling: K draws).", cli=True
    )
    token_scores: bool = option(
        False, "jsonl: each output piece with its log-probability.", cli=True
    )
    alignment: bool = option(
        False, "jsonl: per output piece, the source piece the last layer attends to most.", cli=True
    )
    in_place: bool = option(
        False,
        "Write the translation over the input file, replacing it only once complete; without it, "
        "an output that is the input is refused.",
        cli=True,
    )

    def __post_init__(self) -> None:
        _check(
            self.format in ("text", "jsonl"),
            f"output.format must be text or jsonl, not {self.format!r}",
        )
        # output.nbest's own range is checked where it is searched (decode/request.check_nbest).
        _check(
            self.format == "jsonl"
            or not self.needs_objects(self.nbest, self.token_scores, self.alignment),
            "output.nbest, output.token_scores and output.alignment need output.format jsonl"
            " (text is one line per input line)",
        )

    @staticmethod
    def needs_objects(nbest: int, token_scores: bool, alignment: bool) -> bool:
        """What a line of text cannot carry, and so needs a JSON object per line (jsonl; the
        server's "full" format): several hypotheses, token scores, an alignment."""
        return nbest > 1 or token_scores or alignment


DOCUMENT_TYPES = (
    "auto",
    "lines",
    "text",
    "html",
    "markdown",
    "srt",
    "vtt",
    "po",
    "docx",
    "pptx",
    "xlsx",
    "odt",
    "odp",
    "epub",
)


@dataclass(frozen=True)
class DocumentConfig:
    """How `mt translate`, the Python API and the server read a document (docs/documents.md)."""

    section = "document"
    input_type: str = option(
        "auto",
        "auto (by extension: .html/.htm, .md, .srt, .vtt, .po; else lines), "
        "lines (one sentence per line), "
        "text (paragraphs at blank lines, split into sentences), html, markdown, srt, vtt or po.",
        cli=True,
    )
    protect: bool = option(
        True,
        "Carry placeholders (%s, {name}), URLs, e-mail addresses and protect_pattern through "
        "untranslated.",
        cli=True,
    )
    protect_pattern: str = option(
        "", "A regular expression whose matches are protected too.", cli=True
    )
    overwrite: bool = option(
        False, "po: translate entries that already have a translation too.", cli=True
    )
    source_lang: str = language(
        "source",
        "its rules split sentences, and a model told its source language (M2M100, NLLB) reads it; "
        "auto: identified per line among the model's; default: the checkpoint's.",
        cli=True,
    )

    def __post_init__(self) -> None:
        _check(
            self.input_type in DOCUMENT_TYPES,
            f"document.input_type {self.input_type!r} is not a document type; use one of "
            f"{', '.join(DOCUMENT_TYPES)}",
        )


@dataclass(frozen=True)
class DoctorConfig:
    """`mt doctor`'s limits (and those of the checks `mt train` runs first)."""

    section = "doctor"
    max_chars: int = option(1000, "Lines longer than this many characters are reported.", cli=True)
    max_ratio: float = option(
        3.0, "Length ratios this many times off the corpus median are reported.", cli=True
    )


@dataclass(frozen=True)
class ServeConfig:
    """`mt serve`'s address, limits and batching: a property of the server, not of the model."""

    section = "serve"
    host: str = option(
        "127.0.0.1", "Address to listen on; loopback unless told otherwise.", cli=True
    )
    port: int = option(
        8000, "Port to listen on (0: any free one; the URL printed says which).", cli=True
    )
    threads: int = option(
        0, "CPU threads decoding uses (0: PyTorch's default, one per core).", cli=True
    )
    max_batch_tokens: int = option(
        2048, "Source tokens merged into one decoding batch, across requests.", cli=True
    )
    max_wait_ms: float = option(
        50.0, "At most this long a batch waits for other requests to join it.", cli=True
    )
    batch_gap_ms: float = option(
        2.0, "A batch starts sooner once no request has come for this long.", cli=True
    )
    running_batches: bool = option(
        False,
        "Requests join a batch being decoded between two decoder steps, each answered as its own "
        "sentences end (off: a batch is decoded whole, then answered; faster today).",
        cli=True,
    )
    join_every: int = option(
        4,
        "With running_batches: decoder steps between two joins; the requests queued meanwhile "
        "join together (one encoder call and one copy of the batch's state for all).",
        cli=True,
    )
    max_request_lines: int = option(
        1000, "Lines one request may hold; more is refused with 413.", cli=True
    )
    max_body_bytes: int = option(
        1 << 20, "Bytes one request body may hold; more is refused with 413.", cli=True
    )
    max_beam: int = option(
        64, "Largest beam, and n-best, one request may ask for; more is refused with 422.", cli=True
    )
    max_queue_lines: int = option(
        4000, "Lines that may wait; past this requests get 503 with Retry-After.", cli=True
    )
    shutdown_s: float = option(
        8.0, "On SIGTERM: seconds the requests in flight get to finish.", cli=True
    )
    source_lang: str = language(
        "source",
        "for a checkpoint that records none, what /languages offers; for one told its source "
        "(NLLB, M2M100), with serve.target_lang, the direction of requests that name none.",
        cli=True,
    )
    target_lang: str = language(
        "target",
        "for a model of several, its target token (>>en<<, <2en>, NLLB's eng_Latn) is read with "
        "each line unless a request names another; for a checkpoint that records none, what "
        "/languages offers.",
        cli=True,
    )
    max_chars: int = option(
        5000,
        "Characters one text may hold (a line of the JSON API, LibreTranslate's q, DeepL's text); "
        "more is refused.",
        cli=True,
    )
    # Small enough that a single line waits for one slice of a large neighbour, not all of it;
    # benchmarks/serve_neighbour.py compares slice sizes.
    slice_cost: int = option(
        1024,
        "Source tokens x beam of one request decoded in one turn: a larger request is decoded in "
        "slices, in turn with the others, so it delays a small one by one slice at most (0: "
        "whole requests).",
        cli=True,
    )
    express_cost: int = option(
        1024,
        "Source tokens x beam up to which a request takes the express lane: decoded between two "
        "steps of larger requests' searches, never after them (0: one lane).",
        cli=True,
    )
    max_request_cost: int = option(
        2_000_000,
        "Characters x beam one request may cost (all its texts); more is refused with 413.",
        cli=True,
    )
    req_limit: int = option(
        0,
        "Requests per minute one client (its API key, else its address) may make; "
        "more get 429 (0: no limit).",
        cli=True,
    )
    char_limit: int = option(
        0,
        "Characters one request may hold, all its texts together; "
        "more is refused with 413 (0: no limit).",
        cli=True,
    )
    api_keys: str = option(
        "",
        "A file of API keys, one per line: every request must then carry one (else 403).",
        cli=True,
    )
    models: str = option(
        "",
        "A folder of models to serve (NAME.pt files and run folders' best.pt), each by the "
        "languages it records; requests are routed by their languages.",
        cli=True,
    )
    max_loaded: int = option(
        0, "Models loaded at once; past it the least recently used is unloaded (0: all).", cli=True
    )
    max_memory_mb: int = option(
        0,
        "Megabytes of model files loaded at once; "
        "past it the least recently used is unloaded (0: no cap).",
        cli=True,
    )
    pivot_lang: str = option(
        "en",
        "A pair no model translates goes through this language, by two models (empty: never).",
        cli=True,
    )
    glossaries: str = option(
        "",
        "A folder of glossaries (NAME.tsv: `source term<TAB>target term` lines) that DeepL's "
        "glossary_id names.",
        cli=True,
    )
    cache_size: int = option(
        0, "Translations kept in memory, answering exact repeats (0: none).", cli=True
    )
    char_quota: int = option(
        0,
        "Characters one API key (or all requests without one) may have translated; past it, "
        "refused (0: none).",
        cli=True,
    )
    # Off by default: with "*", any web page the user visits could read what the local server
    # translates.
    cors_origins: tuple[str, ...] = option(
        (),
        "Web origins whose pages may call the API from a browser (comma-separated; * for any, as "
        "LibreTranslate).",
        cli=True,
    )

    def __post_init__(self) -> None:
        _check(
            0 <= self.port <= 65535,
            f"serve.port must be 0 (any free port) to 65535, not {self.port}",
        )
        for field in ("source_lang", "target_lang", "pivot_lang"):
            code = getattr(self, field)
            _check(
                not code or re.fullmatch(r"[A-Za-z0-9_-]+", code) is not None,
                f"serve.{field} {code!r} is not a language code; give one such as de, en or pt_BR",
            )
        for name in (
            "max_batch_tokens",
            "max_request_lines",
            "max_body_bytes",
            "max_beam",
            "max_queue_lines",
            "max_chars",
            "max_request_cost",
        ):
            _check(
                getattr(self, name) >= 1,
                f"serve.{name} must be at least 1, not {getattr(self, name)}",
            )
        _check(self.max_wait_ms >= 0, "serve.max_wait_ms must not be negative")
        _check(self.batch_gap_ms >= 0, "serve.batch_gap_ms must not be negative")
        _check(self.join_every >= 1, "serve.join_every must be 1 (every step) or more")
        _check(self.threads >= 0, "serve.threads must be 0 (PyTorch's default) or more")
        for name in (
            "slice_cost",
            "req_limit",
            "char_limit",
            "max_loaded",
            "max_memory_mb",
            "cache_size",
            "char_quota",
            "express_cost",
        ):
            _check(
                getattr(self, name) >= 0,
                f"serve.{name} must be 0 (none) or more, not {getattr(self, name)}",
            )
        _check(
            self.max_queue_lines >= self.max_request_lines,
            "serve.max_queue_lines must be at least serve.max_request_lines, or a full request "
            "could never wait",
        )


@dataclass(frozen=True)
class TuningConfig:
    """`mt tune-decoding`'s grid. Tune on validation data only: a choice made on a test set makes
    that test's score a guess at nothing."""

    section = "tuning"
    beams: tuple[int, ...] = option(
        (1, 4, 5, 8), "Beam sizes to try (comma-separated on the command line).", cli=True
    )
    length_penalties: tuple[float, ...] = option(
        (0.6, 1.0, 1.4),
        "Length penalties to try with each beam above 1 (comma-separated).",
        cli=True,
    )

    def __post_init__(self) -> None:
        _check(
            bool(self.beams) and all(b >= 1 for b in self.beams),
            "tuning.beams must be one or more beams of 1+",
        )
        _check(
            bool(self.length_penalties) and all(a >= 0 for a in self.length_penalties),
            "tuning.length_penalties must be one or more penalties of 0 or more",
        )


@dataclass(frozen=True)
class QuickstartConfig:
    """`mt quickstart`: German->English on Multi30k with configs/multi30k-de-en.yaml's recipe."""

    section = "quickstart"
    max_minutes: float = option(20.0, "Training time, in minutes.", cli=True)
    out: str = option("checkpoints/quickstart-de-en", "Run folder.", cli=True)

    def __post_init__(self) -> None:
        _check(self.max_minutes > 0, "quickstart.max_minutes must be positive")
