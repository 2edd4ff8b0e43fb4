"""Decoding commands: translate, compile, score, evaluate, tune-decoding, tune-precision,
shortlist."""

import json
from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.app import DECODE, NOTHING_GIVEN, Device, Given, app, config_options, err, friendly
from mt_cli.config import (
    DEFAULT_METRICS,
    DEVICE,
    DecodeConfig,
    DocumentConfig,
    OutputConfig,
    TrainConfig,
    TuningConfig,
    language_help,
)
from mt_cli.errors import MtError

# translate's options: one alias each, so the command reads as a list of them. readable=False:
# the library checks its paths (files.check_readable), in one line that says what is wrong, where
# click's own check would print a usage box.
Checkpoints = Annotated[
    list[Path],
    typer.Option(
        "--checkpoint",
        help="A checkpoint written by `mt train` (best.pt); repeat for an ensemble.",
        readable=False,
    ),
]
Input = Annotated[
    Path | None, typer.Argument(help="Text to translate; stdin when absent.", readable=False)
]
Output = Annotated[
    Path | None, typer.Option(help="Where to write; stdout when absent.", readable=False)
]
PrefixFile = Annotated[
    Path | None,
    typer.Option(
        help="One target prefix per input line (empty: none); outputs start with it.",
        readable=False,
    ),
]
GlossaryFile = Annotated[
    Path | None,
    typer.Option(
        help="TSV of `source term<TAB>target term`: found terms must be translated so.",
        readable=False,
    ),
]
ConstraintsFile = Annotated[
    Path | None,
    typer.Option(
        help="Per input line, tab-separated target terms the output must contain.", readable=False
    ),
]
SourceLang = Annotated[
    str | None, typer.Option(help=language_help("source", "for a model told its source."))
]
TargetLang = Annotated[
    str | None, typer.Option(help=language_help("target", "for a model that writes several."))
]


