"""The `data:` section: the corpora of a run of several directions (a multilingual model)."""

from __future__ import annotations

from dataclasses import dataclass

from mt_cli.config.fields import FROM_SUFFIX, check, language, option


@dataclass(frozen=True)
class PairConfig:
    """One corpus of a multilingual run, a direction: its files and its languages (an entry of
    data.pairs)."""

    src: str = option("", "Training source file, one sentence per line (.gz too).")
    tgt: str = option("", "Its target side, line-aligned.")
    source_lang: str = language("source", FROM_SUFFIX["source"])
    target_lang: str = language("target", FROM_SUFFIX["target"])
    valid_src: str = option(
        "",
        "This pair's validation source; its BLEU is logged and averaged "
        "(none: the pair is not validated).",
    )
    valid_tgt: str = option("", "Its references.")
    weight: float = option(
        1.0,
        "Multiplies the pair's line count in the sampling distribution, before the temperature.",
    )
    tag: str = option(
        "",
        "A token put before each source line of this pair, learnt as a piece of its own: <BT> on "
        "back-translated"
        " pairs tells the model they are synthetic (tagged back-translation, Caswell et al. 2019).",
    )

    def __post_init__(self) -> None:
        for name in ("src", "tgt"):
            check(bool(getattr(self, name)), f"data.pairs: every pair needs {name} (a file)")
        check(
            bool(self.valid_src) == bool(self.valid_tgt),
            "data.pairs: valid_src and valid_tgt go together",
        )
        check(self.weight > 0, f"data.pairs: weight must be positive, not {self.weight}")
        check(
            not any(ch.isspace() for ch in self.tag),
            f"data.pairs: a tag is one token, without spaces: {self.tag!r}",
        )


@dataclass(frozen=True)
class DataConfig:
    """Several corpora in one run: directions of a multilingual model, or corpora of one direction
    (real and back-translated, say). One joint tokenizer over all of them, a target tag (<2de>) on
    every source where the model writes several languages, a pair's own tag (<BT>) on its sources,
    batches drawn from the pairs by their sampling distribution, and validation BLEU per validated
    pair (the best checkpoint by their average)."""

    section = "data"
    pairs: tuple[PairConfig, ...] = option(
        (),
        "The corpora, each {src, tgt, source_lang, target_lang, valid_src, valid_tgt, weight, "
        "tag}; `mt train`'s"
        " --train-src, --train-tgt, --valid-src and --valid-tgt fill one when none are listed.",
    )
    temperature: float = option(
        1.0,
        "Sampling temperature across pairs: a pair is drawn with probability proportional to "
        "(its share of the lines)^(1/T), for batches and for the tokenizer's sample; 1: as the "
        "data is, larger: nearer uniform (fairseq and Marian use 5).",
    )

    def __post_init__(self) -> None:
        check(self.temperature > 0, f"data.temperature must be positive, not {self.temperature}")
        files = [(p.src, p.tgt) for p in self.pairs]
        check(len(set(files)) == len(files), "data.pairs: a pair of files is listed twice")
        check(
            not self.pairs or any(p.valid_src for p in self.pairs),
            "data.pairs: give one pair valid_src/valid_tgt",
        )
