"""Typed, frozen configuration: model, tokenizer, training and decoding.

Defaults live in the dataclasses below and nowhere else. A config is built in layers:
dataclass defaults <- preset <- YAML file <- CLI options <- `--set a.b=v` overrides,
and each layer is checked when the dataclasses are built.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mt_cli.config_files import build_section, load_yaml, merge, parse_set
from mt_cli.errors import MtError

ACTIVATIONS = ("relu", "gelu", "swish")  # swish is SiLU, x * sigmoid(x), as OPUS-MT models use

# Where a command runs when --device is not given: "auto" picks CUDA, then Apple's MPS, then the CPU.
DEVICE = "auto"


@dataclass(frozen=True)
class ModelConfig:
    """Transformer shape. Laid out like Hugging Face's MarianMTModel so export is a weight copy."""

    d_model: int = 256
    n_heads: int = 4
    ffn_dim: int = 1024
    enc_layers: int = 3
    dec_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    pre_norm: bool = False  # the paper (and Marian) normalise after the residual add
    tie_embeddings: bool = True  # source, target and output share one matrix when the vocab is joint
    max_positions: int = 1024
    # Filled in from the tokenizer when a model is built for training; 0 means "not yet known".
    src_vocab_size: int = 0
    tgt_vocab_size: int = 0
    shared_vocab: bool = True  # one joint tokenizer for both sides
    # What the decoder reads at step 0: "pad", a zero vector (PAD's embedding), as Marian and
    # CTranslate2 start, so exported models decode identically there; "bos" is how checkpoints of
    # format 1 were trained, and they keep it.
    decoder_start: str = "pad"
    # What imported checkpoints (Hugging Face Marian, OPUS-MT) hold: the FFN's activation (relu,
    # gelu, swish), a bias on the output layer, and whether embeddings are scaled by sqrt(d_model).
    activation: str = "relu"
    output_bias: bool = False
    scale_embedding: bool = True

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "ffn_dim", "enc_layers", "dec_layers", "max_positions"):
            _check(getattr(self, name) > 0, f"model.{name} must be positive")
        _check(
            self.d_model % self.n_heads == 0,
            f"model.d_model ({self.d_model}) must be divisible by model.n_heads ({self.n_heads})",
        )
        _check(self.d_model % 2 == 0, "model.d_model must be even for sinusoidal positions")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            _check(0.0 <= getattr(self, name) < 1.0, f"model.{name} must be in [0, 1)")
        _check(self.decoder_start in ("pad", "bos"), f"model.decoder_start must be pad or bos: {self.decoder_start!r}")
        _check(self.activation in ACTIVATIONS, f"model.activation must be relu, gelu or swish, not {self.activation!r}")


@dataclass(frozen=True)
class TokenizerConfig:
    vocab_size: int = 8000
    model_type: str = "unigram"
    joint: bool = True
    # None: 0.9995 when the text is mostly CJK, 1.0 otherwise.
    character_coverage: float | None = None

    def __post_init__(self) -> None:
        _check(self.vocab_size > 0, "tokenizer.vocab_size must be positive")
        _check(
            self.model_type in ("unigram", "bpe"),
            f"tokenizer.model_type must be 'unigram' or 'bpe', not {self.model_type!r}",
        )


