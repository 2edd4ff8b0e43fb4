"""The decoder step compiled ahead of time (decode/compiled.py) against the eager step and the
model's own decode: the same logits, the same translations for every search and control, int8
batched as one by one; a package built once and found again, never reused for another checkpoint,
precision or CPU; a damaged package or a missing compiler is one clear error."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest
import torch
from reference import Reference
from test_engine import FIXTURE, LINES, SEARCHES, _src, _steps, assert_prefixes_and_terms_match
from typer.testing import CliRunner

from mt_cli import Translator
from mt_cli.cli import app
from mt_cli.decode import compiled
from mt_cli.decode.engine import Engine
from mt_cli.device import cpu_has_int8
from mt_cli.errors import MtError
from mt_cli.model import checkpoint

pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A copy of the decoding fixture with its fp32 and int8 steps compiled beside it (once: each
    compile takes seconds)."""
    path = tmp_path_factory.mktemp("compiled") / "model.pt"
    shutil.copy2(FIXTURE, path)
    for precision in ("fp32", "int8"):
        package, fresh = compiled.compile_checkpoint(path, precision)
        assert fresh and package.is_file() and package.parent == path.parent / "model.pt.compiled"
    return path


def test_the_compiled_step_gives_the_models_logits_through_reorders_and_growth(built):
    model = checkpoint.load(built).build_model("cpu")
    engine = Engine(model, "fp32", compiled.load(compiled.package_path(built, "fp32")))
    src = _src(model.cfg.src_vocab_size)
    vocab = torch.arange(0, model.cfg.tgt_vocab_size, 2)
    with torch.inference_mode():
        for shortlist in (None, vocab):
            # 20 steps: the buffers grow once
            want = _steps(Reference(model), src, 3, 20, shortlist)
            got = _steps(engine, src, 3, 20, shortlist)
            for t, (a, b) in enumerate(zip(want, got)):
                torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=f"step {t}")


@SEARCHES
def test_the_compiled_step_translates_as_the_eager_step_for_every_search(built, options):
    ref = Translator.load(built, device="cpu", engine="eager", **options)
    fast = ref.with_options(engine="compiled")
    assert fast.engine.compiled is not None and ref.engine.compiled is None
    want, got = ref.search(LINES, nbest=1), fast.search(LINES, nbest=1)
    assert [h[0].tokens for h in got] == [h[0].tokens for h in want]
    assert [h[0].score for h in got] == pytest.approx([h[0].score for h in want], abs=1e-4)


def test_prefixes_and_terms_through_the_compiled_step_match_the_eager_step(built):
    ref = Translator.load(built, device="cpu", engine="eager")
    assert_prefixes_and_terms_match(ref, ref.with_options(engine="compiled"))


def test_alignment_and_forced_scoring_with_a_compiled_step_read_the_model_as_eager_does(built):
    ref = Translator.load(built, device="cpu", engine="eager")
    fast = ref.with_options(engine="compiled")
    want, got = (
        ref.search(LINES[:10], nbest=1, alignment=True),
        fast.search(LINES[:10], nbest=1, alignment=True),
    )
    assert [h[0].alignment for h in got] == [h[0].alignment for h in want]
    texts = [h[0].text for h in want]
    assert [h.score for h in fast.score(LINES[:10], texts)] == [
        h.score for h in ref.score(LINES[:10], texts)
    ]


def test_compiled_int8_translates_batched_as_one_by_one_and_close_to_eager_int8(built):
    tr = Translator.load(built, device="cpu", precision="int8", beam=3, engine="compiled")
    assert tr.engine.compiled is not None
    alone = tr.with_options(batch_size=1)
    got = tr.translate(LINES[:20])
    assert got == [alone.translate([line])[0] for line in LINES[:20]]
    eager = Translator.load(
        built, device="cpu", precision="int8", beam=3, engine="eager"
    ).translate(LINES[:20])
    # int8 sums may round apart in another order
    assert sum(a == b for a, b in zip(got, eager)) >= 18


