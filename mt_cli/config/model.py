"""The model's shape and its tokenizer: what a checkpoint needs to rebuild the network and read
its text."""

from __future__ import annotations

from dataclasses import dataclass

from mt_cli.config.fields import ACTIVATIONS, option
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
        "Marian models), tensor2tensor (pos/10000^(i/(d/2-1)), as Marian's own C++: models "
        "imported from Marian's files) or fairseq (tensor2tensor's from position 2, as M2M100 "
        "and NLLB read it).",
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
