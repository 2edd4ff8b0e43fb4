"""An imported model decodes as its source does (fp32) until int8 is checked on data, and forced
scores are measured in fp32 whatever a model decodes in: `mt import --dev-src/--dev-ref`,
`mt tune-precision`, `mt score --precision`, the server's /score. transformers is the oracle."""

from __future__ import annotations

import pytest
import torch
from test_import import marian_folder

from conftest import make_pairs, write_lines
from mt_cli import Translator
from mt_cli.decode.tuning import with_decoding
from mt_cli.interop import import_folder
from mt_cli.model import checkpoint
from mt_cli.tools.translate_files import score_file

transformers = pytest.importorskip("transformers")

SOURCES = make_pairs(100, seed=11)[0]
TARGETS = make_pairs(100, seed=12)[1]


@pytest.fixture(scope="module")
def opus(tmp_path_factory):
    d = tmp_path_factory.mktemp("opus")
    folder = marian_folder(d)
    return folder, import_folder(folder, d / "opus.pt")


def transformers_scores(folder, sources, targets) -> list[float]:
    """Each target's summed log-probability (EOS included) given its source, by MarianMTModel."""
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    tok = transformers.MarianTokenizer.from_pretrained(folder)
    out = []
    for src, tgt in zip(sources, targets):
        batch = tok([src], text_target=[tgt], return_tensors="pt")
        labels = batch["labels"]
        with torch.no_grad():
            logits = hf(input_ids=batch.input_ids, labels=labels).logits
        logits[..., hf.config.pad_token_id] = float("-inf")  # never an output, as in mt
        lps = torch.log_softmax(logits, -1).gather(2, labels[..., None])
        out.append(float(lps.sum()))
    return out


def decoding_in_int8(path, out):
    """A copy of the checkpoint at `path` that decodes in int8."""
    ckpt = checkpoint.load(path)
    ckpt.config = with_decoding(ckpt.config, precision="int8")
    checkpoint.save(out, ckpt)
    return out


def mt_scores(path, tmp_path, **decoding) -> list[float]:
    src, tgt = write_lines(tmp_path / "s.txt", SOURCES), write_lines(tmp_path / "t.txt", TARGETS)
    score_file(path, src, tgt, tmp_path / "scores.txt", "cpu", **decoding)
    return [float(x) for x in (tmp_path / "scores.txt").read_text().split()]


def test_an_imported_model_records_fp32_until_int8_is_checked(opus):
    assert checkpoint.load(opus[1]).config.decode.precision == "fp32"
    assert Translator.load(opus[1], device="cpu").cfg.precision == "fp32"


def test_scores_are_fp32_by_default_even_for_a_model_that_decodes_in_int8(opus, tmp_path):
    folder, out = opus
    int8_model = decoding_in_int8(out, tmp_path / "int8.pt")
    theirs = torch.tensor(transformers_scores(folder, SOURCES, TARGETS))
    for path in (out, int8_model):
        ours = torch.tensor(mt_scores(path, tmp_path))
        assert (ours - theirs).abs().max() < 2e-4
    # asked for, int8 scores move: the default is what keeps them equal to transformers'
    int8 = torch.tensor(mt_scores(out, tmp_path, score_precision="int8"))
    assert (int8 - theirs).abs().max() > 2e-4


def outputs(path, precision: str) -> list[str]:
    """SOURCES translated with the checkpoint's own decoding settings, as the check decodes."""
    return Translator.load(path, device="cpu", precision=precision).translate(SOURCES)


def test_a_dev_set_where_int8_keeps_fp32s_bleu_makes_the_import_decode_in_int8(opus, tmp_path):
    folder, out = opus
    fp32, int8 = outputs(out, "fp32"), outputs(out, "int8")
    assert fp32 != int8  # a random model's outputs that int8 changes: the check has work to do
    src = write_lines(tmp_path / "dev.src", SOURCES)
    lines: list[str] = []
    # references int8 writes: int8 scores higher, and is kept
    passed = import_folder(
        folder, tmp_path / "pass.pt", lines.append, (src, write_lines(tmp_path / "a", int8))
    )
    assert checkpoint.load(passed).config.decode.precision == "auto"
    assert "decodes in int8 on a CPU" in lines[-1]
    # references fp32 writes: int8 loses more than train.int8_tolerance BLEU, and fp32 stays
    failed = import_folder(
        folder, tmp_path / "fail.pt", lines.append, (src, write_lines(tmp_path / "b", fp32))
    )
    assert checkpoint.load(failed).config.decode.precision == "fp32"
    assert "fp32: int8 lost quality" in lines[-1] and "against fp32's 100.00" in lines[-1]


def test_mt_tune_precision_records_the_verdict_only_where_told(opus, tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    _, out = opus
    src = write_lines(tmp_path / "dev.src", SOURCES)
    ref = write_lines(tmp_path / "dev.ref", outputs(out, "int8"))
    runner, copy = CliRunner(), tmp_path / "checked.pt"
    args = ["tune-precision", "--checkpoint", str(out), "--src", str(src), "--ref", str(ref)]
    told = runner.invoke(app, args)
    assert told.exit_code == 0 and "nothing written" in told.output, told.output
    assert checkpoint.load(out).config.decode.precision == "fp32"
    wrote = runner.invoke(app, [*args, "--out", str(copy)])
    assert wrote.exit_code == 0 and "int8 decoding: " in wrote.stdout, wrote.output
    assert checkpoint.load(copy).config.decode.precision == "auto"
    short = write_lines(tmp_path / "short.ref", ["one line"])
    bad = runner.invoke(app, [*args[:-1], str(short)])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    assert str(short) in bad.output and len(bad.output.strip().splitlines()) == 1


def test_mt_import_without_a_dev_set_says_how_to_check_int8(opus, tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    folder, _ = opus
    out = tmp_path / "m.pt"
    done = CliRunner().invoke(app, ["import", str(folder), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert f"mt tune-precision --checkpoint {out}" in done.output
    half = CliRunner().invoke(app, ["import", str(folder), "--out", str(out), "--dev-src", "x"])
    assert half.exit_code != 0 and "--dev-ref" in half.output and "Traceback" not in half.output


def test_a_misspelt_score_precision_names_its_flag(opus, tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    src = write_lines(tmp_path / "s.txt", SOURCES[:2])
    args = ["score", "--checkpoint", str(opus[1]), "--src", str(src), "--tgt", str(src)]
    bad = CliRunner().invoke(app, [*args, "--precision", "int4"])
    assert bad.exit_code != 0 and "--precision must be fp32, bf16, int8 or auto" in bad.output


def test_the_server_scores_in_fp32_while_it_decodes_in_int8(opus, tmp_path):
    pytest.importorskip("fastapi")
    from mt_cli.serve.web_app import create_app
    from serving import Running, call

    folder, out = opus
    path = decoding_in_int8(out, tmp_path / "int8.pt")
    loaded: list[Translator] = []
    server = Running(create_app(lambda: loaded.append(Translator.load(path)) or loaded[0], "m"))
    try:
        status, _, body = call(server.url, "POST", "/score", {"source": SOURCES, "target": TARGETS})
    finally:
        server.stop()
    assert status == 200 and loaded[0].quantized, body  # it decodes in int8
    theirs = torch.tensor(transformers_scores(folder, SOURCES, TARGETS))
    assert (torch.tensor(body["scores"]) - theirs).abs().max() < 2e-4
