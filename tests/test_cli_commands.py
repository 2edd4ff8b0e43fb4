"""Promises of the `mt` commands that had no test: versions, grouped help, BPE tokenizers,
`mt config`, `mt quickstart` on a local folder, `mt evaluate --tokenize`."""

from __future__ import annotations

import json
import subprocess
import sys

import sacrebleu
import sentencepiece as spm
import yaml

from conftest import make_pairs, write_lines
from mt_cli import __version__
from mt_cli.config import DecodeConfig, ModelConfig, TokenizerConfig, TrainConfig


def mt(*args, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "mt_cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"mt {' '.join(map(str, args))} failed:\n{done.stderr}")
    return done


def test_version_names_mt_and_torch_and_help_groups_the_commands_by_stage():
    import torch

    out = mt("--version").stdout
    assert f"mt {__version__}" in out and f"torch {torch.__version__}" in out
    text = mt("--help").stdout
    panels = [
        line.split("─ ")[1].split(" ")[0] for line in text.splitlines() if line.startswith("╭─ ")
    ]
    assert panels == ["Options", "Data", "Train", "Decode", "Serve", "Inspect", "Interop"]
    for command in (
        "tokenizer",
        "doctor",
        "train",
        "translate",
        "evaluate",
        "serve",
        "attention",
        "export",
    ):
        assert f" {command} " in text, command


def test_tokenizer_train_with_model_type_bpe_trains_a_bpe_model(corpus_files, tmp_path):
    for kind in ("bpe", "unigram"):
        mt(
            "tokenizer",
            "train",
            "--src",
            corpus_files["train_src"],
            "--tgt",
            corpus_files["train_tgt"],
            "--vocab-size",
            100,
            "--model-type",
            kind,
            "--out",
            tmp_path / kind,
        )
    scores = {}
    for kind in ("bpe", "unigram"):
        sp = spm.SentencePieceProcessor(model_file=str(tmp_path / kind / "joint.model"))
        scores[kind] = [sp.get_score(i) for i in range(4, sp.get_piece_size())]
    # BPE scores its pieces by merge order (0, -1, -2, ...); unigram by log-probability.
    assert scores["bpe"] == [float(-i) for i in range(len(scores["bpe"]))]
    assert any(s != int(s) for s in scores["unigram"])


def test_mt_config_prints_every_field_resolved_from_preset_yaml_and_set(tmp_path):
    (tmp_path / "c.yaml").write_text("train:\n  lr: 0.002\ndecode:\n  beam: 7\n")
    out = yaml.safe_load(
        mt(
            "config",
            "--preset",
            "tiny",
            "--config",
            tmp_path / "c.yaml",
            "--set",
            "model.dropout=0.3",
        ).stdout
    )
    assert out["model"]["d_model"] == 32 and out["model"]["dropout"] == 0.3
    assert out["train"]["lr"] == 0.002 and out["decode"]["beam"] == 7
    for section, cls in (
        ("model", ModelConfig),
        ("tokenizer", TokenizerConfig),
        ("train", TrainConfig),
        ("decode", DecodeConfig),
    ):
        assert set(out[section]) == set(cls.__dataclass_fields__), section
    bad = mt("config", "--set", "train.lr=-1", check=False)
    assert (
        bad.returncode == 1
        and bad.stderr.startswith("mt: error: ")
        and "train.lr must be positive" in bad.stderr
    )


def _toy_multi30k(folder, names=("train", "val", "test2016")):
    folder.mkdir()
    for i, name in enumerate(names):
        de, en = make_pairs(300 if name == "train" else 20, seed=i)
        write_lines(folder / f"{name}.de", de)
        write_lines(folder / f"{name}.en", en)
    return folder


def test_quickstart_names_the_missing_files_of_a_local_folder(tmp_path):
    folder = _toy_multi30k(tmp_path / "data", names=("train", "val"))
    done = mt("quickstart", "--data", folder, "--out", tmp_path / "run", check=False)
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        == f"mt: error: {folder}: missing test2016.de, test2016.en; expected Multi30k text files"
    )


def test_quickstart_trains_translates_and_scores_a_tiny_local_folder(tmp_path):
    folder = _toy_multi30k(tmp_path / "data")
    done = mt(
        "quickstart",
        "--data",
        folder,
        "--out",
        tmp_path / "run",
        "--max-minutes",
        0.05,
        "--device",
        "cpu",
    )
    record = json.loads((tmp_path / "run" / "test2016.json").read_text())
    hyps = (tmp_path / "run" / "test2016.hyp.en").read_text(encoding="utf-8").splitlines()
    refs = (folder / "test2016.en").read_text(encoding="utf-8").splitlines()
    assert len(hyps) == len(refs) and record["steps"] >= 1
    assert record["bleu"] == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    assert done.stdout.startswith(f"test2016 de->en: BLEU {record['bleu']:.2f}, chrF")


def test_evaluate_tokenize_overrides_the_bleu_tokenizer(tmp_path):
    hyp = write_lines(tmp_path / "hyp", ["the cat sat on the mat.", "a dog, running fast!"])
    ref = write_lines(tmp_path / "ref", ["the cat sat on a mat.", "a dog running fast!"])
    results = {}
    for tok in ("13a", "char", "none"):
        results[tok] = json.loads(
            mt("evaluate", "--hyp", hyp, "--ref", ref, "--tokenize", tok, "--json").stdout
        )
        assert f"tok:{tok}" in results[tok]["signature"]["bleu"]
        want = sacrebleu.corpus_bleu(
            hyp.read_text().splitlines(), [ref.read_text().splitlines()], tokenize=tok
        )
        assert results[tok]["bleu"] == round(want.score, 2)
    assert len({r["bleu"] for r in results.values()}) == 3
