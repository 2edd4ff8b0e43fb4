"""Data commands: tokenizers and the corpus check."""

from pathlib import Path
from typing import Annotated, Any

import typer

from mt_cli.cli.app import DATA, Device, ExistingFile, app, config_options, err, friendly, tokenizer_app
from mt_cli.config import DEVICE, DoctorConfig, TokenizerConfig
from mt_cli.config.pipeline import CleanConfig


@tokenizer_app.command("train")
@friendly
@config_options(TokenizerConfig)
def tokenizer_train(
    src: ExistingFile,
    tgt: ExistingFile,
    out: Annotated[Path, typer.Option(help="Folder to write the SentencePiece model(s) into.")],
    options: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Train a SentencePiece tokenizer on both sides of a parallel corpus (joint by default)."""
    from mt_cli.data.sources import read_parallel
    from mt_cli.data.tokenizer import train_tokenizer

    cfg = TokenizerConfig(**(options or {}).get("tokenizer", {}))
    corpus = read_parallel(src, tgt)
    tok = train_tokenizer(corpus.src, corpus.tgt, cfg)
    tok.save(out)
    err(f"wrote {out} ({'joint' if tok.joint else 'separate'}: {tok.src_vocab_size}/{tok.tgt_vocab_size} pieces)")


@app.command(rich_help_panel=DATA)
@friendly
@config_options(DoctorConfig)
def doctor(
    src: ExistingFile,
    tgt: ExistingFile,
    valid_src: Annotated[Path | None, typer.Option(help="Validation source, checked and compared with train.")] = None,
    valid_tgt: Annotated[Path | None, typer.Option(help="Validation target.")] = None,
    test_src: Annotated[Path | None, typer.Option(help="Test source, checked and compared with train.")] = None,
    test_tgt: Annotated[Path | None, typer.Option(help="Test target.")] = None,
    tokenizer: Annotated[Path | None, typer.Option(help="Tokenizer folder: also report unknown pieces.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
    options: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Check a parallel corpus: line counts, bad bytes, empty lines, duplicates, copies, length
    outliers, long lines, train/valid/test overlap, unknown pieces. Exits 1 when it finds an error."""
    from mt_cli.data.doctor import run

    limits = DoctorConfig(**(options or {}).get("doctor", {}))
    text, has_error = run(src, tgt, (valid_src, valid_tgt), (test_src, test_tgt), tokenizer, limits, as_json)
    typer.echo(text)
    if has_error:
        raise typer.Exit(1)


@app.command(rich_help_panel=DATA)
@friendly
@config_options(CleanConfig)
def clean(
    src: ExistingFile,
    tgt: ExistingFile,
    out_prefix: Annotated[Path, typer.Option(help="Writes PREFIX.<lang> (else .src/.tgt) and PREFIX.removed.tsv.")],
    device: Device = DEVICE,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Any clean.* field: --set clean.rules=empty,duplicate.")
    ] = None,
    options: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Remove the pairs of a parallel corpus that would hurt training: empty, over-long or unequal
    sides, copies, numbers or URLs that differ, symbols, the wrong script or language, a model's
    unlikely pairs, duplicates. The inputs are left as they are; counts per rule are printed."""
    from mt_cli.tools.clean import clean_config, clean_corpus, summary

    cfg = clean_config((options or {}).get("clean", {}), set_ or [])
    typer.echo(summary(clean_corpus(src, tgt, out_prefix, cfg, device, log=err)))
