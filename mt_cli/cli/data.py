"""Data commands: tokenizers and the corpus check."""

from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.app import (
    DATA,
    NOTHING_GIVEN,
    ExistingFile,
    Given,
    app,
    config_options,
    err,
    friendly,
    tokenizer_app,
)
from mt_cli.config import DoctorConfig, TokenizerConfig


@tokenizer_app.command("train")
@friendly
@config_options(TokenizerConfig)
def tokenizer_train(
    src: ExistingFile,
    tgt: ExistingFile,
    out: Annotated[Path, typer.Option(help="Folder to write the SentencePiece model(s) into.")],
    options: Given = NOTHING_GIVEN,
) -> None:
    """Train a SentencePiece tokenizer on both sides of a parallel corpus (joint by default)."""
    from mt_cli.data.sources import read_parallel
    from mt_cli.data.tokenizer import train_tokenizer

    cfg = options.build(TokenizerConfig)
    corpus = read_parallel(src, tgt)
    tok = train_tokenizer(corpus.src, corpus.tgt, cfg)
    tok.save(out)
    err(
        f"wrote {out} ({'joint' if tok.joint else 'separate'}: "
        f"{tok.src_vocab_size}/{tok.tgt_vocab_size} pieces)"
    )


@app.command(rich_help_panel=DATA)
@friendly
@config_options(DoctorConfig)
def doctor(
    src: ExistingFile,
    tgt: ExistingFile,
    valid_src: Annotated[
        Path | None, typer.Option(help="Validation source, checked and compared with train.")
    ] = None,
    valid_tgt: Annotated[Path | None, typer.Option(help="Validation target.")] = None,
    test_src: Annotated[
        Path | None, typer.Option(help="Test source, checked and compared with train.")
    ] = None,
    test_tgt: Annotated[Path | None, typer.Option(help="Test target.")] = None,
    tokenizer: Annotated[
        Path | None, typer.Option(help="Tokenizer folder: also report unknown pieces.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Check a parallel corpus: line counts, bad bytes, empty lines, duplicates, copies, length
    outliers, long lines, train/valid/test overlap, unknown pieces; exits 1 on an error."""
    from mt_cli.data.doctor import run

    limits = options.build(DoctorConfig)
    text, has_error = run(
        src, tgt, (valid_src, valid_tgt), (test_src, test_tgt), tokenizer, limits, as_json
    )
    typer.echo(text)
    if has_error:
        raise typer.Exit(1)
