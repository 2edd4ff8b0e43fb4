"""SentencePiece subwords: training, encoding, decoding, and the model bytes a checkpoint
carries."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from mt_cli.config import TokenizerConfig
from mt_cli.data.language_tokens import LanguageTokens
from mt_cli.data.languages import resolve_language
from mt_cli.errors import MtError
from mt_cli.files import atomic_write_bytes
from mt_cli.scripts import is_mostly_cjk

# Fixed special ids, the same in every mt tokenizer, so the model never has to look them up.
PAD, UNK, BOS, EOS = 0, 1, 2, 3

JOINT_FILE, SRC_FILE, TGT_FILE = "joint.model", "src.model", "tgt.model"


class Tokenizer:
    """One joint SentencePiece model, or one for each side."""

    def __init__(self, src_model: bytes, tgt_model: bytes | None = None) -> None:
        self.joint = tgt_model is None
        self._src_bytes = src_model
        self._tgt_bytes = tgt_model
        self.src = _load_sp(src_model)
        self.tgt = self.src if tgt_model is None else _load_sp(tgt_model)
        self._tags: dict[str, int] | None = None  # target_tags, worked out when first asked for

    def __reduce__(self) -> tuple[type, tuple[bytes, bytes | None]]:
        # Pickled as its model bytes, for the tokenizing worker processes.
        return (Tokenizer, (self._src_bytes, self._tgt_bytes))

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        """Source ids end with EOS and have no BOS, as Marian's tokenizer makes them."""
        return [ids + [EOS] for ids in self.src.encode(lines)]

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        """Target ids without BOS/EOS; training adds them when shifting."""
        return self.tgt.encode(lines)

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        return self.tgt.decode(ids)

    def src_pieces(self, line: str) -> list[str]:
        return self.src.encode(line, out_type=str) + ["</s>"]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return self.tgt.id_to_piece(ids)

    def vocabulary(self, side: str) -> list[str]:
        """Every piece of one side ("source" or "target"), in id order."""
        sp = self.src if side == "source" else self.tgt
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]

    # A target-language tag a source line starts with (Johnson et al. 2017); MarianVocab's are
    # >>de<<.
    TAG = re.compile(r"<2([A-Za-z0-9_-]+)>")

    def target_tags(self) -> dict[str, int]:
        """The target-language tags of the source vocabulary: language code -> source id."""
        if self._tags is None:
            matches = ((self.TAG.fullmatch(p), i) for i, p in enumerate(self.vocabulary("source")))
            self._tags = {m.group(1): i for m, i in matches if m}
        return self._tags

    def languages(self) -> tuple[list[str], list[str]]:
        """The language codes the model is told by tokens: (sources, targets); empty when none."""
        return [], list(self.target_tags())

    def language_tokens(self, source: str = "", target: str = "") -> LanguageTokens:
        """The ids that tell the model a direction: the target's tag before each source line (a
        model of target tags is not told its source). `target` "" when the model has no tags."""
        tags = self.target_tags()
        if not target:
            if tags:
                langs = f"{len(tags)} languages ({', '.join(list(tags)[:20])})"
                raise MtError(f"the model writes {langs}; name the target language (target_lang)")
            return LanguageTokens()
        if not tags:
            raise MtError(
                f"target language {target!r}: the model has no target-language tokens; "
                "it writes one language (give no target_lang)"
            )
        code = resolve_language(target, list(tags), "target language")
        return LanguageTokens(source=(tags[code],), tags=frozenset(tags.values()))

    def to_state(self) -> dict[str, bytes]:
        if self.joint:
            return {"joint": self._src_bytes}
        assert self._tgt_bytes is not None  # not joint: there is a target model
        return {"src": self._src_bytes, "tgt": self._tgt_bytes}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Tokenizer:
        if state.get("kind") == "marian":  # an imported Hugging Face Marian model's vocabulary
            from mt_cli.data.marian_vocab import MarianVocab

            return MarianVocab({k: v for k, v in state.items() if k != "kind"})
        if state.get("kind") == "m2m100":  # an imported M2M100 or NLLB-200 model's vocabulary
            from mt_cli.data.m2m_vocab import M2MVocab

            return M2MVocab({k: v for k, v in state.items() if k != "kind"})
        if "joint" in state:
            return cls(state["joint"])
        return cls(state["src"], state["tgt"])

    def save(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, data in self.to_state().items():
            atomic_write_bytes(out_dir / f"{name}.model", data)

    @classmethod
    def load(cls, directory: Path) -> Tokenizer:
        if not directory.is_dir():
            raise MtError(
                f"{directory}: tokenizer folder not found; train one with `mt tokenizer train`"
            )
        if (directory / JOINT_FILE).is_file():
            return cls((directory / JOINT_FILE).read_bytes())
        if (directory / SRC_FILE).is_file() and (directory / TGT_FILE).is_file():
            return cls((directory / SRC_FILE).read_bytes(), (directory / TGT_FILE).read_bytes())
        raise MtError(f"{directory}: holds neither {JOINT_FILE} nor {SRC_FILE} + {TGT_FILE}")


def _load_sp(model: bytes) -> spm.SentencePieceProcessor:
    sp = spm.SentencePieceProcessor()
    try:
        sp.load_from_serialized_proto(model)
    except Exception as e:  # sentencepiece raises plain RuntimeError/OSError on bad bytes
        raise MtError(f"not a SentencePiece model ({e})") from None
    return sp


def train_sentencepiece(
    lines: list[str], cfg: TokenizerConfig, symbols: Sequence[str] = ()
) -> bytes:
    """Train one SentencePiece model in memory and return its serialized bytes; `symbols` (target
    tags such as <2de>) are pieces of their own, never split."""
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise MtError("cannot train a tokenizer on an empty corpus")
    coverage = cfg.character_coverage
    if coverage is None:
        coverage = 0.9995 if is_mostly_cjk(lines) else 1.0
    model = io.BytesIO()
    try:
        _train_spm(lines, model, cfg, coverage, symbols)
    except RuntimeError as e:
        # SentencePiece fails when the vocabulary cannot even hold the corpus's characters.
        if "required_chars" not in str(e):
            raise
        needed = str(e).split(" vs ")[-1].split(".")[0]
        raise MtError(
            f"tokenizer.vocab_size {cfg.vocab_size} is too small: this text needs {needed} pieces "
            "for its characters"
            " alone; raise tokenizer.vocab_size or lower tokenizer.character_coverage"
        ) from None
    return model.getvalue()


def _train_spm(
    lines: list[str],
    model: io.BytesIO,
    cfg: TokenizerConfig,
    coverage: float,
    symbols: Sequence[str] = (),
) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=cfg.vocab_size,
        model_type=cfg.model_type,
        character_coverage=coverage,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        pad_piece="<pad>",
        unk_piece="<unk>",
        bos_piece="<s>",
        eos_piece="</s>",
        # Small corpora cannot fill a large vocabulary; take what they give instead of failing.
        hard_vocab_limit=False,
        input_sentence_size=2_000_000,
        shuffle_input_sentence=True,
        num_threads=2,
        minloglevel=2,
        user_defined_symbols=",".join(symbols),  # none when empty
    )


def train_tokenizer(
    src_lines: list[str], tgt_lines: list[str], cfg: TokenizerConfig, tags: Sequence[str] = ()
) -> Tokenizer:
    """`tags`: a multilingual model's target tags (<2de>), pieces of the source side's model."""
    if cfg.joint:
        return Tokenizer(train_sentencepiece(src_lines + tgt_lines, cfg, tags))
    if tags:
        return Tokenizer(
            train_sentencepiece(src_lines, cfg, tags), train_sentencepiece(tgt_lines, cfg)
        )
    return Tokenizer(train_sentencepiece(src_lines, cfg), train_sentencepiece(tgt_lines, cfg))
