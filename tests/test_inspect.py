"""Looking inside: attention heat maps, training curves, run reports, significance, TensorBoard."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from mt_cli.decode.attention_maps import record_attention
from mt_cli.decode.translator import Translator
from mt_cli.tools.heatmap import draw
from mt_cli.tools.plot import draw_curves, read_log, series
from mt_cli.tools.report import write_report

PNG = b"\x89PNG\r\n\x1a\n"


def test_attention_maps_are_the_models_own_probabilities_rows_sum_to_1_and_decoding_is_causal(
    trained,
):
    ckpt, _ = trained
    translator = Translator.from_checkpoint(ckpt, "cpu")
    model = translator.model
    maps = record_attention(translator, "Ein Hund sieht den Ball.", "A dog sees the ball.")
    s, t = len(maps.src_pieces), len(maps.tgt_pieces)
    heads, layers = model.cfg.n_heads, model.cfg.enc_layers
    for kind, (q, k) in {
        "encoder": (s, s),
        "decoder-self": (t, t),
        "decoder-cross": (t, s),
    }.items():
        assert len(maps.maps[kind]) == (layers if kind == "encoder" else model.cfg.dec_layers)
        for probs in maps.maps[kind]:
            assert probs.shape == (heads, q, k), kind
            assert (probs >= 0).all()
            torch.testing.assert_close(probs.sum(-1), torch.ones(heads, q), atol=1e-5, rtol=0)
    for probs in maps.maps["decoder-self"]:
        assert (probs.triu(diagonal=1) == 0).all()  # step k attends to steps <= k only
        assert (probs.tril() > 0).any()
    # The recorded pass computes what the model computes: logits with and without recording agree.
    src = torch.tensor(ckpt.tokenizer.encode_src(["Ein Hund sieht den Ball."]))
    tgt_in = torch.tensor(
        [[model.start_token] + ckpt.tokenizer.encode_tgt(["A dog sees the ball."])[0]]
    )
    plain = model(src, tgt_in)
    model.decoder.layers[0].cross_attn.record = []
    recorded = model(src, tgt_in)
    model.decoder.layers[0].cross_attn.record = None
    torch.testing.assert_close(recorded, plain, atol=1e-5, rtol=1e-5)

    other = record_attention(translator, "Ein Mann sieht den Ball.", "A dog sees the ball.")
    # another input, other weights
    assert not torch.equal(other.maps["encoder"][0], maps.maps["encoder"][0])
    assert not torch.equal(other.maps["decoder-cross"][0], maps.maps["decoder-cross"][0])


def test_without_a_target_the_maps_follow_the_models_own_translation_and_every_figure_is_drawn(
    trained, tmp_path
):
    ckpt, _ = trained
    translator = Translator.from_checkpoint(ckpt, "cpu")
    model = translator.model
    maps = record_attention(translator, "Ein Hund läuft schnell.", None)
    assert maps.target == translator.translate(["Ein Hund läuft schnell."])[0]
    assert maps.tgt_pieces[0] == "<start>" and len(maps.tgt_pieces) > 2
    files = draw(maps, tmp_path / "maps")
    layers = model.cfg.enc_layers + 2 * model.cfg.dec_layers
    assert len(files) == layers and all(f.read_bytes()[:8] == PNG for f in files)
    assert sorted(f.name for f in files)[0] == "decoder-cross-layer1.png"


def test_mt_attention_writes_the_pngs(trained, tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    _, d = trained
    args = [
        "attention",
        "--checkpoint",
        str(d / "run" / "best.pt"),
        "--src",
        "Ein Kind hat einen Ball.",
        "--out",
        str(tmp_path / "maps"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "maps" / "encoder-layer1.png").read_bytes()[:8] == PNG


def test_curves_and_a_report_are_drawn_from_a_real_log(trained, tmp_path):
    _, d = trained
    run = d / "run"
    entries = read_log(run)
    steps, losses = series(entries, "loss")
    assert steps and losses == [e["loss"] for e in entries if "loss" in e]
    copy = tmp_path / "torn"
    copy.mkdir()
    # a killed write
    (copy / "log.jsonl").write_text((run / "log.jsonl").read_text() + '{"step": 9999, "lo')
    assert len(read_log(copy)) == len(entries)
    png = draw_curves([run, copy], tmp_path / "curves.png")
    assert png.read_bytes()[:8] == PNG and png.stat().st_size > 10_000

    report = write_report(run, tmp_path / "report.md").read_text()
    best = max(e["valid_bleu"] for e in entries if "valid_bleu" in e)
    assert f"best validation BLEU: **{best:.2f}**" in report
    assert "| train |" in report and "| 400 |" in report  # pairs used, from run.json
    assert "torch:" in report and "## Config" in report and "d_model: 64" in report
    assert "![training curves](report-curves.png)" in report
    assert (tmp_path / "report-curves.png").read_bytes()[:8] == PNG


def test_paired_bootstrap_says_a_trained_system_beats_a_barely_trained_one(
    trained, corpus_files, tmp_path
):
    from mt_cli.config import build_config
    from mt_cli.metrics import format_significance
    from mt_cli.model import checkpoint
    from mt_cli.tools.evaluate import significance
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    ckpt, _ = trained
    f = corpus_files
    weak_run = tmp_path / "weak"
    cfg = build_config(
        "tiny", options={"tokenizer": {"vocab_size": 100}, "train": {"max_steps": 15}}
    )
    train(
        DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"]),
        weak_run,
        cfg,
        log=lambda m: None,
    )
    weak = checkpoint.load(weak_run / "best.pt")
    src = f["valid_src"].read_text().splitlines()
    outputs = {}
    for name, c in (("weak", weak), ("strong", ckpt)):
        hyps = Translator(c.build_model(), c.tokenizer, replace(c.config.decode, beam=1)).translate(
            src
        )
        outputs[name] = tmp_path / f"{name}.txt"
        outputs[name].write_text("".join(h + "\n" for h in hyps))
    result = significance([outputs["weak"], outputs["strong"]], [f["valid_tgt"]])
    strong = result["systems"][0]
    assert (
        strong["bleu"] > result["baseline"]["bleu"]
        and strong["p_value"] < 0.05
        and strong["better"]
    )
    assert "better than the baseline" in format_significance(result)
    same = significance([outputs["strong"], outputs["strong"]], [f["valid_tgt"]])
    assert not same["systems"][0]["better"]
    assert "not significantly different from the baseline" in format_significance(same)
    backwards = significance([outputs["strong"], outputs["weak"]], [f["valid_tgt"]])
    assert "worse than the baseline" in format_significance(backwards)
    with pytest.raises(Exception, match="a significance test compares systems: give a baseline"):
        significance([outputs["weak"]], [f["valid_tgt"]])


def test_tensorboard_events_hold_the_logged_scalars(corpus_files, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from mt_cli.config import build_config
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    f = corpus_files
    cfg = build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": {"max_steps": 4, "log_every": 2, "tensorboard": True},
        },
    )
    run = tmp_path / "run"
    train(
        DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"]),
        run,
        cfg,
        log=lambda m: None,
    )
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    losses = [e.value for e in events.Scalars("train/loss")]
    logged = [
        e["loss"]
        for e in map(json.loads, (run / "log.jsonl").read_text().splitlines())
        if "loss" in e
    ]
    assert losses == pytest.approx(logged) and len(losses) == 2
    assert [e.step for e in events.Scalars("valid/valid_bleu")] == [4]
    # Continued to step 6, then put back to the step-4 last.pt, as a kill before the step-6 save
    # would leave it: the resumed run redoes steps 5-6, and their first events are purged.
    step4 = (run / "last.pt").read_bytes()
    cfg6 = build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": {"max_steps": 6, "log_every": 2, "tensorboard": True},
        },
    )
    paths = (
        DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"]),
        run,
    )
    train(*paths, cfg6, log=lambda m: None)
    (run / "last.pt").write_bytes(step4)
    train(*paths, cfg6, log=lambda m: None)
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [2, 4, 6]
