"""The sections a checkpoint saves: the model's shape, its tokenizer, how it was trained and how
it decodes by default."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mt_cli.config.fields import ACTIVATIONS, DEVICE, option
from mt_cli.config.fields import check as _check


@dataclass(frozen=True)
class ModelConfig:
    """Transformer shape. Laid out like Hugging Face's MarianMTModel so export is a weight copy."""

    section = "model"
    d_model: int = option(256, "Width of every layer's input and output (the embedding size).")
    n_heads: int = option(4, "Attention heads per attention layer; must divide d_model.")
    ffn_dim: int = option(1024, "Inner width of each position-wise feed-forward layer.")
    enc_layers: int = option(3, "Encoder layers.")
    dec_layers: int = option(3, "Decoder layers.")
    dropout: float = option(
        0.1, "Dropout on embeddings, sublayer outputs and the feed-forward output."
    )
    attention_dropout: float = option(0.0, "Dropout on attention weights.")
    activation_dropout: float = option(0.0, "Dropout after the feed-forward activation.")
    pre_norm: bool = option(
        False, "Normalise before each sublayer; false: after the residual add (the paper, Marian)."
    )
    tie_embeddings: bool = option(
        True, "Source, target and output share one matrix when the vocabulary is joint."
    )
    max_positions: int = option(1024, "Longest sequence, in pieces, the model reads or writes.")
    src_vocab_size: int = option(
        0, "Source pieces; filled in from the tokenizer (0: not yet known)."
    )
    tgt_vocab_size: int = option(
        0, "Target pieces; filled in from the tokenizer (0: not yet known)."
    )
    shared_vocab: bool = option(True, "One joint tokenizer for both sides.")
    # "pad" starts as Marian and CTranslate2 do, so exported models decode identically at step 0;
    # checkpoints of format 1 were trained with "bos", and keep it.
    decoder_start: str = option(
        "pad",
        "What the decoder reads at step 0: pad (a zero vector, PAD's embedding), bos, or eos "
        "(M2M100, NLLB).",
    )
    activation: str = option(
        "relu", "The feed-forward activation: relu, gelu or swish (SiLU, as OPUS-MT uses)."
    )
    decoder_autoreg: str = option(
        "attention",
        "How a decoder position reads the target before it: attention (causal self-attention, the "
        "paper) or ssru"
        " (a gated recurrence in its place, as Bergamot / Firefox Translations students decode).",
    )
    output_bias: bool = option(
        False, "A bias on the output layer (imported Marian models have one)."
    )
    scale_embedding: bool = option(True, "Scale embeddings by sqrt(d_model), as the paper does.")
    positions: str = option(
        "marian",
        "The sinusoid table: marian (angle pos/10000^(2i/d), as the paper and Hugging Face's "
        "Marian models),"
        " tensor2tensor (pos/10000^(i/(d/2-1)), as Marian's own C++: models imported from Marian's "
        "files) or"
        " fairseq (tensor2tensor's from position 2, as M2M100 and NLLB read it).",
    )
    norm_eps: float = option(
        1e-5,
        "The epsilon each layer norm adds to the variance (1e-5 as PyTorch and Hugging Face; "
        "Marian's is 1e-6).",
    )
    # Not shape, but what the weights mean: the server's /languages and sentence splitting read
    # them.
    source_langs: tuple[str, ...] = option(
        (),
        "Languages the model reads (codes: de, or de,fr); mt train takes them from --src-lang or "
        "the data's suffixes.",
    )
    target_langs: tuple[str, ...] = option(
        (),
        "Languages the model writes (codes); mt train takes them from --tgt-lang or the data "
        "files' suffixes.",
    )

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
        _check(
            self.decoder_start in ("pad", "bos", "eos"),
            f"model.decoder_start must be pad, bos or eos: {self.decoder_start!r}",
        )
        _check(
            self.positions in ("marian", "tensor2tensor", "fairseq"),
            f"model.positions must be marian, tensor2tensor or fairseq: {self.positions!r}",
        )
        _check(0.0 < self.norm_eps < 1.0, f"model.norm_eps must be in (0, 1): {self.norm_eps}")
        _check(
            self.decoder_autoreg in ("attention", "ssru"),
            f"model.decoder_autoreg must be attention or ssru, not {self.decoder_autoreg!r}",
        )
        _check(
            self.activation in ACTIVATIONS,
            f"model.activation must be relu, gelu or swish, not {self.activation!r}",
        )


