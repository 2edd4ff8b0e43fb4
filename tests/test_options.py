"""Each option is described once: config fields carry their help, the commands' options and
docs/configuration.md are generated from them, and errors name fields that the CLI prints as flags.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from mt_cli import Translator
from mt_cli.cli import app
from mt_cli.config import SECTIONS, DecodeConfig, ServeConfig, TrainConfig
from mt_cli.config.reference import render
from mt_cli.errors import MtError

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
runner = CliRunner()


def _options(*path: str) -> set[str]:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}


def test_every_config_field_has_a_description():
    missing = [
        f"{name}.{f.name}"
        for name, cls in SECTIONS.items()
        for f in dataclasses.fields(cls)
        if len(f.metadata.get("help", "").strip()) < 8
    ]
    assert not missing, missing


def test_docs_configuration_is_generated_from_the_fields_and_current():
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == render(), "run: python -m mt_cli.config.reference --write docs/configuration.md"
    assert "| `beam` | `5` | `--beam` | Beam size; 1 is greedy. |" in page


def test_every_decoding_field_is_an_option_of_translate_serve_and_evaluate():
    # all but the precision forced scores are measured in: mt score's --precision
    searching = [f for f in dataclasses.fields(DecodeConfig) if f.name != "score_precision"]
    assert all(f.metadata["cli"] for f in searching)
    flags = {"--" + f.name.replace("_", "-") for f in searching}
    for command in ("translate", "serve", "evaluate"):
        assert flags <= _options(command), (command, sorted(flags - _options(command)))
    assert {"--precision", "--batch-size", "--batch-tokens"} <= _options("score")
    serve_flags = {
        "--" + f.name.replace("_", "-")
        for f in dataclasses.fields(ServeConfig)
        if f.metadata["cli"]
    }
    assert serve_flags <= _options("serve")
    assert "--no-shortlist" in _options("translate")


def test_train_offers_exactly_the_fields_marked_for_the_command_line():
    marked = {
        f.metadata["flag"] or "--" + f.name.replace("_", "-")
        for f in dataclasses.fields(TrainConfig)
        if f.metadata["cli"]
    }
    unmarked = {
        "--" + f.name.replace("_", "-")
        for f in dataclasses.fields(TrainConfig)
        if not f.metadata["cli"]
    }
    offered = _options("train")
    assert marked <= offered and "--dist-timeout" in offered
    assert not unmarked & offered, sorted(unmarked & offered)  # those are set with --set or YAML


def test_a_library_error_names_the_field_and_the_command_line_prints_the_flag(tmp_path):
    tr = Translator.load(FIXTURE, device="cpu", beam=2)
    with pytest.raises(
        MtError, match=r"output.nbest 3 is larger than the beam \(2\).*raise decode.beam to 3"
    ):
        tr.search(["Ein Hund."], nbest=3)
    src = tmp_path / "in.de"
    src.write_text("Ein Hund.\n", encoding="utf-8")
    args = [
        "translate",
        "--checkpoint",
        str(FIXTURE),
        str(src),
        "--beam",
        "2",
        "--format",
        "jsonl",
        "--nbest",
        "3",
    ]
    result = runner.invoke(app, [*args, "--output", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 1
    assert result.output.startswith("mt: error: --nbest 3 is larger than the beam (2)")
    assert "raise --beam to 3 or more" in result.output and "decode.beam" not in result.output
    # checked once, by the search, before anything is written
    assert list(tmp_path.iterdir()) == [src]


def test_tuple_fields_are_comma_separated_options_and_bad_numbers_are_one_line(tmp_path):
    result = runner.invoke(
        app,
        [
            "tune-decoding",
            "--checkpoint",
            str(FIXTURE),
            "--src",
            str(tmp_path / "x"),
            "--ref",
            str(tmp_path / "y"),
            "--beams",
            "1,x",
        ],
    )
    assert (
        result.exit_code == 1
        and result.output == "mt: error: '1,x': expected comma-separated numbers\n"
    )
