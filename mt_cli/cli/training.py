"""Training commands: train, average, config, quickstart."""

from pathlib import Path
from typing import Annotated, Any

import typer

from mt_cli.cli.app import NOTHING_GIVEN, TRAIN, Device, Given, app, config_options, err, friendly
from mt_cli.config import DEVICE, QuickstartConfig, TrainConfig
from mt_cli.errors import MtError


def train_fields(options: Given) -> dict[str, Any]:
    """The train.* fields given as options (mt train's, mt distill's), --batch-tokens N or auto
    (stored as 0) read as a number."""
    given = options.of(TrainConfig)
    value = given.get("batch_tokens")
    if value == "auto":
        given["batch_tokens"] = 0
    elif value is not None:
        if not value.isdigit():
            raise MtError(f"--batch-tokens {value!r}: expected a number of tokens or auto")
        given["batch_tokens"] = int(value)
    return given


Dataset = Annotated[
    str | None,
    typer.Option(
        help="A Hugging Face dataset (name or local folder) for splits not given as files."
    ),
]
DatasetConfig = Annotated[str | None, typer.Option(help="The dataset's configuration, e.g. de-en.")]
Split = Annotated[str, typer.Option(help="The dataset's training split.")]
ValidSplit = Annotated[str, typer.Option(help="The dataset's validation split.")]
SrcColumn = Annotated[
    str | None,
    typer.Option(
        help="Source column, or key of a 'translation' column (de: a language code is recorded)."
    ),
]
TgtColumn = Annotated[
    str | None, typer.Option(help="Target column or key (e.g. en; recorded likewise).")
]
TokenizerFolder = Annotated[
    Path | None,
    typer.Option(help="Tokenizer folder; without it one is trained into OUT/tokenizer."),
]
CacheFolder = Annotated[
    Path | None,
    typer.Option(help="Where tokenized corpora are cached (default $MT_CACHE or ~/.cache/mt)."),
]
ConfigFile = Annotated[
    Path | None, typer.Option(help="YAML config (model/tokenizer/train/decode/data).")
]
Overrides = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override any field: --set model.dropout=0 (repeatable)."),
]
Preset = Annotated[str | None, typer.Option(help="Model size: tiny, small, base or big.")]
TextFile = Annotated[
    Path | None, typer.Option(help="A UTF-8 text file, one sentence per line (.gz too).")
]
Table = Annotated[
    Path | None,
    typer.Option(
        help="Pairs in one file: .tsv (source<TAB>target), .csv, .jsonl or .parquet (.gz too)."
    ),
]


@app.command(rich_help_panel=TRAIN)
@friendly
@config_options(TrainConfig, types={"batch_tokens": str})  # --batch-tokens auto
def train(
    out: Annotated[
        Path, typer.Option(help="Run folder: best.pt, last.pt, log.jsonl. Rerun to resume.")
    ],
    train_src: TextFile = None,
    train_tgt: TextFile = None,
    valid_src: TextFile = None,
    valid_tgt: TextFile = None,
    train: Table = None,
    valid: Table = None,
    dataset: Dataset = None,
    dataset_config: DatasetConfig = None,
    train_split: Split = "train",
    valid_split: ValidSplit = "validation",
    src_lang: SrcColumn = None,
    tgt_lang: TgtColumn = None,
    tokenizer: TokenizerFolder = None,
    cache: CacheFolder = None,
    preset: Preset = None,
    config: ConfigFile = None,
    set_: Overrides = None,
    options: Given = NOTHING_GIVEN,  # the train.* fields given as options
) -> None:
    """Train a Transformer: writes OUT/best.pt (best validation BLEU), OUT/last.pt, OUT/log.jsonl.

    Data: text files (--train-src/--train-tgt, --valid-src/--valid-tgt), a table file per split
    (--train, --valid), or --dataset; several directions in one model: data.pairs in --config.
    Several processes: torchrun --nproc_per_node=N -m mt_cli train ...
    The checkpoint records the languages the data names: the text files' suffixes (train.de), or
    --src-lang/--tgt-lang when they are language codes (`mt serve` lists them).

    At the end, with train.average_last, best.pt becomes the average when it validates as well;
    with train.tune_beams / train.tune_length_penalties, the pair that validates best becomes its
    decoding default (the recipes in configs/ set both).
    """
    from mt_cli.config import build_config
    from mt_cli.train.inputs import data_spec
    from mt_cli.train.loop import train as run_training

    cfg = build_config(preset, config, {"train": train_fields(options)}, set_)
    files = {
        "train_src": train_src,
        "train_tgt": train_tgt,
        "valid_src": valid_src,
        "valid_tgt": valid_tgt,
        "train": train,
        "valid": valid,
    }
    if cfg.data.pairs:  # several directions, from the config's data section
        spec = _pairs_spec(cfg.data, files, dataset, tokenizer, cache)
    else:
        splits, columns = (train_split, valid_split), (src_lang, tgt_lang)
        spec = data_spec(files, dataset, dataset_config, splits, columns, tokenizer, cache)
    run_training(spec, out, cfg, log=err)


def _pairs_spec(
    data: Any,
    files: dict[str, Path | None],
    dataset: str | None,
    tokenizer: Path | None,
    cache: Path | None,
) -> Any:
    """data.pairs' DataSpec; data options given beside it are refused, naming them."""
    from mt_cli.errors import MtError
    from mt_cli.train.inputs import DataSpec

    given = [f"--{k.replace('_', '-')}" for k, v in files.items() if v] + (
        ["--dataset"] if dataset else []
    )
    if given:
        raise MtError(
            f"the config lists data.pairs; give the data one way: drop {', '.join(given)}"
        )
    return DataSpec.of_pairs(data, tokenizer, cache)


@app.command(rich_help_panel=TRAIN)
@friendly
def average(
    checkpoints: Annotated[
        list[Path], typer.Argument(help="Checkpoints of one run, e.g. RUN/step*.pt.")
    ],
    out: Annotated[Path, typer.Option(help="Where to write the averaged checkpoint.")],
) -> None:
    """Average the weights of several checkpoints of one run into one checkpoint."""
    from mt_cli.model import checkpoint

    checkpoint.save(out, checkpoint.average(checkpoints))
    err(f"averaged {len(checkpoints)} checkpoints into {out}")


@app.command("config", rich_help_panel=TRAIN)
@friendly
def show_config(
    preset: Preset = None,
    config: Annotated[Path | None, typer.Option(help="YAML config to layer on the preset.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a field (repeatable).")
    ] = None,
) -> None:
    """Print the full resolved config as YAML: every field, with the value a run would use."""
    from mt_cli.config import build_config, to_yaml

    typer.echo(to_yaml(build_config(preset, config, None, set_)), nl=False)


@app.command(rich_help_panel=TRAIN)
@friendly
@config_options(QuickstartConfig)
def quickstart(
    data: Annotated[
        Path | None,
        typer.Option(help="Local Multi30k folder; without it the files come from the HF hub."),
    ] = None,
    device: Device = DEVICE,
    options: Given = NOTHING_GIVEN,
) -> None:
    """Train German->English on Multi30k (small preset), then translate and score test2016."""
    from mt_cli.tools.quickstart import run_quickstart

    result = run_quickstart(data, options.build(QuickstartConfig), device, log=err)
    typer.echo(f"test2016 de->en: BLEU {result['bleu']:.2f}, chrF {result['chrf']:.2f}")
    typer.echo(result["signature"]["bleu"])
