"""The data pipeline's commands: clean a corpus, back-translate monolingual text, distill a teacher
into a small student."""

from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.app import (
    DATA,
    NOTHING_GIVEN,
    TRAIN,
    Device,
    ExistingFile,
    Given,
    app,
    config_options,
    err,
    friendly,
)
from mt_cli.config import DEVICE, DecodeConfig, TrainConfig
from mt_cli.config.pipeline import CleanConfig, DistillConfig

SetOptions = Annotated[
    list[str] | None,
    typer.Option("--set", help="Any clean.* field: --set clean.rules=empty,duplicate."),
]


@app.command(rich_help_panel=DATA)
@friendly
@config_options(CleanConfig)
def clean(
    src: ExistingFile,
    tgt: ExistingFile,
    out_prefix: Annotated[
        Path, typer.Option(help="Writes PREFIX.<lang> (else .src/.tgt) and PREFIX.removed.tsv.")
    ],
    device: Device = DEVICE,
    set_: SetOptions = None,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Remove the pairs of a parallel corpus that would hurt training: empty, over-long or unequal
    sides, copies, numbers or URLs that differ, symbols, the wrong script or language, a model's
    unlikely pairs, duplicates. The inputs are left as they are; counts per rule are printed."""
    from mt_cli.tools.clean import clean_corpus, summary
    from mt_cli.tools.pipeline_config import clean_config

    cfg = clean_config(options.of(CleanConfig), set_ or [])
    typer.echo(summary(clean_corpus(src, tgt, out_prefix, cfg, device, log=err)))


@app.command(rich_help_panel=DATA)
@friendly
@config_options(DecodeConfig)
def backtranslate(
    checkpoint: Annotated[
        Path, typer.Option(help="A model from the target language into the source language.")
    ],
    mono: Annotated[Path, typer.Option(help="Target-language text, one sentence per line.")],
    out_prefix: Annotated[
        Path,
        typer.Option(
            help="Writes PREFIX.<source> (synthetic) and PREFIX.<target> (else .src/.tgt)."
        ),
    ],
    device: Device = DEVICE,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Translate target-language text into synthetic sources, as aligned pairs for training
    (beam search, or sampling: --method sample --sampling-topk 10). Resumable: a rerun after a kill
    goes on from the last chunk translated. Train on them beside the real pairs with data.pairs
    (a weight, and a tag such as <BT>: docs/pipeline.md)."""
    from mt_cli.tools.backtranslate import backtranslate as run

    done = run(checkpoint, mono, out_prefix, device, log=err, **options.of(DecodeConfig))
    err(
        f"wrote {done.pairs} pairs to {done.src} and {done.tgt}"
        + (f" ({done.blank} blank lines left out)" if done.blank else "")
    )


@app.command(rich_help_panel=TRAIN)
@friendly
@config_options(TrainConfig, DistillConfig, types={"batch_tokens": str})
def distill(
    teacher: Annotated[
        list[Path], typer.Option(help="A teacher checkpoint; repeat for an ensemble.")
    ],
    train_src: ExistingFile,
    valid_src: ExistingFile,
    valid_tgt: ExistingFile,
    out: Annotated[
        Path,
        typer.Option(
            help="Folder: the teacher's translations, the student's run, student.pt, ct2/."
        ),
    ],
    train_tgt: Annotated[
        Path | None,
        typer.Option(
            help="The sources' own translations; without it, the sources are monolingual text."
        ),
    ] = None,
    preset: Annotated[
        str | None, typer.Option(help="The student's size: tiny, small, base or big.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="The student's YAML config, as mt train takes.")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="A field of the student's config, or of distill: --set distill.nbest=2."
        ),
    ] = None,
    cache: Annotated[Path | None, typer.Option(help="Where tokenized corpora are cached.")] = None,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Distill teachers into a student: the teachers translate the training sources (beam search),
    the student trains on their translations (mt train's options and config), and OUT/student.pt
    (int8 weights, its shortlist) and OUT/ct2 (CTranslate2) are written. Rerun to resume."""
    from mt_cli.cli.training import train_fields
    from mt_cli.config import build_config
    from mt_cli.tools.distill import distill as run
    from mt_cli.tools.distill import monolingual_spec
    from mt_cli.tools.pipeline_config import split_sets
    from mt_cli.train.inputs import DataSpec

    given = train_fields(options)
    student_sets, dcfg = split_sets(set_ or [], options.of(DistillConfig))
    cfg = build_config(preset, config, {"train": given}, student_sets)
    if train_tgt is None:
        data = monolingual_spec(train_src, valid_src, valid_tgt, cache)
    else:
        data = DataSpec.text_files(train_src, train_tgt, valid_src, valid_tgt, cache=cache)
    # --device: teachers' and student's
    done = run(teacher, data, out, cfg, dcfg, cfg.train.device, log=err)
    err(f"wrote {done.student}" + (f" and {done.ct2}" if done.ct2 else ""))