@app.command(rich_help_panel=DECODE)
@friendly
@config_options(DecodeConfig, OutputConfig, DocumentConfig)
def translate(
    checkpoint: Checkpoints,
    input: Input = None,
    output: Output = None,
    prefix_file: PrefixFile = None,
    glossary: GlossaryFile = None,
    constraints_file: ConstraintsFile = None,
    target_lang: TargetLang = None,
    device: Device = DEVICE,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Translate a file (or stdin): line by line, one output line for every input line, or a
    document (text, HTML, Markdown, subtitles, PO, DOCX) with its structure kept (--input-type)."""
    from mt_cli.tools.line_inputs import LineInputs
    from mt_cli.tools.translate_files import translate_file

    inputs = LineInputs(prefix_file, constraints_file, glossary, target_lang)
    out = options.build(OutputConfig)
    document = options.build(DocumentConfig)
    n = translate_file(
        checkpoint, input, output, device, out, inputs, document, **options.of(DecodeConfig)
    )
    written = input if out.in_place else output
    if written is not None:
        err(
            f"translated {n} lines into {written}"
            if n is not None
            else f"translated {input} into {written}"
        )


@app.command("compile", rich_help_panel=DECODE)
@friendly
@config_options(DecodeConfig, only=("precision",))
def compile_step(
    checkpoint: Annotated[
        Path, typer.Option(help="A checkpoint written by `mt train` (best.pt).", readable=False)
    ],
    options: Given = NOTHING_GIVEN,
) -> None:
    """Compile the checkpoint's decoder step for this CPU ahead of time (decode.engine compiled):
    kept beside the checkpoint, translate and serve then load it in milliseconds."""
    from mt_cli.decode.compiled import compile_checkpoint

    package, built = compile_checkpoint(checkpoint, **options.of(DecodeConfig))
    err(f"{'compiled' if built else 'already compiled'}: {package}")


@app.command(rich_help_panel=DECODE)
@friendly
@config_options(
    DecodeConfig, OutputConfig, only=("batch_size", "batch_tokens", "score_precision", "format")
)
def score(
    checkpoint: Annotated[Path, typer.Option(help="A checkpoint written by `mt train` (best.pt).")],
    src: Annotated[Path, typer.Option(help="Source sentences, one per line.")],
    tgt: Annotated[Path, typer.Option(help="Their translations to score, one per line.")],
    output: Annotated[Path | None, typer.Option(help="Where to write; stdout when absent.")] = None,
    normalize: Annotated[
        bool, typer.Option(help="Divide by the token count (EOS included).")
    ] = False,
    source_lang: SourceLang = None,
    target_lang: TargetLang = None,
    device: Device = DEVICE,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Forced decoding: the log-probability the model gives each TGT line as the translation of its
    SRC line (natural log, summed over the target's tokens and EOS), in fp32 unless --precision."""
    from mt_cli.tools.translate_files import score_file

    fmt = options.build(OutputConfig).format
    languages = (source_lang, target_lang)
    decoding = options.of(DecodeConfig)
    n = score_file(checkpoint, src, tgt, output, device, fmt, normalize, languages, **decoding)
    if output is not None:
        err(f"scored {n} pairs into {output}")


@app.command(rich_help_panel=DECODE)
@friendly
@config_options(DecodeConfig)
def evaluate(
    ref: Annotated[list[Path], typer.Option(help="Reference file; repeat for several references.")],
    hyp: Annotated[
        list[Path] | None,
        typer.Option(help="Hypothesis file (system output); repeat with --significance."),
    ] = None,
    checkpoint: Annotated[
        Path | None, typer.Option(help="Translate --src with this model first.")
    ] = None,
    src: Annotated[Path | None, typer.Option(help="Source file, with --checkpoint.")] = None,
    metrics: Annotated[str, typer.Option(help="Comma-separated: bleu, chrf, ter.")] = ",".join(
        DEFAULT_METRICS
    ),
    tokenize: Annotated[
        str | None, typer.Option(help="sacrebleu tokenizer; default zh for Chinese, else 13a.")
    ] = None,
    device: Device = DEVICE,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    significance: Annotated[
        bool,
        typer.Option(
            "--significance", help="Paired bootstrap: does each later --hyp beat the first?"
        ),
    ] = False,
    options: Given = NOTHING_GIVEN,  # decoding, with --checkpoint
) -> None:
    """Score hypotheses against references with sacrebleu (BLEU, chrF; TER via --metrics)."""
    from mt_cli.metrics import format_report, format_significance
    from mt_cli.tools.evaluate import evaluate_run
    from mt_cli.tools.evaluate import significance as compare

    if significance:
        result = compare(hyp or [], ref, tokenize)
        typer.echo(json.dumps(result) if as_json else format_significance(result))
        return
    if hyp is not None and len(hyp) > 1:
        raise MtError("several --hyp files are compared with --significance")
    chosen = tuple(m.strip() for m in metrics.split(",") if m.strip())
    decoding = options.of(DecodeConfig)
    result = evaluate_run(
        hyp[0] if hyp else None, ref, checkpoint, src, chosen, tokenize, device, **decoding
    )
    if as_json:
        typer.echo(json.dumps({k: v for k, v in result.items() if k != "text"}))
    else:
        typer.echo(format_report(result))


@app.command("tune-decoding", rich_help_panel=DECODE)
@friendly
@config_options(TuningConfig)
def tune_decoding(
    checkpoint: Annotated[Path, typer.Option(help="The checkpoint to tune.")],
    src: Annotated[Path, typer.Option(help="Validation source (never the test set).")],
    ref: Annotated[Path, typer.Option(help="Validation reference.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Write a copy of the checkpoint with the best pair as default."),
    ] = None,
    device: Device = DEVICE,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Grid-search beam size and length penalty on a validation set; best first."""
    from mt_cli.tools.evaluate import tune_decoding as tune

    grid = options.build(TuningConfig)
    rows = tune(checkpoint, src, ref, grid.beams, grid.length_penalties, device, out)
    if as_json:
        typer.echo(json.dumps(rows))
        return
    typer.echo("beam  length_penalty  BLEU")
    for r in rows:
        typer.echo(f"{r['beam']:>4}  {r['length_penalty']:>14}  {r['bleu']:.2f}")
    if out is not None:
        err(f"wrote {out} with beam {rows[0]['beam']}, length penalty {rows[0]['length_penalty']}")


@app.command("tune-precision", rich_help_panel=DECODE)
@friendly
@config_options(TrainConfig, only=("int8_tolerance",))
def tune_precision(
    checkpoint: Annotated[Path, typer.Option(help="The checkpoint to check (mt's or imported).")],
    src: Annotated[Path, typer.Option(help="Dev or validation source (never the test set).")],
    ref: Annotated[Path, typer.Option(help="Its reference translations.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Write the checkpoint with the verdict: a new file, or --checkpoint."),
    ] = None,
    source_lang: SourceLang = None,
    target_lang: TargetLang = None,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Translate a dev set in int8 and in fp32 on the CPU: int8 (faster) is kept as the default
    where it loses at most --int8-tolerance BLEU, else fp32."""
    from mt_cli.decode.tuning import precision_verdict, tune_precision_file

    tolerance = options.build(TrainConfig).int8_tolerance
    row = tune_precision_file(checkpoint, src, ref, tolerance, out, (source_lang, target_lang))
    typer.echo(precision_verdict(row, str(out or checkpoint), str(src)))
    if out is None:
        err(f"nothing written; give --out to record it in a checkpoint (--out {checkpoint})")


@app.command("shortlist", rich_help_panel=DECODE)
@friendly
@config_options(
    TrainConfig,
    only=("shortlist_per_source", "shortlist_frequent"),
    flags={"shortlist_per_source": "--per-source", "shortlist_frequent": "--frequent"},
)
def shortlist_command(
    checkpoint: Annotated[
        Path, typer.Option(help="The checkpoint to give a shortlist (mt's or imported).")
    ],
    train_src: Annotated[
        Path, typer.Option(help="Source side of a parallel corpus, one sentence per line.")
    ],
    train_tgt: Annotated[Path, typer.Option(help="Its target side, line-aligned.")],
    out: Annotated[
        Path, typer.Option(help="The checkpoint to write: a new file, or --checkpoint itself.")
    ],
    options: Given = NOTHING_GIVEN,
) -> None:
    """Build a vocabulary shortlist from a parallel corpus into a checkpoint: decoding then scores
    only the target pieces a batch's source pieces co-occur with (and the most frequent ones).
    `mt train` builds one from its training data by itself."""
    from mt_cli.tools.add_shortlist import add_shortlist

    # Checked by add_shortlist, naming the value given.
    given = options.of(TrainConfig)
    per_source = given.get("shortlist_per_source", TrainConfig.shortlist_per_source)
    frequent = given.get("shortlist_frequent", TrainConfig.shortlist_frequent)
    add_shortlist(checkpoint, train_src, train_tgt, out, per_source, frequent, log=err)
