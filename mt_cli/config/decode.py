"""How translations are searched for: saved in checkpoints as their defaults, overridden by
`mt translate`, `mt serve` and `Translator.load`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mt_cli.config.fields import check as _check
from mt_cli.config.fields import option
from mt_cli.errors import MtError


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
        "only); a server's batches are cut by the same budget, so each is one search.",
        cli=True,
    )
    precision: str = option(
        "auto",
        "fp32 (the reference), bf16 (weights cast to bf16 once; on a CPU only with bf16 "
        "arithmetic, AVX512-BF16 or AMX), int8 (int8 products, each input row scaled on its own "
        "so batching changes no translation; CPU only), or auto: picked when the model loads, "
        "int8 on a CPU with VNNI or AMX, bf16 on a GPU that has it, else fp32. mt train checks "
        "int8 against fp32 on the validation set and records fp32 where int8 loses quality "
        "(train.tune_precision).",
        cli=True,
    )
    # Forced scores are a measurement: compared across tools, thresholded to filter corpora. int8
    # moves a score by up to a few hundredths, so they are measured in fp32 unless asked.
    score_precision: str = option(
        "fp32",
        "The precision forced scores are measured in (mt score, the server's /score, mt clean's "
        "score filter): fp32, so they match other tools'; "
        "auto, bf16 or int8 (as decode.precision) for speed.",
        flag="--precision",
    )
    engine: str = option(
        "auto",
        "How the decoder's step runs: eager (op by op in PyTorch), compiled (compiled ahead of "
        "time for this CPU, checkpoint and precision, kept beside the checkpoint in "
        "CHECKPOINT.compiled/; built on first use or by `mt compile`, about 15-30 s, once), or "
        "auto: compiled where it is already built, else eager. step is an older name for eager.",
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
            self.score_precision in ("fp32", "bf16", "int8", "auto"),
            f"decode.score_precision must be fp32, bf16, int8 or auto, not {self.score_precision}",
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


# Options that, given without a method, ask for sampling.
SAMPLING = ("sampling_topk", "sampling_topp", "temperature")


def decode_options(
    base: DecodeConfig, overrides: dict[str, Any], scoring: bool = False
) -> DecodeConfig:
    """`base` with the given fields replaced (None means "keep"); unknown names are refused.
    `scoring`: for forced scores, whose precision is decode.score_precision."""
    known = {f.name for f in dataclasses.fields(DecodeConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise MtError(f"unknown decoding option(s) {unknown}; known: {sorted(known)}")
    if any(overrides.get(k) is not None for k in SAMPLING) and overrides.get("method") is None:
        # A sampling option asks for sampling, which has no beam: the checkpoint's beam is not kept.
        overrides = {**overrides, "method": "sample", "beam": overrides.get("beam") or 1}
    cfg = dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})
    return dataclasses.replace(cfg, precision=cfg.score_precision) if scoring else cfg