@dataclass(frozen=True)
class TrainConfig:
    # Padded source or target tokens per batch, whichever is larger. For the small preset on a
    # 2-core CPU 2048 beat 4096 (more updates in the same time); raise it on a GPU.
    batch_tokens: int = 2048  # per global batch; 0: "auto", 80% of the largest that fits the GPU
    valid_batch_tokens: int = 4096  # validation loss batches: no gradients, so they may be larger
    max_steps: int = 0  # 0: no limit
    max_epochs: int = 0  # 0: no limit
    max_minutes: float = 0.0  # 0: no limit; counts training time, validation included
    lr: float = 1e-3  # peak learning rate, reached at the end of warmup
    warmup_steps: int = 400
    # After warmup: "inverse_sqrt", the paper's 1/sqrt(step) decay, open-ended; "cosine", a half
    # cosine reaching 0 when the run's budget (max_steps, max_minutes or max_epochs, whichever ends
    # first) is spent; "wsd", hold the peak, then fall linearly to 0 over the budget's last
    # `lr_cooldown` fraction. The last two make a time-limited run end annealed.
    lr_schedule: str = "inverse_sqrt"
    lr_cooldown: float = 0.2
    label_smoothing: float = 0.1
    clip_norm: float = 1.0  # 0: no clipping
    weight_decay: float = 0.0
    # 0: off. Otherwise validation, best.pt and step<N>.pt use an exponential moving average of the
    # weights, ema <- decay * ema + (1 - decay) * weights after every update (e.g. 0.999).
    ema_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    max_len: int = 256  # the longest side of a training pair, in tokens
    long_pairs: str = "drop"  # a pair over max_len: "drop" it, or "truncate" both sides to fit
    valid_every: int = 500  # steps between validations; a final one always runs
    save_every: int = 0  # steps between saves of last.pt besides those at validations (0: only those)
    patience: int = 0  # stop after this many validations without a better BLEU; 0: never
    keep_last: int = 0  # also keep the weights of the last K validations as RUN/step<N>.pt
    # After training, average the last K validations' weights into RUN/averaged.pt; when it
    # validates at least as well as the best single step, best.pt takes it (that step: best-step.pt).
    average_last: int = 0
    # After training (and averaging), try these beam sizes x length penalties on the validation set
    # and make the best pair best.pt's decoding defaults (an empty list: decode.beam or
    # decode.length_penalty alone; both empty: no tuning). The test sets never take part.
    tune_beams: tuple[int, ...] = ()
    tune_length_penalties: tuple[float, ...] = ()
    log_every: int = 50
    seed: int = 1
    device: str = DEVICE
    # bf16 autocast: "auto" uses it on CUDA only; whole-model autocast was not reliably faster on
    # the CPUs measured (benchmarks/speed.py gives both).
    amp: str = "auto"
    threads: int = 0  # 0: PyTorch's default
    # Training-data bytes that are not UTF-8: "error" names file and line and stops; "skip" drops
    # those pairs; "replace" keeps them with U+FFFD. Counted in the log either way.
    on_bad_utf8: str = "error"
    # A step whose loss or gradient is not finite is skipped with a warning; this many in a row stop
    # the run (the checkpoints written before stay as they were).
    max_nonfinite: int = 5
    # Each global batch (batch_tokens) is split into accumulate x processes shares; gradients are
    # summed over them, so the update does not depend on how many processes or shares there are.
    accumulate: int = 1
    workers: int = 1  # processes that tokenize the corpus into its cache
    tensorboard: bool = False  # also write TensorBoard events to RUN/tensorboard (pip install tensorboard)
    compile: bool = False  # torch.compile the model for training (falls back to eager if compiling fails)
    dist_timeout_s: float = 1800.0  # under torchrun: how long a rank waits for the others before giving up
    doctor: bool = True  # log `mt doctor`'s warnings about the data before training
    # Deterministic kernels (torch.use_deterministic_algorithms, cuDNN, cuBLAS workspace): on CUDA
    # the same seed then gives the same run, at some cost in speed. The CPU is deterministic anyway.
    deterministic: bool = False
    # Fine-tuning: start from this checkpoint (mt's or imported): its model, weights and tokenizer;
    # optimizer, schedule and step start fresh. Frozen parts keep the checkpoint's weights (the
    # output layer shares the target embeddings, so it stays fixed with them).
    init: str = ""
    freeze_embeddings: bool = False
    freeze_encoder: bool = False
    # A vocabulary shortlist, built from the training pairs and kept in every checkpoint
    # (decode/shortlist.py): each source piece's K most associated target pieces and the F most
    # frequent ones; decoding then scores only those (decode.shortlist). K = 0: no shortlist.
    shortlist_per_source: int = 10
    shortlist_frequent: int = 100

    def __post_init__(self) -> None:
        _check(
            self.shortlist_per_source >= 0 and self.shortlist_frequent >= 0,
            "train.shortlist_per_source and train.shortlist_frequent must be 0 or more",
        )
        _check(self.batch_tokens >= 0, "train.batch_tokens must be positive (or 0: auto, on CUDA)")
        _check(self.valid_batch_tokens > 0, "train.valid_batch_tokens must be positive")
        counts = ("max_steps", "max_epochs", "max_minutes", "warmup_steps", "weight_decay", "patience", "keep_last")
        for name in (*counts, "save_every", "average_last"):
            _check(getattr(self, name) >= 0, f"train.{name} must not be negative")
        _check(self.lr > 0, "train.lr must be positive")
        _check(
            self.long_pairs in ("drop", "truncate"),
            f"train.long_pairs must be drop or truncate, not {self.long_pairs!r}",
        )
        _check(self.accumulate >= 1 and self.workers >= 1, "train.accumulate and train.workers must be at least 1")
        _check(self.dist_timeout_s > 0, "train.dist_timeout_s must be positive")
        _check(self.max_nonfinite >= 1, "train.max_nonfinite must be at least 1")
        _check(
            self.on_bad_utf8 in ("error", "skip", "replace"),
            f"train.on_bad_utf8 must be error, skip or replace, not {self.on_bad_utf8!r}",
        )
        _check(
            self.lr_schedule in ("inverse_sqrt", "cosine", "wsd"),
            f"train.lr_schedule must be inverse_sqrt, cosine or wsd, not {self.lr_schedule!r}",
        )
        _check(
            self.lr_schedule == "inverse_sqrt" or self.max_steps > 0 or self.max_minutes > 0 or self.max_epochs > 0,
            f"train.lr_schedule {self.lr_schedule} needs a budget to decay over:"
            " set max_steps, max_minutes or max_epochs",
        )
        _check(0.0 < self.lr_cooldown <= 1.0, "train.lr_cooldown must be in (0, 1]")
        _check(0.0 <= self.label_smoothing < 1.0, "train.label_smoothing must be in [0, 1)")
        _check(0.0 <= self.ema_decay < 1.0, "train.ema_decay must be in [0, 1)")
        _check(self.max_len > 1, "train.max_len must be at least 2")
        _check(self.average_last != 1, "train.average_last must be 0 (off) or at least 2")
        _check(all(b >= 1 for b in self.tune_beams), "train.tune_beams must all be at least 1")
        _check(all(a >= 0 for a in self.tune_length_penalties), "train.tune_length_penalties must not be negative")
        _check(self.valid_every > 0 and self.log_every > 0, "train.valid_every and log_every must be positive")
        _check(
            self.device in ("auto", "cpu", "cuda", "mps") or self.device.startswith("cuda:"),
            f"train.device must be auto, cpu, cuda or mps, not {self.device!r}",
        )
        _check(
            self.amp in ("auto", "bf16", "fp16", "off"), f"train.amp must be auto, bf16, fp16 or off, not {self.amp!r}"
        )


