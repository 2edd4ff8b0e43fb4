"""The `mt` command: one thin Typer command per verb, each calling one library function."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mt_cli.errors import MtError

app = typer.Typer(
    help="mt: train, run and score Transformer translation models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
tokenizer_app = typer.Typer(help="SentencePiece tokenizers.", no_args_is_help=True)
app.add_typer(tokenizer_app, name="tokenizer")


def friendly(fn):
    """Turn the library's MtError into one line on stderr and exit code 1, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MtError as e:
            typer.echo(f"mt: error: {e}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("mt: interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper


def err(message: str) -> None:
    typer.echo(message, err=True)


ExistingFile = Annotated[Path, typer.Option(help="A UTF-8 text file, one sentence per line.")]
Device = Annotated[str, typer.Option(help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps.")]


@tokenizer_app.command("train")
@friendly
def tokenizer_train(
    src: ExistingFile,
    tgt: ExistingFile,
    out: Annotated[Path, typer.Option(help="Folder to write the SentencePiece model(s) into.")],
    vocab_size: Annotated[int, typer.Option(help="Pieces in each vocabulary.")] = 8000,
    model_type: Annotated[str, typer.Option(help="unigram or bpe.")] = "unigram",
    separate: Annotated[bool, typer.Option("--separate", help="One model per side instead of a joint one.")] = False,
    character_coverage: Annotated[
        float | None, typer.Option(help="Default: 0.9995 for mostly-CJK text, else 1.0.")
    ] = None,
) -> None:
    """Train a SentencePiece tokenizer on both sides of a parallel corpus (joint by default)."""
    from mt_cli.config import TokenizerConfig
    from mt_cli.data import read_parallel
    from mt_cli.tokenizer import train_tokenizer

    cfg = TokenizerConfig(vocab_size, model_type, not separate, character_coverage)
    corpus = read_parallel(src, tgt)
    tok = train_tokenizer(corpus.src, corpus.tgt, cfg)
    tok.save(out)
    err(f"wrote {out} ({'joint' if tok.joint else 'separate'}: {tok.src_vocab_size}/{tok.tgt_vocab_size} pieces)")


def parse_batch_tokens(value: str | None) -> int | None:
    """--batch-tokens N, or auto (stored as 0)."""
    if value == "auto":
        return 0
    if value is not None and not value.isdigit():
        raise MtError(f"--batch-tokens {value!r}: expected a number of tokens or auto")
    return int(value) if value is not None else None


TextFile = Annotated[Path | None, typer.Option(help="A UTF-8 text file, one sentence per line (.gz too).")]
Table = Annotated[
    Path | None, typer.Option(help="Pairs in one file: .tsv (source<TAB>target), .csv, .jsonl or .parquet (.gz too).")
]


@app.command()
@friendly
def train(
    out: Annotated[Path, typer.Option(help="Run folder: best.pt, last.pt, log.jsonl. Rerun to resume.")],
    train_src: TextFile = None,
    train_tgt: TextFile = None,
    valid_src: TextFile = None,
    valid_tgt: TextFile = None,
    train: Table = None,
    valid: Table = None,
    dataset: Annotated[
        str | None, typer.Option(help="A Hugging Face dataset (name or local folder) for splits not given as files.")
    ] = None,
    dataset_config: Annotated[str | None, typer.Option(help="The dataset's configuration, e.g. de-en.")] = None,
    train_split: Annotated[str, typer.Option(help="The dataset's training split.")] = "train",
    valid_split: Annotated[str, typer.Option(help="The dataset's validation split.")] = "validation",
    src_lang: Annotated[
        str | None, typer.Option(help="Source column, or key of a 'translation' column (e.g. de).")
    ] = None,
    tgt_lang: Annotated[str | None, typer.Option(help="Target column or key (e.g. en).")] = None,
    tokenizer: Annotated[
        Path | None, typer.Option(help="Tokenizer folder; without it one is trained into OUT/tokenizer.")
    ] = None,
    cache: Annotated[
        Path | None, typer.Option(help="Where tokenized corpora are cached (default $MT_CACHE or ~/.cache/mt).")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="Model size: tiny, small, base or big.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config (sections model/tokenizer/train/decode).")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Stop after this many updates.")] = None,
    max_epochs: Annotated[int | None, typer.Option(help="Stop after this many epochs.")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="Stop after this much training time.")] = None,
    batch_tokens: Annotated[
        str | None,
        typer.Option(help="Padded tokens per global batch, over all processes and --accumulate shares; auto on CUDA."),
    ] = None,
    accumulate: Annotated[
        int | None, typer.Option(help="Cut each batch into K shares run one after another (less memory, same update).")
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Processes that tokenize the corpus into its cache.")] = None,
    dist_timeout: Annotated[
        float | None, typer.Option(help="Under torchrun: seconds a process waits for the others before giving up.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:N or mps.")] = None,
    patience: Annotated[int | None, typer.Option(help="Stop after N validations without a better BLEU.")] = None,
    keep_last: Annotated[
        int | None, typer.Option(help="Keep the last K validations' weights as OUT/step<N>.pt.")
    ] = None,
    average_last: Annotated[
        int | None, typer.Option(help="After training, average the last K into OUT/averaged.pt.")
    ] = None,
    save_every: Annotated[int | None, typer.Option(help="Also write OUT/last.pt every N steps.")] = None,
    max_len: Annotated[int | None, typer.Option(help="Longest side of a training pair, in tokens.")] = None,
    long_pairs: Annotated[
        str | None, typer.Option(help="A pair over --max-len: drop (default) or truncate it.")
    ] = None,
    on_bad_utf8: Annotated[
        str | None, typer.Option(help="Bytes that are not UTF-8: error (default), skip the pair, or replace.")
    ] = None,
    tensorboard: Annotated[
        bool, typer.Option("--tensorboard", help="Also write TensorBoard events to OUT/tensorboard.")
    ] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override any field: --set model.dropout=0 (repeatable).")
    ] = None,
) -> None:
    """Train a Transformer; writes OUT/best.pt (best validation BLEU), OUT/last.pt and OUT/log.jsonl.

    Data: text files (--train-src/--train-tgt, --valid-src/--valid-tgt), a table file per split
    (--train, --valid), or --dataset. Several processes: torchrun --nproc_per_node=N -m mt_cli train ...
    """
    from mt_cli.config import build_config
    from mt_cli.rundata import make_paths
    from mt_cli.train import train as run_training

    given = {
        "max_steps": max_steps,
        "max_epochs": max_epochs,
        "max_minutes": max_minutes,
        "batch_tokens": parse_batch_tokens(batch_tokens),
        "accumulate": accumulate,
        "workers": workers,
        "dist_timeout_s": dist_timeout,
        "seed": seed,
        "device": device,
        "patience": patience,
        "keep_last": keep_last,
        "average_last": average_last,
        "on_bad_utf8": on_bad_utf8,
        "save_every": save_every,
        "max_len": max_len,
        "long_pairs": long_pairs,
        "tensorboard": tensorboard or None,
    }
    options = {"train": {k: v for k, v in given.items() if v is not None}}
    cfg = build_config(preset, config, options, set_)
    files = {"train_src": train_src, "train_tgt": train_tgt, "valid_src": valid_src, "valid_tgt": valid_tgt,
             "train": train, "valid": valid}  # fmt: skip
    paths = make_paths(out, files, dataset, dataset_config, (train_split, valid_split), (src_lang, tgt_lang),
                       tokenizer, cache)  # fmt: skip
    run_training(paths, cfg, log=err)


@app.command()
@friendly
def translate(
    checkpoint: Annotated[Path, typer.Option(help="A checkpoint written by `mt train` (best.pt).")],
    input: Annotated[Path | None, typer.Argument(help="Text to translate; stdin when absent.")] = None,
    output: Annotated[Path | None, typer.Option(help="Where to write; stdout when absent.")] = None,
    beam: Annotated[int | None, typer.Option(help="Beam size; 1 is greedy.")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Sentences decoded together.")] = None,
    max_len_ratio: Annotated[float | None, typer.Option(help="Output length limit per source token.")] = None,
    length_penalty: Annotated[float | None, typer.Option(help="Alpha in score / length**alpha.")] = None,
    precision: Annotated[
        str | None, typer.Option(help="fp32, bf16 (autocast) or int8 (dynamic int8 linear layers, CPU).")
    ] = None,
    device: Device = "auto",
) -> None:
    """Translate a file (or stdin) line by line: one output line for every input line."""
    from mt_cli.translate import translate_file

    n = translate_file(
        checkpoint,
        input,
        output,
        device,
        beam=beam,
        batch_size=batch_size,
        max_len_ratio=max_len_ratio,
        length_penalty=length_penalty,
        precision=precision,
    )
    if output is not None:
        err(f"translated {n} lines into {output}")


@app.command()
@friendly
def evaluate(
    ref: Annotated[list[Path], typer.Option(help="Reference file; repeat for several references.")],
    hyp: Annotated[
        list[Path] | None, typer.Option(help="Hypothesis file (system output); repeat with --significance.")
    ] = None,
    checkpoint: Annotated[Path | None, typer.Option(help="Translate --src with this model first.")] = None,
    src: Annotated[Path | None, typer.Option(help="Source file, with --checkpoint.")] = None,
    metrics: Annotated[str, typer.Option(help="Comma-separated: bleu, chrf, ter.")] = "bleu,chrf",
    tokenize: Annotated[str | None, typer.Option(help="sacrebleu tokenizer; default zh for Chinese, else 13a.")] = None,
    beam: Annotated[int | None, typer.Option(help="Beam size, with --checkpoint.")] = None,
    device: Device = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    significance: Annotated[
        bool, typer.Option("--significance", help="Paired bootstrap: does each later --hyp beat the first?")
    ] = False,
) -> None:
    """Score hypotheses against references with sacrebleu (BLEU, chrF; TER via --metrics)."""
    from mt_cli.evaluate import evaluate_run, format_report, format_significance, paired_bootstrap

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


@app.command()
@friendly
def attention(
    checkpoint: Annotated[Path, typer.Option(help="A checkpoint written by `mt train`.")],
    src: Annotated[str, typer.Option(help="The source sentence.")],
    out: Annotated[Path, typer.Option(help="Folder for the PNG files.")],
    tgt: Annotated[str | None, typer.Option(help="A reference translation; default: the model's own.")] = None,
) -> None:
    """Draw attention heat maps, every layer and head: encoder, decoder self- and encoder-decoder attention."""
    from mt_cli.heatmap import attention_figures

    for path in attention_figures(checkpoint, src, tgt, out):
        err(f"wrote {path}")


@app.command()
@friendly
def plot(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (the --out of mt train); several overlay.")],
    out: Annotated[Path, typer.Option(help="The PNG file to write.")],
) -> None:
    """Draw training loss, validation loss, validation BLEU and learning rate against step."""
    from mt_cli.plot import draw_curves

    err(f"wrote {draw_curves(runs, out)}")


@app.command()
@friendly
def report(
    run: Annotated[Path, typer.Argument(help="A run folder (the --out of mt train).")],
    out: Annotated[Path, typer.Option(help="The Markdown file to write; the curves go beside it.")],
) -> None:
    """Write a Markdown report of a run: scores, training, data, environment, curves, config."""
    from mt_cli.report import write_report

    err(f"wrote {write_report(run, out)}")


@app.command("tune-decoding")
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
    device: Device = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Grid-search beam size and length penalty on a validation set; best first."""
    from mt_cli.evaluate import tune_decoding as tune

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


@app.command()
@friendly
def average(
    checkpoints: Annotated[list[Path], typer.Argument(help="Checkpoints of one run, e.g. RUN/step*.pt.")],
    out: Annotated[Path, typer.Option(help="Where to write the averaged checkpoint.")],
) -> None:
    """Average the weights of several checkpoints of one run into one checkpoint."""
    from mt_cli.checkpoint import average as average_checkpoints
    from mt_cli.checkpoint import save_checkpoint

    save_checkpoint(out, average_checkpoints(checkpoints))
    err(f"averaged {len(checkpoints)} checkpoints into {out}")


@app.command()
@friendly
def doctor(
    src: ExistingFile,
    tgt: ExistingFile,
    valid_src: Annotated[Path | None, typer.Option(help="Validation source, checked and compared with train.")] = None,
    valid_tgt: Annotated[Path | None, typer.Option(help="Validation target.")] = None,
    test_src: Annotated[Path | None, typer.Option(help="Test source, checked and compared with train.")] = None,
    test_tgt: Annotated[Path | None, typer.Option(help="Test target.")] = None,
    tokenizer: Annotated[Path | None, typer.Option(help="Tokenizer folder: also report unknown pieces.")] = None,
    max_chars: Annotated[int, typer.Option(help="Lines longer than this are reported.")] = 1000,
    max_ratio: Annotated[float, typer.Option(help="Length ratios this far off the corpus median are reported.")] = 3.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
) -> None:
    """Check a parallel corpus: line counts, bad bytes, empty lines, duplicates, copies, length
    outliers, long lines, train/valid/test overlap, unknown pieces. Exits 1 when it finds an error."""
    from mt_cli.doctor import run

    text, has_error = run(
        src, tgt, (valid_src, valid_tgt), (test_src, test_tgt), tokenizer, max_chars, max_ratio, as_json
    )
    typer.echo(text)
    if has_error:
        raise typer.Exit(1)


@app.command("export")
@friendly
def export_model(
    checkpoint: Annotated[Path, typer.Option(help="Checkpoint to export, e.g. RUN/best.pt.")],
    out: Annotated[Path, typer.Option(help="New folder to write (an existing non-empty one is refused).")],
    format_: Annotated[
        str, typer.Option("--format", help="hf: a Hugging Face MarianMTModel folder; ct2: a CTranslate2 model.")
    ] = "hf",
    quantization: Annotated[
        str | None, typer.Option(help="ct2 only: int8, int8_float32, bfloat16, ... (CTranslate2's names).")
    ] = None,
) -> None:
    """Export a checkpoint to Hugging Face transformers (MarianMTModel) or CTranslate2, same weights."""
    from mt_cli.checkpoint import load
    from mt_cli.export import export

    err(f"wrote {export(load(checkpoint), out, format_, quantization)}")


@app.command("config")
@friendly
def show_config(
    preset: Annotated[str | None, typer.Option(help="Model size: tiny, small, base or big.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config to layer on the preset.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a field (repeatable).")] = None,
) -> None:
    """Print the full resolved config as YAML: every field, with the value a run would use."""
    from mt_cli.config import build_config, to_yaml

    typer.echo(to_yaml(build_config(preset, config, None, set_)), nl=False)


@app.command()
@friendly
def quickstart(
    data: Annotated[
        Path | None, typer.Option(help="Local Multi30k folder; without it the files come from the HF hub.")
    ] = None,
    out: Annotated[Path, typer.Option(help="Run folder.")] = Path("checkpoints/quickstart-de-en"),
    max_minutes: Annotated[float, typer.Option(help="Training time.")] = 20.0,
    device: Device = "auto",
) -> None:
    """Train German->English on Multi30k with the small preset, then translate and score test2016."""
    from mt_cli.quickstart import run_quickstart

    result = run_quickstart(data, out, max_minutes, device, log=err)
    typer.echo(f"test2016 de->en: BLEU {result['bleu']:.2f}, chrF {result['chrf']:.2f}")
    typer.echo(result["signature"]["bleu"])


def main() -> None:
    app(prog_name="mt")


if __name__ == "__main__":
    sys.exit(main())
