"""Corpus-level scores with sacreBLEU, always with sacreBLEU's signature, and paired significance
tests, over lines of text (tools/evaluate.py reads them from files)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER

from mt_cli.config import DEFAULT_METRICS
from mt_cli.errors import MtError
from mt_cli.scripts import is_mostly_cjk

METRICS = ("bleu", "chrf", "ter")


def bleu_tokenizer(refs: list[str]) -> str:
    """sacrebleu's `zh` tokenizer for Chinese references, its default `13a` for everything else."""
    return "zh" if is_mostly_cjk(refs) else "13a"


def score(
    hyps: list[str],
    refs: list[list[str]],
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    tokenize: str | None = None,
) -> dict[str, Any]:
    """Score hypotheses against one or more reference streams, each as long as `hyps`."""
    unknown = set(metrics) - set(METRICS)
    if unknown:
        raise MtError(f"unknown metric(s) {sorted(unknown)}; choose from {', '.join(METRICS)}")
    tokenize = tokenize or bleu_tokenizer(refs[0])
    scorers = {"bleu": BLEU(tokenize=tokenize), "chrf": CHRF(), "ter": TER()}
    result: dict[str, Any] = {"signature": {}, "text": {}}
    for name in metrics:
        scorer = scorers[name]
        s = scorer.corpus_score(hyps, refs)
        result[name] = round(s.score, 2)
        result["signature"][name] = str(scorer.get_signature())
        result["text"][name] = s.format()
    return result


def format_report(result: dict[str, Any]) -> str:
    """One line per metric: score text and signature, as `sacrebleu` prints them."""
    names = [m for m in METRICS if m in result]
    return "\n".join(f"{result['text'][m]}  ({result['signature'][m]})" for m in names)


def paired_bootstrap(
    hyps: list[tuple[str, list[str]]],
    refs: list[list[str]],
    tokenize: str | None = None,
    samples: int = 1000,
) -> dict[str, Any]:
    """BLEU of each system (`hyps`: its name and hypotheses) against the first (the baseline), with
    sacrebleu's paired bootstrap resampling: p is the chance that the difference is luck, given
    these test sentences."""
    from sacrebleu.significance import PairedTest

    if len(hyps) < 2:
        raise MtError("a paired test compares systems: give a baseline and at least one other")
    metric = BLEU(tokenize=tokenize or bleu_tokenizer(refs[0]))
    named: list[tuple[str, Sequence[str]]] = list(hyps)
    signatures, scores = PairedTest(
        named, {"BLEU": metric}, refs, test_type="bs", n_samples=samples
    )()
    results: list[Any] = list(scores["BLEU"])  # sacrebleu's Result objects, baseline first
    base, *others = results
    systems = [
        {
            "system": name,
            "bleu": r.score,
            "mean": r.mean,
            "ci": r.ci,
            "p_value": r.p_value,
            "better": r.score > base.score and r.p_value < 0.05,
        }
        for (name, _), r in zip(named[1:], others)
    ]
    return {
        "baseline": {"system": named[0][0], "bleu": base.score, "mean": base.mean, "ci": base.ci},
        "systems": systems,
        "signature": str(signatures["BLEU"]),
    }


def format_significance(result: dict[str, Any]) -> str:
    b = result["baseline"]
    lines = [f"baseline {b['system']}: BLEU {b['bleu']:.2f} (mean {b['mean']:.2f} ± {b['ci']:.2f})"]
    for s in result["systems"]:
        # sacrebleu's p for two identical outputs is 1/(samples+1), not 1: equal scores are never a
        # win.
        if s["better"]:
            verdict = "better than the baseline"
        elif s["p_value"] < 0.05 and s["bleu"] < b["bleu"]:
            verdict = "worse than the baseline"
        else:
            verdict = "not significantly different from the baseline"
        lines.append(
            f"{s['system']}: BLEU {s['bleu']:.2f} (mean {s['mean']:.2f} ± {s['ci']:.2f}), p = "
            f"{s['p_value']:.4f}: {verdict} (paired bootstrap; significant at p < 0.05)"
        )
    return "\n".join(lines + [f"({result['signature']})"])
