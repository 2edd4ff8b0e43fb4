"""Decoding commands: translate, score, evaluate, tune-decoding, shortlist."""

import json
from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.app import DECODE, Device, app, err, friendly
from mt_cli.config import DEFAULT_METRICS, DEVICE, OutputConfig, TrainConfig
from mt_cli.errors import MtError

# translate's options: one alias each, so the command reads as a list of them.
Checkpoints = Annotated[
    list[Path],
    typer.Option("--checkpoint", help="A checkpoint written by `mt train` (best.pt); repeat for an ensemble."),
]
Input = Annotated[Path | None, typer.Argument(help="Text to translate; stdin when absent.")]
Output = Annotated[Path | None, typer.Option(help="Where to write; stdout when absent.")]
Beam = Annotated[int | None, typer.Option(help="Beam size; 1 is greedy.")]
BatchSize = Annotated[int | None, typer.Option(help="Sentences decoded together.")]
MaxLenRatio = Annotated[float | None, typer.Option(help="Output length limit per source token.")]
LengthPenalty = Annotated[float | None, typer.Option(help="Alpha in score / length**alpha.")]
Precision = Annotated[str | None, typer.Option(help="fp32, bf16 (autocast) or int8 (dynamic int8 linear layers, CPU).")]
NoRepeat = Annotated[int | None, typer.Option(help="N: no token n-gram of size N occurs twice.")]
TopK = Annotated[int | None, typer.Option(help="Sample from the K most probable tokens (0: all).")]
TopP = Annotated[float | None, typer.Option(help="Sample from the fewest tokens whose probability reaches P.")]
Temperature = Annotated[float | None, typer.Option(help="Sample from softmax(log p / T).")]
Seed = Annotated[int | None, typer.Option(help="Sampling seed: the same seed, the same output.")]
PrefixFile = Annotated[
    Path | None, typer.Option(help="One target prefix per input line (empty: none); outputs start with it.")
]
GlossaryFile = Annotated[
    Path | None, typer.Option(help="TSV of `source term<TAB>target term`: found terms must be translated so.")
]
ConstraintsFile = Annotated[
    Path | None, typer.Option(help="Per input line, tab-separated target terms the output must contain.")
]
TargetLang = Annotated[
    str | None, typer.Option(help="A multi-target model's target language xx: its >>xx<< token before each line.")
]
Format = Annotated[str, typer.Option(help="text (the best translation) or jsonl (one JSON object with its score).")]
NBest = Annotated[
    int, typer.Option(help="jsonl: also the K best hypotheses, best first (K <= --beam; sampling: K draws).")
]
TokenScores = Annotated[bool, typer.Option(help="jsonl: each output piece with its log-probability.")]
Alignment = Annotated[
    bool, typer.Option(help="jsonl: per output piece, the source piece the last layer attends to most.")
]
UseShortlist = Annotated[
    bool | None,
    typer.Option("--shortlist/--no-shortlist", help="Score only the checkpoint's shortlist of target pieces."),
]


@app.command(rich_help_panel=DECODE)
@friendly
def translate(
    checkpoint: Checkpoints,
    input: Input = None,
    output: Output = None,
    beam: Beam = None,
    batch_size: BatchSize = None,
    max_len_ratio: MaxLenRatio = None,
    length_penalty: LengthPenalty = None,
    precision: Precision = None,
    no_repeat_ngram: NoRepeat = None,
    prefix_file: PrefixFile = None,
    glossary: GlossaryFile = None,
    constraints_file: ConstraintsFile = None,
    sampling_topk: TopK = None,
    sampling_topp: TopP = None,
    temperature: Temperature = None,
    seed: Seed = None,
    target_lang: TargetLang = None,
    shortlist: UseShortlist = None,
    device: Device = DEVICE,
    format: Format = OutputConfig.format,
    nbest: NBest = OutputConfig.nbest,
    token_scores: TokenScores = OutputConfig.token_scores,
    alignment: Alignment = OutputConfig.alignment,
) -> None:
    """Translate a file (or stdin) line by line: one output line for every input line."""
    from mt_cli.decode.line_files import LineInputs
    from mt_cli.decode.translator import translate_file

    decoding = {"beam": beam, "batch_size": batch_size, "max_len_ratio": max_len_ratio, "seed": seed,
                "length_penalty": length_penalty, "precision": precision, "no_repeat_ngram": no_repeat_ngram,
                "sampling_topk": sampling_topk, "sampling_topp": sampling_topp, "temperature": temperature,
                "shortlist": shortlist}  # fmt: skip
    n = translate_file(checkpoint, input, output, device, OutputConfig(format, nbest, token_scores, alignment),
                       LineInputs(prefix_file, constraints_file, glossary, target_lang), **decoding)  # fmt: skip
    if output is not None:
        err(f"translated {n} lines into {output}")