def test_auto_runs_a_compiled_step_only_where_one_is_built(built, tmp_path):
    auto = Translator.load(built, device="cpu")
    assert auto.engine.compiled is not None
    assert auto.with_options(engine="eager").engine.compiled is None
    bare = tmp_path / "model.pt"
    shutil.copy2(FIXTURE, bare)
    plain = Translator.load(bare, device="cpu")
    assert plain.engine.compiled is None  # nothing compiled here: the step runs op by op
    assert not (tmp_path / "model.pt.compiled").exists()  # and auto never compiles


def test_another_checkpoint_file_or_precision_gets_its_own_package(built, tmp_path):
    copy = tmp_path / "model.pt"
    shutil.copy2(built, copy)
    # same file, time
    assert compiled.package_path(copy, "fp32").name == compiled.package_path(built, "fp32").name
    # rewritten: another model
    os.utime(copy, ns=(copy.stat().st_atime_ns, copy.stat().st_mtime_ns + 1))
    assert compiled.package_path(copy, "fp32").name != compiled.package_path(built, "fp32").name
    assert compiled.package_path(built, "int8") != compiled.package_path(built, "fp32")


def test_a_damaged_package_is_one_clear_error(tmp_path):
    path = tmp_path / "model.pt"
    shutil.copy2(FIXTURE, path)
    package = compiled.package_path(path, "fp32")
    package.parent.mkdir()
    package.write_bytes(b"not a package")
    with pytest.raises(MtError, match="not a compiled decoder step.*delete it to rebuild"):
        Translator.load(path, device="cpu", engine="compiled")


def test_without_a_compiler_compiling_is_one_clear_error(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    shutil.copy2(FIXTURE, path)
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(
        MtError, match="no-such-compiler, which is not installed.*decode.engine eager"
    ):
        Translator.load(path, device="cpu", engine="compiled")
    assert not list(tmp_path.glob("model.pt.compiled/*"))  # nothing half-built left behind


def test_mt_compile_reports_a_built_package_and_bad_input_in_one_line(built, tmp_path):
    runner = CliRunner()
    done = runner.invoke(app, ["compile", "--checkpoint", str(built), "--precision", "int8"])
    assert done.exit_code == 0, done.output
    assert f"already compiled: {compiled.package_path(built, 'int8')}" in done.output
    missing = runner.invoke(app, ["compile", "--checkpoint", str(tmp_path / "none.pt")])
    assert (
        missing.exit_code == 1 and missing.output.count("\n") == 1 and "none.pt" in missing.output
    )
    # auto: int8 on a CPU with int8 arithmetic (VNNI or AMX), else fp32
    auto = runner.invoke(app, ["compile", "--checkpoint", str(built), "--precision", "auto"])
    picked = "int8" if cpu_has_int8() else "fp32"
    assert (
        auto.exit_code == 0
        and f"already compiled: {compiled.package_path(built, picked)}" in auto.output
    )
    wrong = runner.invoke(app, ["compile", "--checkpoint", str(built), "--precision", "fp8"])
    assert wrong.exit_code == 1 and "--precision must be fp32, bf16, int8 or auto" in wrong.output


def test_mt_compile_without_a_precision_compiles_the_one_the_checkpoint_decodes_in(
    built, monkeypatch
):
    """A checkpoint that decodes in int8 (as `mt train` records where int8 keeps quality) gets its
    int8 step from a plain `mt compile`, not an fp32 one translation would never run."""
    real = checkpoint.load

    def stored_int8(path: Path) -> checkpoint.Checkpoint:
        ckpt = real(path)
        decode = dataclasses.replace(ckpt.config.decode, precision="int8")
        return dataclasses.replace(ckpt, config=dataclasses.replace(ckpt.config, decode=decode))

    monkeypatch.setattr(checkpoint, "load", stored_int8)
    done = CliRunner().invoke(app, ["compile", "--checkpoint", str(built)])
    assert done.exit_code == 0, done.output
    assert f"already compiled: {compiled.package_path(built, 'int8')}" in done.output