@dataclass(frozen=True)
class DecodeConfig:
    # "beam" search keeps `beam` hypotheses per sentence; "greedy" takes the most probable token at
    # each step. Beam 1 is greedy search (the same result), and runs as greedy. "sample" draws each
    # token from the distribution below (decode/sampling.py), seeded per line.
    method: str = "beam"
    beam: int = 5
    length_penalty: float = 1.0  # score / length**alpha, as fairseq and Hugging Face do
    max_len_ratio: float = 1.5  # output may run to ratio * source length + max_len_offset tokens
    max_len_offset: int = 10
    batch_size: int = 64  # sentences per decoding batch
    # fp32; bf16 (autocast); int8 (dynamic int8 linear layers, CPU only). benchmarks/speed.py
    # measures each against fp32 in speed and BLEU.
    precision: str = "fp32"
    no_repeat_ngram: int = 0  # N > 0: no token n-gram of size N occurs twice in a hypothesis
    sampling_topk: int = 0  # sample: only from the K most probable tokens (0: all of them)
    sampling_topp: float = 1.0  # sample: only from the fewest tokens whose probability reaches P (1: all)
    temperature: float = 1.0  # sample: from softmax(log p / T)
    seed: int = 0  # sample: the same seed gives the same draws, whatever the batch size
    # Score only a shortlist of target pieces per batch, where the checkpoint holds one
    # (`mt shortlist`, decode/shortlist.py); false: the whole vocabulary at every step.
    shortlist: bool = True

    def __post_init__(self) -> None:
        _check(self.no_repeat_ngram >= 0, f"decode.no_repeat_ngram must be 0 (off) or more, not {self.no_repeat_ngram}")
        _check(
            self.method in ("beam", "greedy", "sample"),
            f"decode.method must be beam, greedy or sample, not {self.method!r}",
        )
        _check(
            self.method != "sample" or self.beam == 1,
            f"sampling draws one token at a time and takes no beam (beam is {self.beam}): drop --beam or use --beam 1",
        )
        _check(self.sampling_topk >= 0, "decode.sampling_topk must be 0 (all tokens) or more")
        _check(0.0 < self.sampling_topp <= 1.0, "decode.sampling_topp must be in (0, 1]")
        _check(self.temperature > 0, "decode.temperature must be positive")
        _check(self.beam >= 1, f"decode.beam must be at least 1, not {self.beam}")
        _check(
            self.precision in ("fp32", "bf16", "int8"),
            f"decode.precision must be fp32, bf16 or int8, not {self.precision!r}",
        )
        _check(self.batch_size >= 1, "decode.batch_size must be at least 1")
        _check(self.max_len_ratio > 0, "decode.max_len_ratio must be positive")
        _check(self.length_penalty >= 0, "decode.length_penalty must not be negative")

    @property
    def search_method(self) -> str:
        """The search that runs: sample, greedy (method greedy or a beam of 1), or beam."""
        if self.method == "sample":
            return "sample"
        return "greedy" if self.method == "greedy" or self.beam == 1 else "beam"


