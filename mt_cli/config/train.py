"""How a model is trained (`mt train`): batches, budget, schedule, regularisation, checkpoints and
where it runs. Saved in every checkpoint."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mt_cli.config.fields import DEVICE, option
from mt_cli.config.fields import check as _check


@dataclass(frozen=True)
class TrainConfig:
    """`mt train`: batches, budget, schedule, regularisation, checkpoints, and where it runs."""

    section = "train"
    # Small batches: on a CPU more updates in the same time learn more (benchmarks/RESULTS.md).
    batch_tokens: int = option(
        2048,
        "Padded source or target tokens (whichever is larger) per global batch, over all "
        "processes and accumulate shares; 0 (auto, or --batch-tokens auto): 80% of the largest "
        "that fits the GPU.",
        cli=True,
    )
    valid_batch_tokens: int = option(
        4096, "Tokens per validation batch (no gradients, so it may be larger)."
    )
    max_steps: int = option(0, "Stop after this many updates (0: no limit).", cli=True)
    max_epochs: int = option(
        0, "Stop after this many passes over the data (0: no limit).", cli=True
    )
    max_minutes: float = option(
        0.0, "Stop after this much training time, validation included (0: no limit).", cli=True
    )
    lr: float = option(1e-3, "Peak learning rate, reached at the end of warmup.")
    warmup_steps: int = option(400, "Updates of linear warmup from 0 to lr.")
    lr_schedule: str = option(
        "inverse_sqrt",
        "After warmup: inverse_sqrt (the paper's 1/sqrt(step), open-ended); cosine (a half "
        "cosine to 0 when the budget, max_steps, max_minutes or max_epochs, is spent); wsd (hold "
        "the peak, then fall linearly to 0 over the budget's last lr_cooldown fraction). The "
        "last two end a time-limited run annealed.",
    )
    lr_cooldown: float = option(0.2, "wsd: the fraction of the budget spent falling to 0.")
    label_smoothing: float = option(0.1, "Probability mass spread over the vocabulary in the loss.")
    rdrop: float = option(
        0.0,
        "R-Drop's alpha (0: off): each batch runs twice, under two dropout masks, and the loss "
        "adds alpha/4 times the symmetric KL between the two predictions (e.g. 5); an update costs "
        "about twice the compute.",
    )
    clip_norm: float = option(1.0, "Clip the gradient's norm to this (0: no clipping).")
    weight_decay: float = option(0.0, "AdamW weight decay.")
    ema_decay: float = option(
        0.0,
        "0: off. Otherwise validation, best.pt and step<N>.pt use an exponential moving "
        "average of the weights, ema <- decay * ema + (1 - decay) * weights after every update "
        "(e.g. 0.999).",
    )
    adam_betas: tuple[float, float] = option((0.9, 0.98), "Adam's beta1 and beta2.")
    adam_eps: float = option(1e-9, "Adam's epsilon.")
    max_len: int = option(256, "Longest side of a training pair, in tokens.", cli=True)
    long_pairs: str = option(
        "drop", "A pair over max_len: drop it, or truncate both sides to fit.", cli=True
    )
    valid_every: int = option(500, "Updates between validations; a final one always runs.")
    save_every: int = option(
        0, "Also write RUN/last.pt every N updates (0: only at validations).", cli=True
    )
    patience: int = option(
        0, "Stop after N validations without a better BLEU (0: never).", cli=True
    )
    keep_last: int = option(
        0, "Keep the weights of the last K validations as RUN/step<N>.pt.", cli=True
    )
    average_last: int = option(
        0,
        "After training, average the last K validations' weights into RUN/averaged.pt; best.pt "
        "takes it when"
        " it validates at least as well as the best single step (kept as best-step.pt).",
        cli=True,
    )
    tune_beams: tuple[int, ...] = option(
        (),
        "After training, try these beam sizes x tune_length_penalties on the validation set and "
        "make the best"
        " pair best.pt's decoding defaults (empty: decode.beam alone; both empty: no tuning).",
    )
    tune_length_penalties: tuple[float, ...] = option(
        (), "Length penalties tried with tune_beams (empty: decode's)."
    )
    tune_precision: bool = option(
        True,
        "After training, translate the validation set on the CPU in int8 and in fp32: best.pt "
        "keeps decode.precision auto (int8 on a CPU with VNNI or AMX, the fastest path there) "
        "only where int8 loses at most int8_tolerance BLEU, and records fp32 otherwise (and on a "
        "CPU without int8 arithmetic, unchecked).",
    )
    int8_tolerance: float = option(
        0.1, "Validation BLEU int8 decoding may lose against fp32 (tune_precision)."
    )
    compile_after_minutes: float = option(
        10.0,
        "A run that trained at least this many minutes ends by compiling best.pt's decoder step "
        "for this CPU in the precision it decodes in (as `mt compile` does, about 15-30 s), so "
        "that mt translate and mt serve run the compiled step from their first line; shorter "
        "runs leave it to `mt compile`. 0: never.",
    )
    log_every: int = option(50, "Updates between log lines.")
    seed: int = option(1, "Random seed.", cli=True)
    device: str = option(
        DEVICE, "auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps.", cli=True
    )
    amp: str = option(
        "auto",
        "Mixed precision: auto (bf16 on CUDA; on a CPU with bf16 arithmetic and d_model >= 256, "
        "bf16 or fp32, whichever trains the run's batches faster, timed when it starts and "
        "kept on resume; else fp32, as in a deterministic run), bf16, fp16 (loss-scaled) or off.",
    )
    threads: int = option(0, "CPU threads (0: PyTorch's default).")
    on_bad_utf8: str = option(
        "error",
        "Training bytes not in UTF-8: error (names file and line), skip the pair, or replace.",
        cli=True,
    )
    max_nonfinite: int = option(
        5,
        "A step whose loss or gradient is not finite is skipped; this many in a row stop the run.",
    )
    accumulate: int = option(
        1,
        "Cut each global batch into K shares run one after another (less memory, the same update).",
        cli=True,
    )
    workers: int = option(1, "Processes that tokenize the corpus into its cache.", cli=True)
    tensorboard: bool = option(False, "Also write TensorBoard events to RUN/tensorboard.", cli=True)
    compile: str = option(
        "auto",
        "torch.compile the training step: true, false, or auto (on CUDA, compiled or eager, "
        "whichever trains the run's batches faster, timed when it starts and kept on resume; "
        "eager on a CPU, where the compiled step measured slower). Eager if compiling fails.",
    )
    dist_timeout_s: float = option(
        1800.0,
        "Under torchrun: seconds a process waits for the others before giving up.",
        cli=True,
        flag="--dist-timeout",
    )
    doctor: bool = option(True, "Log `mt doctor`'s warnings about the data before training.")
    deterministic: bool = option(
        False,
        "Deterministic kernels: on CUDA the same seed gives the same run, at some cost in speed.",
        cli=True,
    )
    init: str = option(
        "",
        "Fine-tune: start from this checkpoint (mt's or imported): its model, weights and "
        "tokenizer; optimizer, schedule and step start fresh.",
        cli=True,
    )
    freeze_embeddings: bool = option(
        False, "With init: keep the embeddings (and the output layer tied to them) fixed.", cli=True
    )
    freeze_encoder: bool = option(False, "With init: keep the encoder fixed.", cli=True)
    init_layers: str = option(
        "",
        "With init: keep ENC+DEC of its layers (e.g. 4+1), evenly spaced from its first to its "
        "last (one: the first), so a smaller student starts from its teacher (shrink and "
        "fine-tune); empty: all of them.",
        cli=True,
    )
    shortlist_per_source: int = option(
        10,
        "Vocabulary shortlist saved in checkpoints: target pieces per source piece (0: none).",
    )
    shortlist_frequent: int = option(
        100, "Vocabulary shortlist: the most frequent target pieces, always allowed."
    )

    def __post_init__(self) -> None:
        self._check_batches()
        self._check_schedule()
        self._check_budget()
        self._check_checkpoints()
        self._check_start()
        self._check_runtime()

    @property
    def budgeted(self) -> bool:
        """A limit ends the run (updates, minutes or passes): what a decaying schedule decays over
        and what the progress bar shows a fraction of (train/budget.py)."""
        return self.max_steps > 0 or self.max_minutes > 0 or self.max_epochs > 0

    def _check_batches(self) -> None:
        """What a batch holds and how the corpus becomes batches."""
        _check(self.batch_tokens >= 0, "train.batch_tokens must be positive (or 0: auto, on CUDA)")
        _check(self.valid_batch_tokens > 0, "train.valid_batch_tokens must be positive")
        _check(self.max_len > 1, "train.max_len must be at least 2")
        _check(
            self.long_pairs in ("drop", "truncate"),
            f"train.long_pairs must be drop or truncate, not {self.long_pairs!r}",
        )
        _check(
            self.on_bad_utf8 in ("error", "skip", "replace"),
            f"train.on_bad_utf8 must be error, skip or replace, not {self.on_bad_utf8!r}",
        )
        _check(
            self.accumulate >= 1 and self.workers >= 1,
            "train.accumulate and train.workers must be at least 1",
        )

    def _check_budget(self) -> None:
        for name in ("max_steps", "max_epochs", "max_minutes"):
            _check(getattr(self, name) >= 0, f"train.{name} must not be negative")
        _check(
            self.lr_schedule == "inverse_sqrt" or self.budgeted,
            f"train.lr_schedule {self.lr_schedule} needs a budget to decay over:"
            " set max_steps, max_minutes or max_epochs",
        )

    def _check_schedule(self) -> None:
        """The learning rate over the run and the loss's regularisers."""
        _check(self.lr > 0, "train.lr must be positive")
        for name in ("warmup_steps", "weight_decay"):
            _check(getattr(self, name) >= 0, f"train.{name} must not be negative")
        _check(
            self.lr_schedule in ("inverse_sqrt", "cosine", "wsd"),
            f"train.lr_schedule must be inverse_sqrt, cosine or wsd, not {self.lr_schedule!r}",
        )
        _check(0.0 < self.lr_cooldown <= 1.0, "train.lr_cooldown must be in (0, 1]")
        _check(0.0 <= self.label_smoothing < 1.0, "train.label_smoothing must be in [0, 1)")
        _check(self.rdrop >= 0.0, "train.rdrop must be 0 (off) or positive")
        _check(0.0 <= self.ema_decay < 1.0, "train.ema_decay must be in [0, 1)")

    def _check_checkpoints(self) -> None:
        """Validation, logging, the checkpoints kept and what best.pt is tuned with."""
        _check(
            self.valid_every > 0 and self.log_every > 0,
            "train.valid_every and log_every must be positive",
        )
        for name in ("patience", "keep_last", "save_every", "average_last"):
            _check(getattr(self, name) >= 0, f"train.{name} must not be negative")
        _check(self.average_last != 1, "train.average_last must be 0 (off) or at least 2")
        _check(all(b >= 1 for b in self.tune_beams), "train.tune_beams must all be at least 1")
        _check(
            all(a >= 0 for a in self.tune_length_penalties),
            "train.tune_length_penalties must not be negative",
        )
        _check(
            self.shortlist_per_source >= 0 and self.shortlist_frequent >= 0,
            "train.shortlist_per_source and train.shortlist_frequent must be 0 or more",
        )

    def _check_start(self) -> None:
        """Starting from another model's weights."""
        _check(
            not self.init_layers
            or re.fullmatch(r"[1-9][0-9]*\+[1-9][0-9]*", self.init_layers) is not None,
            "train.init_layers must be encoder+decoder layer counts such as 4+1, not "
            f"{self.init_layers!r}",
        )
        _check(
            not self.init_layers or bool(self.init),
            "train.init_layers keeps layers of train.init: give it too",
        )

    def _check_runtime(self) -> None:
        """Where and how the run computes."""
        _check(
            self.device in ("auto", "cpu", "cuda", "mps") or self.device.startswith("cuda:"),
            f"train.device must be auto, cpu, cuda or mps, not {self.device!r}",
        )
        _check(
            self.amp in ("auto", "bf16", "fp16", "off"),
            f"train.amp must be auto, bf16, fp16 or off, not {self.amp!r}",
        )
        _check(
            self.compile in ("auto", "true", "false"),
            f"train.compile must be auto, true or false, not {self.compile!r}",
        )
        _check(self.dist_timeout_s > 0, "train.dist_timeout_s must be positive")
        _check(self.max_nonfinite >= 1, "train.max_nonfinite must be at least 1")