@dataclass(frozen=True)
class TokenizerConfig:
    """SentencePiece, trained on the training data unless a tokenizer is given."""

    section = "tokenizer"
    vocab_size: int = option(8000, "Pieces in each vocabulary.", cli=True)
    model_type: str = option("unigram", "unigram or bpe.", cli=True)
    joint: bool = option(
        True, "One model for both sides; false: one per side.", cli=True, flag="--joint/--separate"
    )
    character_coverage: float | None = option(
        None,
        "Share of characters the vocabulary covers; default 0.9995 for mostly-CJK text, else 1.0.",
        cli=True,
    )

    def __post_init__(self) -> None:
        _check(self.vocab_size > 0, "tokenizer.vocab_size must be positive")
        _check(
            self.model_type in ("unigram", "bpe"),
            f"tokenizer.model_type must be 'unigram' or 'bpe', not {self.model_type!r}",
        )


@dataclass(frozen=True)
class TrainConfig:
    """`mt train`: batches, budget, schedule, regularisation, checkpoints, and where it runs."""

    section = "train"
    # For the small preset on a 2-core CPU 2048 beat 4096 (more updates in the same time).
    batch_tokens: int = option(
        2048,
        "Padded source or target tokens (whichever is larger) per global batch, over all processes "
        "and"
        " accumulate shares; 0 (auto, or --batch-tokens auto): 80% of the largest that fits the "
        "GPU.",
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
        "After warmup: inverse_sqrt (the paper's 1/sqrt(step), open-ended); cosine (a half cosine "
        "to 0 when the"
        " budget, max_steps, max_minutes or max_epochs, is spent); wsd (hold the peak, then fall "
        "linearly to 0"
        " over the budget's last lr_cooldown fraction). The last two end a time-limited run "
        "annealed.",
    )
    lr_cooldown: float = option(0.2, "wsd: the fraction of the budget spent falling to 0.")
    label_smoothing: float = option(0.1, "Probability mass spread over the vocabulary in the loss.")
    clip_norm: float = option(1.0, "Clip the gradient's norm to this (0: no clipping).")
    weight_decay: float = option(0.0, "AdamW weight decay.")
    ema_decay: float = option(
        0.0,
        "0: off. Otherwise validation, best.pt and step<N>.pt use an exponential moving average of "
        "the"
        " weights, ema <- decay * ema + (1 - decay) * weights after every update (e.g. 0.999).",
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
        "After training, translate the validation set on the CPU in int8 and in fp32: best.pt keeps"
        " decode.precision auto (int8 on a CPU, the fastest path) only where int8 loses at most "
        "int8_tolerance"
        " BLEU, and records fp32 otherwise.",
    )
    int8_tolerance: float = option(
        0.1, "Validation BLEU int8 decoding may lose against fp32 (tune_precision)."
    )
    compile_after_minutes: float = option(
        10.0,
        "A run that trained at least this many minutes ends by compiling best.pt's decoder step "
        "for this CPU"
        " in the precision it decodes in (as `mt compile` does, about 15-30 s), so that mt "
        "translate and mt serve"
        " run the compiled step from their first line; shorter runs leave it to `mt compile`. 0: "
        "never.",
    )
    log_every: int = option(50, "Updates between log lines.")
    seed: int = option(1, "Random seed.", cli=True)
    device: str = option(
        DEVICE, "auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps.", cli=True
    )
    amp: str = option(
        "auto",
        "Mixed precision: auto (bf16 on CUDA; on a CPU with bf16 arithmetic and d_model >= 256, "
        "bf16 or fp32,"
        " whichever trains the run's batches faster, timed when it starts and kept on resume; else "
        "fp32, as in a"
        " deterministic run), bf16, fp16 (with a gradient scaler) or off.",
    )
    threads: int = option(0, "CPU threads (0: PyTorch's default).")
    on_bad_utf8: str = option(
        "error",
        "Training bytes that are not UTF-8: error (names file and line), skip the pair, or "
        "replace.",
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
    compile: bool = option(
        False, "torch.compile the model for training (eager if compiling fails)."
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
        "tokenizer;"
        " optimizer, schedule and step start fresh.",
        cli=True,
    )
    freeze_embeddings: bool = option(
        False, "With init: keep the embeddings (and the output layer tied to them) fixed.", cli=True
    )
    freeze_encoder: bool = option(False, "With init: keep the encoder fixed.", cli=True)
    init_layers: str = option(
        "",
        "With init: keep ENC+DEC of its layers (e.g. 4+1), evenly spaced from its first to its "
        "last (one: the"
        " first), so a smaller student starts from its teacher (shrink and fine-tune); empty: all "
        "of them.",
        cli=True,
    )
    shortlist_per_source: int = option(
        10,
        "Vocabulary shortlist kept in checkpoints: target pieces per source piece (0: no "
        "shortlist).",
    )
    shortlist_frequent: int = option(
        100, "Vocabulary shortlist: the most frequent target pieces, always allowed."
    )

    def __post_init__(self) -> None:
        _check(
            self.shortlist_per_source >= 0 and self.shortlist_frequent >= 0,
            "train.shortlist_per_source and train.shortlist_frequent must be 0 or more",
        )
        _check(self.batch_tokens >= 0, "train.batch_tokens must be positive (or 0: auto, on CUDA)")
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
        _check(self.valid_batch_tokens > 0, "train.valid_batch_tokens must be positive")
        counts = (
            "max_steps",
            "max_epochs",
            "max_minutes",
            "warmup_steps",
            "weight_decay",
            "patience",
            "keep_last",
        )
        for name in (*counts, "save_every", "average_last"):
            _check(getattr(self, name) >= 0, f"train.{name} must not be negative")
        _check(self.lr > 0, "train.lr must be positive")
        _check(
            self.long_pairs in ("drop", "truncate"),
            f"train.long_pairs must be drop or truncate, not {self.long_pairs!r}",
        )
        _check(
            self.accumulate >= 1 and self.workers >= 1,
            "train.accumulate and train.workers must be at least 1",
        )
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
            self.lr_schedule == "inverse_sqrt"
            or self.max_steps > 0
            or self.max_minutes > 0
            or self.max_epochs > 0,
            f"train.lr_schedule {self.lr_schedule} needs a budget to decay over:"
            " set max_steps, max_minutes or max_epochs",
        )
        _check(0.0 < self.lr_cooldown <= 1.0, "train.lr_cooldown must be in (0, 1]")
        _check(0.0 <= self.label_smoothing < 1.0, "train.label_smoothing must be in [0, 1)")
        _check(0.0 <= self.ema_decay < 1.0, "train.ema_decay must be in [0, 1)")
        _check(self.max_len > 1, "train.max_len must be at least 2")
        _check(self.average_last != 1, "train.average_last must be 0 (off) or at least 2")
        _check(all(b >= 1 for b in self.tune_beams), "train.tune_beams must all be at least 1")
        _check(
            all(a >= 0 for a in self.tune_length_penalties),
            "train.tune_length_penalties must not be negative",
        )
        _check(
            self.valid_every > 0 and self.log_every > 0,
            "train.valid_every and log_every must be positive",
        )
        _check(
            self.device in ("auto", "cpu", "cuda", "mps") or self.device.startswith("cuda:"),
            f"train.device must be auto, cpu, cuda or mps, not {self.device!r}",
        )
        _check(
            self.amp in ("auto", "bf16", "fp16", "off"),
            f"train.amp must be auto, bf16, fp16 or off, not {self.amp!r}",
        )