@dataclass(frozen=True)
class OutputConfig:
    """What `mt translate` writes for each input line. A property of the call, not of the model:
    not part of Config, not saved in checkpoints."""

    format: str = "text"  # text: the best translation; jsonl: one JSON object with its score
    nbest: int = 1  # jsonl: the K best hypotheses too, best first (K at most the beam)
    token_scores: bool = False  # jsonl: each output piece with its log-probability
    alignment: bool = False  # jsonl: per output piece, the source piece the last layer attends to most

    def __post_init__(self) -> None:
        if self.format not in ("text", "jsonl"):
            raise MtError(f"--format must be text or jsonl, not {self.format!r}")
        if self.nbest < 1:
            raise MtError(f"--nbest must be at least 1, not {self.nbest}")
        if self.format == "text" and (self.nbest > 1 or self.token_scores or self.alignment):
            raise MtError(
                "--nbest, --token-scores and --alignment need --format jsonl (text is one line per input line)"
            )


@dataclass(frozen=True)
class DoctorConfig:
    """`mt doctor`'s limits (and those of the checks `mt train` runs first)."""

    max_chars: int = 1000  # lines longer than this are reported
    max_ratio: float = 3.0  # length ratios this many times off the corpus median are reported


@dataclass(frozen=True)
class ServeConfig:
    """`mt serve`'s address, limits and batching: a property of the server, not of the model."""

    host: str = "127.0.0.1"  # loopback only, unless told otherwise
    port: int = 8000
    max_batch_tokens: int = 2048  # source tokens merged into one decoding batch, from all requests
    max_wait_ms: float = 50.0  # at most this long a batch waits for more requests to join it
    batch_gap_ms: float = 2.0  # ... and it starts sooner once no request has come for this long
    max_request_lines: int = 1000
    max_body_bytes: int = 1 << 20  # 1 MiB
    max_queue_lines: int = 4000  # lines waiting beyond this are refused with 503 and Retry-After
    shutdown_s: float = 8.0  # SIGTERM: time the requests in flight get to finish

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise MtError(f"--port must be 0 (any free port) to 65535, not {self.port}")
        for name in ("max_batch_tokens", "max_request_lines", "max_body_bytes", "max_queue_lines"):
            if getattr(self, name) < 1:
                raise MtError(f"--{name.replace('_', '-')} must be at least 1, not {getattr(self, name)}")
        if self.max_wait_ms < 0 or self.batch_gap_ms < 0:
            raise MtError("--max-wait-ms and --batch-gap-ms must not be negative")
        if self.max_queue_lines < self.max_request_lines:
            raise MtError("--max-queue-lines must be at least --max-request-lines, or a full request could never wait")