@app.command(rich_help_panel=DECODE)
@friendly
def score(
    checkpoint: Annotated[Path, typer.Option(help="A checkpoint written by `mt train` (best.pt).")],
    src: Annotated[Path, typer.Option(help="Source sentences, one per line.")],
    tgt: Annotated[Path, typer.Option(help="Their translations to score, one per line.")],
    output: Annotated[Path | None, typer.Option(help="Where to write; stdout when absent.")] = None,
    format: Annotated[str, typer.Option(help="text (one score per line) or jsonl (with each token's).")] = "text",
    normalize: Annotated[bool, typer.Option(help="Divide by the token count (EOS included).")] = False,
    batch_size: Annotated[int | None, typer.Option(help="Pairs scored together.")] = None,
    device: Device = DEVICE,
) -> None:
    """Forced decoding: the log-probability the model gives each TGT line as the translation of its
    SRC line (natural log, summed over the target's tokens and EOS)."""
    from mt_cli.decode.translator import score_file

    n = score_file(checkpoint, src, tgt, output, device, format, normalize, batch_size=batch_size)
    if output is not None:
        err(f"scored {n} pairs into {output}")


@app.command(rich_help_panel=DECODE)
@friendly
def evaluate(
    ref: Annotated[list[Path], typer.Option(help="Reference file; repeat for several references.")],
    hyp: Annotated[
        list[Path] | None, typer.Option(help="Hypothesis file (system output); repeat with --significance.")
    ] = None,
    checkpoint: Annotated[Path | None, typer.Option(help="Translate --src with this model first.")] = None,
    src: Annotated[Path | None, typer.Option(help="Source file, with --checkpoint.")] = None,
    metrics: Annotated[str, typer.Option(help="Comma-separated: bleu, chrf, ter.")] = ",".join(DEFAULT_METRICS),
    tokenize: Annotated[str | None, typer.Option(help="sacrebleu tokenizer; default zh for Chinese, else 13a.")] = None,
    beam: Annotated[int | None, typer.Option(help="Beam size, with --checkpoint.")] = None,
    device: Device = DEVICE,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    significance: Annotated[
        bool, typer.Option("--significance", help="Paired bootstrap: does each later --hyp beat the first?")
    ] = False,
) -> None:
    """Score hypotheses against references with sacrebleu (BLEU, chrF; TER via --metrics)."""
    from mt_cli.metrics import format_report, format_significance, paired_bootstrap
    from mt_cli.tools.evaluate import evaluate_run

    if significance:
        result = paired_bootstrap(hyp or [], ref, tokenize)
        typer.echo(json.dumps(result) if as_json else format_significance(result))
        return
    if hyp is not None and len(hyp) > 1:
        raise MtError("several --hyp files are compared with --significance")
    chosen = tuple(m.strip() for m in metrics.split(",") if m.strip())
    result = evaluate_run(hyp[0] if hyp else None, ref, checkpoint, src, chosen, tokenize, beam, device)
    if as_json:
        typer.echo(json.dumps({k: v for k, v in result.items() if k != "text"}))
    else:
        typer.echo(format_report(result))


@app.command("tune-decoding", rich_help_panel=DECODE)
@friendly
def tune_decoding(
    checkpoint: Annotated[Path, typer.Option(help="The checkpoint to tune.")],
    src: Annotated[Path, typer.Option(help="Validation source (never the test set).")],
    ref: Annotated[Path, typer.Option(help="Validation reference.")],
    beams: Annotated[str, typer.Option(help="Comma-separated beam sizes.")] = "1,4,5,8",
    length_penalties: Annotated[str, typer.Option(help="Comma-separated length penalties.")] = "0.6,1.0,1.4",
    out: Annotated[
        Path | None, typer.Option(help="Write a copy of the checkpoint with the best pair as default.")
    ] = None,
    device: Device = DEVICE,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Grid-search beam size and length penalty on a validation set; best first."""
    from mt_cli.tools.evaluate import tune_decoding as tune

    rows = tune(checkpoint, src, ref, _numbers(beams, int), _numbers(length_penalties, float), device, out)
    if as_json:
        typer.echo(json.dumps(rows))
        return
    typer.echo("beam  length_penalty  BLEU")
    for r in rows:
        typer.echo(f"{r['beam']:>4}  {r['length_penalty']:>14}  {r['bleu']:.2f}")
    if out is not None:
        err(f"wrote {out} with beam {rows[0]['beam']}, length penalty {rows[0]['length_penalty']}")


def _numbers(text: str, kind: type) -> list:
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise MtError(f"expected comma-separated numbers, not {text!r}") from None
    if not values:
        raise MtError("expected at least one value")
    return values


@app.command("shortlist", rich_help_panel=DECODE)
@friendly
def shortlist_command(
    checkpoint: Annotated[Path, typer.Option(help="The checkpoint to give a shortlist (mt's or imported).")],
    train_src: Annotated[Path, typer.Option(help="Source side of a parallel corpus, one sentence per line.")],
    train_tgt: Annotated[Path, typer.Option(help="Its target side, line-aligned.")],
    out: Annotated[Path, typer.Option(help="The checkpoint to write: a new file, or --checkpoint itself.")],
    per_source: Annotated[int, typer.Option(help="Target pieces per source piece.")] = TrainConfig.shortlist_per_source,
    frequent: Annotated[int, typer.Option(help="Most frequent target pieces.")] = TrainConfig.shortlist_frequent,
) -> None:
    """Build a vocabulary shortlist from a parallel corpus into a checkpoint: decoding then scores
    only the target pieces a batch's source pieces co-occur with (and the most frequent ones).
    `mt train` builds one from its training data by itself."""
    from mt_cli.tools.shortlist import add_shortlist

    add_shortlist(checkpoint, train_src, train_tgt, out, per_source, frequent, log=err)