@dataclass(frozen=True)
class DecodeConfig:
    """How translations are searched for. Saved in checkpoints as their defaults; `mt translate`,
    `mt serve` and `Translator.load(path, **fields)` override any of them."""

    section = "decode"
    method: str = option(
        "beam",
        "beam (keep `beam` hypotheses per sentence), greedy (the most probable token at each "
        "step), or sample"
        " (draw each token; implied by a sampling option). Beam 1 is greedy search.",
        cli=True,
    )
    beam: int = option(5, "Beam size; 1 is greedy.", cli=True)
    length_penalty: float = option(
        1.0, "Alpha in score / length**alpha, as fairseq and Hugging Face rank.", cli=True
    )
    max_len_ratio: float = option(
        1.5, "Output may run to max_len_ratio * source length + max_len_offset.", cli=True
    )
    max_len_offset: int = option(10, "Tokens added to the output length limit.", cli=True)
    batch_size: int = option(64, "Sentences decoded together.", cli=True)
    batch_tokens: int = option(
        0,
        "Source tokens decoded together, as well as at most batch_size sentences (0: sentences "
        "only); a"
        " server's batches are cut by the same budget, so each is one search.",
        cli=True,
    )
    precision: str = option(
        "auto",
        "fp32 (the reference), bf16 (weights cast to bf16 once; on a CPU only with bf16 "
        "arithmetic, AVX512-BF16"
        " or AMX), int8 (int8 products, each input row scaled on its own so batching changes no "
        "translation;"
        " CPU only), or auto: picked when the model loads, int8 on a CPU, bf16 on a GPU that has "
        "it, else fp32."
        " mt train checks int8 against fp32 on the validation set and records fp32 where int8 "
        "loses quality"
        " (train.tune_precision).",
        cli=True,
    )
    engine: str = option(
        "auto",
        "How the decoder's step runs: eager (op by op in PyTorch), compiled (compiled ahead of "
        "time for this"
        " CPU, checkpoint and precision, kept beside the checkpoint in CHECKPOINT.compiled/; built "
        "on first use"
        " or by `mt compile`, about 15-30 s, once), or auto: compiled where it is already built, "
        "else eager."
        " step is an older name for eager.",
        cli=True,
    )

    no_repeat_ngram: int = option(
        0, "N > 0: no token n-gram of size N occurs twice in a hypothesis.", cli=True
    )
    sampling_topk: int = option(
        0, "Sample only from the K most probable tokens (0: all).", cli=True
    )
    sampling_topp: float = option(
        1.0, "Sample only from the fewest tokens whose probability reaches P (1: all).", cli=True
    )
    temperature: float = option(1.0, "Sample from softmax(log p / T).", cli=True)
    seed: int = option(
        0, "Sampling seed: the same seed gives the same draws, whatever the batch size.", cli=True
    )
    shortlist: bool = option(
        True,
        "Score only the checkpoint's shortlist of target pieces (where it has one); false: all.",
        cli=True,
    )

    def __post_init__(self) -> None:
        _check(
            self.no_repeat_ngram >= 0,
            f"decode.no_repeat_ngram must be 0 (off) or more, not {self.no_repeat_ngram}",
        )
        _check(
            self.method in ("beam", "greedy", "sample"),
            f"decode.method must be beam, greedy or sample, not {self.method!r}",
        )
        _check(
            self.method != "sample" or self.beam == 1,
            "decode.method sample draws one token at a time and takes no beam (decode.beam is "
            f"{self.beam}):"
            " leave decode.beam out or make it 1",
        )
        _check(self.sampling_topk >= 0, "decode.sampling_topk must be 0 (all tokens) or more")
        _check(0.0 < self.sampling_topp <= 1.0, "decode.sampling_topp must be in (0, 1]")
        _check(self.temperature > 0, "decode.temperature must be positive")
        _check(self.beam >= 1, f"decode.beam must be at least 1, not {self.beam}")
        _check(
            self.precision in ("fp32", "bf16", "int8", "auto"),
            f"decode.precision must be fp32, bf16, int8 or auto, not {self.precision!r}",
        )
        _check(
            self.engine in ("auto", "eager", "compiled", "step"),
            f"decode.engine must be auto, eager or compiled, not {self.engine!r}",
        )
        if self.engine == "step":  # its older name, in configs and checkpoints written before
            object.__setattr__(self, "engine", "eager")
        _check(self.batch_size >= 1, "decode.batch_size must be at least 1")
        _check(self.batch_tokens >= 0, "decode.batch_tokens must be 0 (sentences only) or more")
        _check(self.max_len_ratio > 0, "decode.max_len_ratio must be positive")
        _check(self.length_penalty >= 0, "decode.length_penalty must not be negative")

    @property
    def search_method(self) -> str:
        """The search that runs: sample, greedy (method greedy or a beam of 1), or beam."""
        if self.method == "sample":
            return "sample"
        return "greedy" if self.method == "greedy" or self.beam == 1 else "beam"
