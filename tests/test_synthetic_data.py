"""Synthetic training data: back-translation (aligned pairs, resumable chunks, tagged and weighted
beside the real pairs in the batches) and sequence-level distillation into a student."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from typer.testing import CliRunner

from conftest import make_pairs, write_lines
from mt_cli import Translator
from mt_cli.config import build_config
from mt_cli.config.pipeline import DistillConfig
from mt_cli.data.mixture import epoch_counts, sampling_probs
from mt_cli.data.tokenizer import Tokenizer
from mt_cli.errors import MtError
from mt_cli.model import checkpoint
from mt_cli.tools.backtranslate import backtranslate
from mt_cli.tools.distill import _write_pairs
from mt_cli.tools.synthetic import read_translations, translate_corpus
from mt_cli.train.corpora import load_corpora
from mt_cli.train.distributed import Dist
from mt_cli.train.epochs import Epochs
from mt_cli.train.inputs import DataSpec


def _app():
    from mt_cli.cli import app

    return app


def test_backtranslation_pairs_the_models_translations_with_the_monolingual_lines(
    trained, tmp_path
):
    ckpt, d = trained
    mono = make_pairs(12, seed=3)[0]
    lines = [*mono[:5], "", *mono[5:]]
    done = backtranslate(
        d / "run" / "best.pt", write_lines(tmp_path / "mono.de", lines), tmp_path / "bt", "cpu"
    )
    # The model reads de and writes en: its translations are the synthetic side, named by their
    # language.
    assert (done.src.name, done.tgt.name, done.pairs, done.blank) == ("bt.en", "bt.de", 12, 1)
    assert done.tgt.read_text(encoding="utf-8").splitlines() == mono
    expected = Translator.load(d / "run" / "best.pt", device="cpu").translate(mono)
    assert done.src.read_text(encoding="utf-8").splitlines() == expected
    assert not (tmp_path / "bt.chunks").exists()


def test_a_killed_translation_goes_on_from_its_chunks_and_refuses_other_settings(trained, tmp_path):
    ckpt, d = trained
    model = d / "run" / "best.pt"
    src = write_lines(tmp_path / "s.de", make_pairs(25, seed=6)[0])
    tr = Translator.load(model, device="cpu")
    work = tmp_path / "work"
    assert translate_corpus(tr, src, work, [model], chunk_lines=10) == 25
    chunks = sorted(work.glob("chunk-*.jsonl"))
    assert len(chunks) == 3
    kept = {p.name: p.stat().st_mtime_ns for p in (chunks[0], chunks[2])}
    whole = [p.read_text() for p in chunks]
    chunks[1].unlink()  # the chunk a kill interrupted was never written
    said: list[str] = []
    translate_corpus(tr, src, work, [model], log=said.append, chunk_lines=10)
    assert any("2 of 3 chunks already translated" in s for s in said)
    assert {p.name: p.stat().st_mtime_ns for p in (chunks[0], chunks[2])} == kept
    assert [p.read_text() for p in chunks] == whole
    # every chunk's lines in step with the source
    read = list(read_translations(src, work, 25, chunk_lines=10))
    lines = src.read_text(encoding="utf-8").splitlines()
    assert [line for line, _ in read] == lines and [h[0][0] for _, h in read] == tr.translate(lines)
    with pytest.raises(MtError, match="translated before with other decode"):
        translate_corpus(tr.with_options(beam=2), src, work, [model], chunk_lines=10)
    # copied again: same contents
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))
    said.clear()
    translate_corpus(tr, src, work, [model], log=said.append, chunk_lines=10)
    assert any("3 of 3 chunks already translated" in s for s in said)
    # edited: other work
    src.write_text(src.read_text(encoding="utf-8").replace("e", "E", 1), encoding="utf-8")
    with pytest.raises(MtError, match="translated before with other sha256"):
        translate_corpus(tr, src, work, [model], chunk_lines=10)


@pytest.fixture(scope="module")
def tagged_run(tmp_path_factory):
    """A tiny run on 300 real pairs and 100 back-translated ones tagged <BT>, weighted 2."""
    d = tmp_path_factory.mktemp("tagged")
    real, bt, valid = make_pairs(300), make_pairs(100, seed=4), make_pairs(20, seed=1)
    files = {}
    for name, (src, tgt) in {"real": real, "bt": bt, "valid": valid}.items():
        files[name] = (write_lines(d / f"{name}.de", src), write_lines(d / f"{name}.en", tgt))
    pairs = [
        {
            "src": str(files["real"][0]),
            "tgt": str(files["real"][1]),
            "valid_src": str(files["valid"][0]),
            "valid_tgt": str(files["valid"][1]),
        },
        {"src": str(files["bt"][0]), "tgt": str(files["bt"][1]), "tag": "<BT>", "weight": 2.0},
    ]
    (d / "bt.yaml").write_text(yaml.safe_dump({"data": {"pairs": pairs}}))
    args = [
        "train",
        "--config",
        str(d / "bt.yaml"),
        "--out",
        str(d / "run"),
        "--preset",
        "tiny",
        "--max-steps",
        "3",
        "--batch-tokens",
        "500",
        "--cache",
        str(d / "cache"),
        "--set",
        "tokenizer.vocab_size=100",
        "--set",
        "decode.beam=1",
        "--set",
        "train.valid_every=3",
    ]
    done = CliRunner().invoke(_app(), args)
    assert done.exit_code == 0, done.output
    return d, done.output


def test_the_tag_starts_synthetic_sources_only_and_batches_keep_the_weighted_mix(tagged_run):
    d, output = tagged_run
    tok = Tokenizer.load(d / "run" / "tokenizer")
    tag = tok.src.piece_to_id("<BT>")
    # one piece
    assert tag != tok.src.unk_id() and "<BT>" in tok.src.encode("Ein <BT> hund", out_type=str)
    cfg = build_config(yaml_path=d / "bt.yaml", options={"train": {"batch_tokens": 500}})
    spec = DataSpec.of_pairs(cfg.data, cache=d / "cache2")
    assert [p.name for p in spec.pairs] == ["de-en", "de-en.BT"]
    mixed, valid = load_corpora(
        spec, {k: f"t-{k}" for k in spec.sources()}, tok, cfg, lambda _: None, Dist()
    )
    assert [v.name for v in valid] == ["de-en"]  # the synthetic pair is not validated
    expected = epoch_counts([300, 100], sampling_probs([300, 100], [1.0, 2.0], 1.0))
    assert expected == [240, 160]
    rows = [r for batch in Epochs(mixed, 500, seed=1).of(0) for r in batch.tolist()]
    src = mixed.take(rows)[0].tolist()
    synthetic = [r >= mixed.offsets[1] for r in rows]
    assert sum(synthetic) == 160 and len(rows) == 400
    assert all((ids[0] == tag) == bt and tag not in ids[1:] for ids, bt in zip(src, synthetic))
    assert "de-en.BT" in output


def test_an_untagged_pair_needs_no_tag_piece_and_a_run_without_validation_is_refused(tmp_path):
    pair = {"src": "a.de", "tgt": "a.en"}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"data": {"pairs": [pair, {"src": "b.de", "tgt": "b.en"}]}}))
    with pytest.raises(MtError, match="give one pair valid_src/valid_tgt"):
        build_config(yaml_path=cfg)


def test_distillation_keeps_the_nbest_within_the_cross_entropy_limit(tmp_path):
    src = write_lines(tmp_path / "s.de", ["Ein hund.", "", "Ein ball."])
    work = tmp_path / "w"
    work.mkdir()
    hyps = [[["A dog.", -0.2], ["One dog.", -1.5]], [], [["A ball.", -3.0], ["Ball.", -4.0]]]
    (work / "chunk-000000.jsonl").write_text("".join(json.dumps(h) + "\n" for h in hyps))
    paths = (tmp_path / "d.de", tmp_path / "d.en")
    assert _write_pairs(src, work, 3, paths, DistillConfig(nbest=2)) == 4
    assert paths[1].read_text().splitlines() == ["A dog.", "One dog.", "A ball.", "Ball."]
    assert _write_pairs(src, work, 3, paths, DistillConfig(nbest=2, max_cross_entropy=2.0)) == 2
    assert paths[0].read_text().splitlines() == ["Ein hund.", "Ein hund."]
    with pytest.raises(MtError, match="no teacher translation was kept"):
        _write_pairs(src, work, 3, paths, DistillConfig(max_cross_entropy=0.1))


def test_distill_trains_a_student_on_the_teachers_translations_and_writes_it_and_ct2(
    trained, corpus_files, tmp_path
):
    ckpt, d = trained
    teacher, f = d / "run" / "best.pt", corpus_files
    args = [
        "distill",
        "--teacher",
        str(teacher),
        "--train-src",
        str(f["train_src"]),
        "--train-tgt",
        str(f["train_tgt"]),
        "--valid-src",
        str(f["valid_src"]),
        "--valid-tgt",
        str(f["valid_tgt"]),
        "--out",
        str(tmp_path / "d"),
        "--preset",
        "tiny",
        "--max-steps",
        "20",
        "--batch-tokens",
        "500",
        "--original-weight",
        "1",
        "--device",
        "cpu",
        "--cache",
        str(tmp_path / "cache"),
        "--set",
        "tokenizer.vocab_size=100",
        "--set",
        "decode.beam=1",
        "--set",
        "train.valid_every=20",
        "--set",
        "model.dec_layers=1",
    ]
    done = CliRunner().invoke(_app(), args)
    assert done.exit_code == 0, done.output
    out = tmp_path / "d"
    sources = f["train_src"].read_text(encoding="utf-8").splitlines()
    teacher_says = Translator.load(teacher, device="cpu").translate(sources)
    assert (out / "distilled.de").read_text(encoding="utf-8").splitlines() == sources
    assert (out / "distilled.en").read_text(encoding="utf-8").splitlines() == teacher_says
    assert "sampling 2 pairs" in done.output  # the teacher's pairs beside the originals
    student = checkpoint.load(out / "student.pt")
    # int8 on a CPU (auto) where the student's own training found it as good as fp32, else fp32
    assert student.config.model.dec_layers == 1 and student.config.decode.precision in (
        "auto",
        "fp32",
    )
    assert student.config.decode.shortlist == (student.shortlist is not None)
    assert len(Translator.load(out / "student.pt", device="cpu").translate(sources[:3])) == 3
    pytest.importorskip("ctranslate2")
    assert (out / "ct2" / "model.bin").is_file() and (out / "ct2" / "source.spm").is_file()
    again = CliRunner().invoke(_app(), args)  # a rerun resumes: nothing is translated again
    assert again.exit_code == 0 and "1 of 1 chunks already translated" in again.output


def test_distill_on_monolingual_sources_trains_on_the_teachers_translations_alone(
    trained, corpus_files, tmp_path
):
    _, d = trained
    teacher, f = d / "run" / "best.pt", corpus_files
    mono = tmp_path / "mono.de"  # source text with no translations of its own
    mono.write_text(f["train_src"].read_text(encoding="utf-8"), encoding="utf-8")
    args = [
        "distill",
        "--teacher",
        str(teacher),
        "--train-src",
        str(mono),
        "--valid-src",
        str(f["valid_src"]),
        "--valid-tgt",
        str(f["valid_tgt"]),
        "--out",
        str(tmp_path / "d"),
        "--preset",
        "tiny",
        "--max-steps",
        "5",
        "--batch-tokens",
        "500",
        "--device",
        "cpu",
        "--cache",
        str(tmp_path / "cache"),
        "--set",
        "tokenizer.vocab_size=100",
        "--set",
        "decode.beam=1",
        "--set",
        "train.valid_every=5",
        "--set",
        "model.dec_layers=1",
        "--set",
        "train.tune_precision=false",
    ]
    refused = CliRunner().invoke(_app(), [*args, "--original-weight", "1"])
    assert refused.exit_code != 0 and "is monolingual: --original-weight needs" in refused.output
    done = CliRunner().invoke(_app(), args)
    assert done.exit_code == 0, done.output
    sources = mono.read_text(encoding="utf-8").splitlines()
    teacher_says = Translator.load(teacher, device="cpu").translate(sources)
    # The languages are the files' suffixes: the validation target's names the target side.
    assert (tmp_path / "d" / "distilled.de").read_text(encoding="utf-8").splitlines() == sources
    assert (tmp_path / "d" / "distilled.en").read_text(
        encoding="utf-8"
    ).splitlines() == teacher_says
    assert "sampling" not in done.output  # one corpus: the teacher's pairs alone
    assert (tmp_path / "d" / "student.pt").is_file()
