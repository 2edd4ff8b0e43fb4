"""Settings of the data pipeline's commands: `mt clean`, `mt backtranslate` and `mt distill`.
Properties of a call, not of a model: never saved in checkpoints (a student's own training
config is, as any run's)."""

from __future__ import annotations

from dataclasses import dataclass

from mt_cli.config.fields import FROM_SUFFIX, check, language, option

# `mt clean`'s rules, in the order they are tried: removed.tsv names the first that removes a pair.
CLEAN_RULES = (
    "encoding",
    "empty",
    "length",
    "ratio",
    "copy",
    "numbers",
    "urls",
    "symbols",
    "script",
    "language",
    "score",
    "duplicate",
)


@dataclass(frozen=True)
class CleanConfig:
    """`mt clean`: which rules remove a pair, and their limits (docs/pipeline.md)."""

    section = "clean"
    rules: tuple[str, ...] = option(
        CLEAN_RULES,
        "The rules to apply: encoding (bytes not UTF-8), empty, length, ratio, copy (target = "
        "source), numbers (digits that differ), urls, symbols, script (letters not in the "
        "language's script), language (identified as another language), score (needs "
        "clean.score_checkpoint) and duplicate (normalised).",
    )
    source_lang: str = language("source", FROM_SUFFIX["source"], cli=True)
    target_lang: str = language("target", FROM_SUFFIX["target"], cli=True)
    max_words: int = option(
        150,
        "length: the most words a side may have (each Chinese or Japanese character one).",
        cli=True,
    )
    max_ratio: float = option(
        3.0, "ratio: the most (longer + 1) / (shorter + 1) words may be.", cli=True
    )
    max_symbol_ratio: float = option(
        0.5,
        "symbols: the largest share of a side's characters (spaces aside) "
        "that are not letters or digits.",
    )
    min_script_ratio: float = option(
        0.5,
        "script: the smallest share of a side's letters in its language's script "
        "(Latin for de, Han for zh).",
    )
    language_min_letters: int = option(
        20, "language: sides with fewer letters are not identified (too short to tell reliably)."
    )
    language_min_confidence: float = option(
        0.25,
        "language: a side is removed when lingua's confidence (0-1) in its language is below "
        "this and another language's is higher (English names in a German sentence leave it at "
        "0.3-0.4; an English sentence scores 0.04-0.19 as German).",
    )
    language_others: tuple[str, ...] = option(
        (),
        "language: more languages a side may be identified as (each costs time), besides the "
        "pair's two, which alone catch swapped and copied sides.",
    )
    score_checkpoint: str = option(
        "", "score: a source-to-target model; pairs it finds unlikely are removed.", cli=True
    )
    score_reverse_checkpoint: str = option(
        "",
        "score: a target-to-source model too; a pair's score is then the mean of both directions'.",
        cli=True,
    )
    max_cross_entropy: float = option(
        5.0,
        "score: the largest cross-entropy per target token kept "
        "(nats; mt score --normalize, negated).",
        cli=True,
    )
    batch_lines: int = option(2000, "Pairs read, checked and scored at a time.")

    def __post_init__(self) -> None:
        unknown = [r for r in self.rules if r not in CLEAN_RULES]
        check(
            not unknown,
            f"clean.rules: unknown rule(s) {unknown}; the rules are {', '.join(CLEAN_RULES)}",
        )
        check(self.max_words >= 1, f"clean.max_words must be at least 1, not {self.max_words}")
        check(self.max_ratio >= 1, f"clean.max_ratio must be at least 1, not {self.max_ratio}")
        for name in ("max_symbol_ratio", "min_script_ratio", "language_min_confidence"):
            check(
                0 <= getattr(self, name) <= 1,
                f"clean.{name} must be between 0 and 1, not {getattr(self, name)}",
            )
        check(
            self.max_cross_entropy > 0,
            f"clean.max_cross_entropy must be positive, not {self.max_cross_entropy}",
        )
        check(
            self.batch_lines >= 1, f"clean.batch_lines must be at least 1, not {self.batch_lines}"
        )
        check(
            not self.score_reverse_checkpoint or bool(self.score_checkpoint),
            "clean.score_reverse_checkpoint needs clean.score_checkpoint (the forward model) too",
        )


@dataclass(frozen=True)
class DistillConfig:
    """`mt distill`: how the teachers' translations become the student's training data (the
    student's own settings are `mt train`'s: model, train, decode)."""

    section = "distill"
    teacher_beam: int = option(
        0, "Beam the teachers translate with (0: the first teacher's own).", cli=True
    )
    nbest: int = option(
        1,
        "Translations kept per source line, each a training pair "
        "(sequence-level KD keeps the best only).",
        cli=True,
    )
    max_cross_entropy: float = option(
        0.0,
        "Teacher translations whose cross-entropy per token (nats, under the teachers) is above "
        "this are left out (0: none are).",
        cli=True,
    )
    original_weight: float = option(
        0.0,
        "The original pairs are trained on beside the teachers', with this weight in the "
        "sampling distribution (0: the teachers' alone).",
        cli=True,
    )
    ct2_quantization: str = option(
        "int8", "The CTranslate2 export's quantization (CTranslate2's names; none: fp32)."
    )

    def __post_init__(self) -> None:
        check(
            self.teacher_beam >= 0,
            f"distill.teacher_beam must be 0 (the teacher's) or more, not {self.teacher_beam}",
        )
        check(self.nbest >= 1, f"distill.nbest must be at least 1, not {self.nbest}")
        check(
            self.max_cross_entropy >= 0,
            "distill.max_cross_entropy must be 0 (keep all) or positive",
        )
        check(self.original_weight >= 0, "distill.original_weight must be 0 (none) or positive")
