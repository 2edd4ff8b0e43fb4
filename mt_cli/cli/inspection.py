"""Looking inside a run and a model, and handing it to other toolkits."""

from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.app import (
    INSPECT,
    INTEROP,
    NOTHING_GIVEN,
    Given,
    app,
    config_options,
    err,
    friendly,
)
from mt_cli.cli.decoding import SourceLang, TargetLang
from mt_cli.config import TrainConfig


@app.command(rich_help_panel=INSPECT)
@friendly
def attention(
    checkpoint: Annotated[Path, typer.Option(help="A checkpoint written by `mt train`.")],
    src: Annotated[str, typer.Option(help="The source sentence.")],
    out: Annotated[Path, typer.Option(help="Folder for the PNG files.")],
    tgt: Annotated[
        str | None, typer.Option(help="A reference translation; default: the model's own.")
    ] = None,
) -> None:
    """Draw every layer's and head's attention: encoder, decoder self- and encoder-decoder."""
    from mt_cli.tools.heatmap import attention_figures

    for path in attention_figures(checkpoint, src, tgt, out):
        err(f"wrote {path}")


@app.command(rich_help_panel=INSPECT)
@friendly
def plot(
    runs: Annotated[
        list[Path], typer.Argument(help="Run folders (the --out of mt train); several overlay.")
    ],
    out: Annotated[Path, typer.Option(help="The PNG file to write.")],
) -> None:
    """Draw training loss, validation loss, validation BLEU and learning rate against step."""
    from mt_cli.tools.plot import draw_curves

    err(f"wrote {draw_curves(runs, out)}")


@app.command(rich_help_panel=INSPECT)
@friendly
def report(
    run: Annotated[Path, typer.Argument(help="A run folder (the --out of mt train).")],
    out: Annotated[Path, typer.Option(help="The Markdown file to write; the curves go beside it.")],
) -> None:
    """Write a Markdown report of a run: scores, training, data, environment, curves, config."""
    from mt_cli.tools.report import write_report

    err(f"wrote {write_report(run, out)}")


@app.command("export", rich_help_panel=INTEROP)
@friendly
def export_model(
    checkpoint: Annotated[Path, typer.Option(help="Checkpoint to export, e.g. RUN/best.pt.")],
    out: Annotated[
        Path, typer.Option(help="New folder to write (an existing non-empty one is refused).")
    ],
    format_: Annotated[
        str,
        typer.Option(
            "--format", help="hf: a Hugging Face MarianMTModel folder; ct2: a CTranslate2 model."
        ),
    ] = "hf",
    quantization: Annotated[
        str | None,
        typer.Option(help="ct2 only: int8, int8_float32, bfloat16, ... (CTranslate2's names)."),
    ] = None,
) -> None:
    """Export a checkpoint to Hugging Face (MarianMTModel) or CTranslate2, with the same weights."""
    from mt_cli.interop import export
    from mt_cli.model.checkpoint import load

    err(f"wrote {export(load(checkpoint), out, format_, quantization)}")


@app.command("import", rich_help_panel=INTEROP)
@friendly
@config_options(TrainConfig, only=("int8_tolerance",))
def import_model(
    folder: Annotated[
        Path,
        typer.Argument(
            help="A MarianMTModel or M2M100 / NLLB-200 folder (save_pretrained's), a hub id to "
            "fetch, or a Marian folder as Firefox Translations ships its students (model .bin, "
            ".spm vocabulary, config .yml)."
        ),
    ],
    out: Annotated[Path, typer.Option(help="The mt checkpoint to write, e.g. opus-de-en.pt.")],
    format_: Annotated[str, typer.Option("--format", help="hf: a Hugging Face folder.")] = "hf",
    dev_src: Annotated[
        Path | None,
        typer.Option(help="Dev source lines: int8 decoding is checked on them against fp32."),
    ] = None,
    dev_ref: Annotated[Path | None, typer.Option(help="Their reference translations.")] = None,
    source_lang: SourceLang = None,
    target_lang: TargetLang = None,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Import a pretrained model (Hugging Face Marian / OPUS-MT, M2M100, NLLB-200, a Firefox
    Translations student) as an mt checkpoint: translate, score, fine-tune (`mt train --init`) and
    serve it like any other. It decodes in fp32, or in int8 on a CPU where a dev set shows int8
    within --int8-tolerance BLEU of fp32."""
    from mt_cli.errors import MtError
    from mt_cli.interop import import_folder

    if format_ != "hf":
        raise MtError(f"--format {format_!r}: the one import format is hf (a Hugging Face folder)")
    if (dev_src is None) != (dev_ref is None):
        raise MtError("a dev set is two files: give both --dev-src and --dev-ref, or neither")
    dev = (dev_src, dev_ref) if dev_src is not None and dev_ref is not None else None
    tolerance = options.build(TrainConfig).int8_tolerance
    languages = (source_lang, target_lang)
    err(f"wrote {import_folder(folder, out, err, dev, tolerance, languages)}")
