"""train.init_layers: a smaller model started from some of a bigger one's layers (shrink and
fine-tune), checked on a tiny model trained here: the kept layers are the source's, the rest of
the model is too, and training from them starts near the source's loss, not a random model's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mt_cli import Translator
from mt_cli.config import build_config
from mt_cli.errors import MtError
from mt_cli.model import checkpoint
from mt_cli.train.inputs import DataSpec
from mt_cli.train.loop import train
from mt_cli.train.shrink import shrink, spaced

SETS = [
    "train.batch_tokens=500",
    "train.warmup_steps=20",
    "train.lr=3e-3",
    "model.dropout=0.0",
    "train.log_every=1",
]


@pytest.fixture(scope="module")
def deep(tmp_path_factory, corpus_files) -> Path:
    """A 3+2-layer tiny model trained until it translates the toy language: its best.pt."""
    out = tmp_path_factory.mktemp("deep") / "run"
    sets = [
        *SETS,
        "model.d_model=64",
        "model.ffn_dim=128",
        "model.enc_layers=3",
        "model.dec_layers=2",
        "tokenizer.vocab_size=100",
        "train.max_steps=250",
        "train.valid_every=250",
    ]
    train(spec(corpus_files), out, build_config("tiny", sets=sets), log=lambda *_: None)
    return out / "best.pt"


def spec(f: dict[str, Path]) -> DataSpec:
    return DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"])


def test_spaced_layers_run_evenly_from_the_first_to_the_last():
    assert spaced(4, 4) == [0, 1, 2, 3]
    assert spaced(4, 2) == [0, 3]
    assert spaced(4, 3) == [0, 2, 3]
    assert spaced(6, 3) == [0, 2, 5]
    assert spaced(4, 1) == [0]


def test_a_shrunk_checkpoint_holds_the_kept_layers_and_everything_else_of_its_source(deep):
    source = checkpoint.load(deep)
    small = shrink(source, "2+1", "teacher.pt")
    assert (small.config.model.enc_layers, small.config.model.dec_layers) == (2, 1)
    model = checkpoint.Checkpoint(
        small.config, small.tokenizer, small.model_state, None
    ).build_model()
    big = source.build_model()
    for mine, theirs in (
        (model.encoder.layers[0], big.encoder.layers[0]),
        (model.encoder.layers[1], big.encoder.layers[2]),
        (model.decoder.layers[0], big.decoder.layers[0]),
    ):
        for (name, a), (_, b) in zip(
            mine.state_dict().items(), theirs.state_dict().items(), strict=True
        ):
            assert torch.equal(a, b), name
    assert torch.equal(model.encoder.embeddings.token.weight, big.encoder.embeddings.token.weight)
    every = shrink(source, "3+2", "teacher.pt")  # all layers kept: the same model
    lines = ["ein hund läuft", "die katze schläft"]
    assert Translator.from_checkpoint(every, "cpu").translate(lines) == Translator.from_checkpoint(
        source, "cpu"
    ).translate(lines)


def test_a_student_started_from_kept_layers_begins_near_its_teachers_loss(
    deep, corpus_files, tmp_path
):
    losses, logs = {}, {}
    for name, extra in (
        ("shrunk", [f"train.init={deep}", "train.init_layers=2+1"]),
        (
            "scratch",
            [
                "model.d_model=64",
                "model.ffn_dim=128",
                "model.enc_layers=2",
                "tokenizer.vocab_size=100",
            ],
        ),
    ):
        logs[name] = []
        cfg = build_config("tiny", sets=[*SETS, "train.max_steps=3", "train.valid_every=3", *extra])
        train(spec(corpus_files), tmp_path / name, cfg, log=logs[name].append)
        entries = [json.loads(e) for e in (tmp_path / name / "log.jsonl").read_text().splitlines()]
        losses[name] = next(e["loss"] for e in entries if "loss" in e)
    student = checkpoint.load(tmp_path / "shrunk" / "best.pt")
    assert (student.config.model.enc_layers, student.config.model.dec_layers) == (2, 1)
    assert losses["shrunk"] < 0.7 * losses["scratch"]  # 3.03 against 5.26 here
    assert any(
        "keeping 2+1 of them (encoder [0, 2], decoder [0])" in line for line in logs["shrunk"]
    )


def test_keeping_more_layers_than_the_source_has_names_the_field(deep, corpus_files, tmp_path):
    cfg = build_config(
        "tiny", sets=[*SETS, f"train.init={deep}", "train.init_layers=4+1", "train.max_steps=1"]
    )
    with pytest.raises(MtError, match=r"train.init_layers 4\+1: .* has 3\+2 layers"):
        train(spec(corpus_files), tmp_path / "run", cfg, log=lambda *_: None)
    with pytest.raises(MtError, match="train.init_layers must be encoder.decoder layer counts"):
        build_config("tiny", sets=[f"train.init={deep}", "train.init_layers=4-1"])
    with pytest.raises(MtError, match="train.init_layers keeps layers of train.init"):
        build_config("tiny", sets=["train.init_layers=2+1"])


def test_distill_starts_its_student_from_the_teachers_kept_layers(deep, corpus_files, tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    f = corpus_files
    args = [
        "distill",
        "--teacher",
        deep,
        "--train-src",
        f["train_src"],
        "--train-tgt",
        f["train_tgt"],
        "--valid-src",
        f["valid_src"],
        "--valid-tgt",
        f["valid_tgt"],
        "--out",
        tmp_path / "d",
        "--preset",
        "tiny",
        "--init",
        deep,
        "--init-layers",
        "2+1",
        "--max-steps",
        "3",
        "--batch-tokens",
        "500",
        "--device",
        "cpu",
        "--set",
        "train.valid_every=3",
        "--set",
        "decode.beam=1",
    ]
    done = CliRunner().invoke(app, [str(a) for a in args])
    assert done.exit_code == 0, done.output
    student, teacher = checkpoint.load(tmp_path / "d" / "student.pt"), checkpoint.load(deep)
    assert (student.config.model.enc_layers, student.config.model.dec_layers) == (2, 1)
    assert student.config.model.d_model == teacher.config.model.d_model == 64
    # the teacher's pieces, not a new tokenizer
    assert student.tokenizer.to_state() == teacher.tokenizer.to_state()