# What `mt evaluate` scores when --metrics is not given.
DEFAULT_METRICS = ("bleu", "chrf")


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


# Presets override ModelConfig defaults only; everything else keeps its one default above.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {"model": {"d_model": 32, "n_heads": 2, "ffn_dim": 64, "enc_layers": 1, "dec_layers": 1}},
    "small": {"model": {}},  # the dataclass defaults: 256-d, 4 heads, 3+3 layers, for Multi30k on a CPU
    "base": {"model": {"d_model": 512, "n_heads": 8, "ffn_dim": 2048, "enc_layers": 6, "dec_layers": 6}},
    "big": {
        "model": {"d_model": 1024, "n_heads": 16, "ffn_dim": 4096, "enc_layers": 6, "dec_layers": 6, "dropout": 0.3}
    },
}


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise MtError(f"bad config: {message}")


def to_dict(cfg: Config) -> dict[str, Any]:
    """Plain dict (lists for tuples) for checkpoints, YAML and JSON."""

    def plain(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, tuple):
            return [plain(v) for v in x]
        return x

    return plain(dataclasses.asdict(cfg))


def to_yaml(cfg: Config) -> str:
    return importlib.import_module("yaml").safe_dump(to_dict(cfg), sort_keys=False)  # imported on first use


def from_dict(data: dict[str, Any], where: str = "config") -> Config:
    """Build and check a Config from nested dicts; unknown keys are errors, not silently ignored."""
    sections = {}
    for f in dataclasses.fields(Config):
        section_cls = _section_classes()[f.name]
        values = dict(data.get(f.name) or {})
        sections[f.name] = build_section(section_cls, values, f"{where}: {f.name}")
    unknown = set(data) - set(sections) - {"preset"}
    if unknown:
        raise MtError(f"{where}: unknown section(s) {sorted(unknown)}; expected {sorted(sections)}")
    return Config(**sections)


def _section_classes() -> dict[str, type]:
    return {"model": ModelConfig, "tokenizer": TokenizerConfig, "train": TrainConfig, "decode": DecodeConfig}


def build_config(
    preset: str | None = None,
    yaml_path: Path | None = None,
    options: dict[str, Any] | None = None,
    sets: list[str] | None = None,
) -> Config:
    """Layer preset, YAML, CLI options (nested dict) and --set overrides, then check the result."""
    data: dict[str, Any] = {}
    file_data = load_yaml(yaml_path) if yaml_path else {}
    preset = preset or file_data.get("preset")
    if preset is not None:
        if preset not in PRESETS:
            raise MtError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        data = merge(data, PRESETS[preset])
    data = merge(data, file_data)
    data = merge(data, options or {})
    for item in sets or []:
        data = merge(data, parse_set(item))
    where = str(yaml_path) if yaml_path else "config"
    return from_dict(data, where=f"{where} with the command-line options" if options or sets else where)
