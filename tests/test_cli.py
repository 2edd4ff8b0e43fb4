"""The `mt` command end to end, as a user runs it, on a tiny corpus made here."""

import json
import subprocess
import sys

import pytest
import sacrebleu
from typer.testing import CliRunner

from conftest import write_lines
from mt_cli.cli import app


def mt(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "mt_cli", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"mt {' '.join(map(str, args))} failed:\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, corpus_files):
    """tokenizer train -> train: the first half of the chain, shared by the tests below."""
    d = tmp_path_factory.mktemp("cli")
    f = corpus_files
    mt(
        "tokenizer",
        "train",
        "--src",
        f["train_src"],
        "--tgt",
        f["train_tgt"],
        "--vocab-size",
        100,
        "--out",
        d / "tok",
    )
    assert (d / "tok" / "joint.model").is_file()
    mt(
        "train",
        "--train-src",
        f["train_src"],
        "--train-tgt",
        f["train_tgt"],
        "--valid-src",
        f["valid_src"],
        "--valid-tgt",
        f["valid_tgt"],
        "--out",
        d / "run",
        "--tokenizer",
        d / "tok",
        "--preset",
        "tiny",
        "--max-steps",
        30,
        "--batch-tokens",
        400,
        "--device",
        "cpu",
        "--set",
        "train.valid_every=15",
        "--set",
        "decode.beam=2",
    )
    return d


def test_the_cli_chain_runs_end_to_end(trained_run, corpus_files):
    run = trained_run / "run"
    assert (run / "best.pt").is_file() and (run / "last.pt").is_file()
    hyp = trained_run / "hyp.en"
    mt(
        "translate",
        "--checkpoint",
        run / "best.pt",
        corpus_files["valid_src"],
        "--output",
        hyp,
        "--beam",
        3,
    )
    n_src = len(corpus_files["valid_src"].read_text().splitlines())
    assert len(hyp.read_text().splitlines()) == n_src
    scored = json.loads(
        mt("evaluate", "--hyp", hyp, "--ref", corpus_files["valid_tgt"], "--json").stdout
    )
    hyps, refs = hyp.read_text().splitlines(), corpus_files["valid_tgt"].read_text().splitlines()
    # sacreBLEU's own figures
    assert scored["bleu"] == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    assert scored["chrf"] == round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)
    direct = mt(
        "evaluate",
        "--checkpoint",
        run / "best.pt",
        "--src",
        corpus_files["valid_src"],
        "--ref",
        corpus_files["valid_tgt"],
        "--beam",
        3,
        "--json",
    )
    assert json.loads(direct.stdout)["bleu"] == scored["bleu"]


def test_translate_reads_stdin_and_keeps_one_line_per_input_line(trained_run):
    text = (
        "Ein hund läuft.\n\n   \nDer mann sieht ein haus.\n" + "ein " * 600 + "\n\x00\x07 🙂 שלום\n"
    )
    out = mt(
        "translate", "--checkpoint", trained_run / "run" / "best.pt", "--beam", 2, stdin=text
    ).stdout
    lines = out.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == 6
    assert lines[1] == "" and lines[2] == ""
    assert lines[0] != ""


def test_train_without_a_tokenizer_trains_one_into_the_run(tmp_path, corpus_files):
    f = corpus_files
    mt(
        "train",
        "--train-src",
        f["train_src"],
        "--train-tgt",
        f["train_tgt"],
        "--valid-src",
        f["valid_src"],
        "--valid-tgt",
        f["valid_tgt"],
        "--out",
        tmp_path / "run",
        "--preset",
        "tiny",
        "--max-steps",
        2,
        "--set",
        "tokenizer.vocab_size=90",
        "--device",
        "cpu",
    )
    assert (tmp_path / "run" / "tokenizer" / "joint.model").is_file()
    import stat

    (tmp_path / "plain-dir").mkdir()  # what a new folder gets under this umask; others may read it
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "run" / "tokenizer") == mode(tmp_path / "plain-dir")


runner = CliRunner()


def _fails_with_one_line(args, expected: str) -> None:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert expected in result.output, result.output


def test_bad_input_gets_one_clear_line_and_a_nonzero_exit(tmp_path, corpus_files):
    f = corpus_files
    short = write_lines(tmp_path / "short.en", ["one", "two"])
    common = ["--valid-src", f["valid_src"], "--valid-tgt", f["valid_tgt"], "--out", tmp_path / "r"]
    _fails_with_one_line(
        ["train", "--train-src", tmp_path / "missing.de", "--train-tgt", short, *common],
        "missing.de: file not found",
    )
    _fails_with_one_line(
        ["train", "--train-src", f["train_src"], "--train-tgt", short, *common], "has 2"
    )
    latin = tmp_path / "latin.de"
    latin.write_bytes(b"ok\n\xe9t\xe9\n")
    _fails_with_one_line(
        ["tokenizer", "train", "--src", latin, "--tgt", latin, "--out", tmp_path / "t"],
        "latin.de:2",
    )
    _fails_with_one_line(["translate", "--checkpoint", f["train_src"]], "not an mt checkpoint")
    _fails_with_one_line(
        [
            "train",
            "--train-src",
            f["train_src"],
            "--train-tgt",
            f["train_tgt"],
            *common,
            "--set",
            "decode.beam=-1",
        ],
        "beam must be at least 1",
    )
    _fails_with_one_line(["evaluate", "--hyp", short, "--ref", f["valid_tgt"]], "has 2 lines")
    _fails_with_one_line(
        [
            "tokenizer",
            "train",
            "--src",
            short,
            "--tgt",
            short,
            "--out",
            tmp_path / "t",
            "--vocab-size",
            0,
        ],
        "--vocab-size must be positive",
    )
    _fails_with_one_line(["translate", "--bogus"], "No such option")
    good = ["train", "--train-src", f["train_src"], "--train-tgt", f["train_tgt"], *common]
    _fails_with_one_line(
        [*good, "--tokenizer", tmp_path / "nope"], "nope: tokenizer folder not found"
    )
    _fails_with_one_line([*good, "--long-pairs", "cut"], "--long-pairs must be drop or truncate")


def test_empty_corpus_is_refused(tmp_path, corpus_files):
    empty = write_lines(tmp_path / "empty", [])
    _fails_with_one_line(
        ["tokenizer", "train", "--src", empty, "--tgt", empty, "--out", tmp_path / "t"],
        "no sentence",
    )


def test_python_dash_m_and_help_work():
    assert "translate" in mt("--help").stdout


def test_mt_average_writes_a_checkpoint_that_translates(trained_run, tmp_path):
    run = trained_run / "run"
    out = tmp_path / "avg.pt"
    mt("average", run / "best.pt", run / "last.pt", "--out", out)
    assert mt("translate", "--checkpoint", out, stdin="Ein hund.\n").stdout.count("\n") == 1


def test_tune_decoding_scores_every_pair_best_first_and_writes_the_best_as_default(
    trained_run, corpus_files, tmp_path
):
    from mt_cli.model import checkpoint

    tuned = tmp_path / "tuned.pt"
    f = corpus_files
    rows = json.loads(
        mt(
            "tune-decoding",
            "--checkpoint",
            trained_run / "run" / "best.pt",
            "--src",
            f["valid_src"],
            "--ref",
            f["valid_tgt"],
            "--beams",
            "1,3",
            "--length-penalties",
            "0.5,1.5",
            "--out",
            tuned,
            "--json",
        ).stdout
    )
    assert {(r["beam"], r["length_penalty"]) for r in rows} == {(1, 0.5), (3, 0.5), (3, 1.5)}
    assert [r["bleu"] for r in rows] == sorted((r["bleu"] for r in rows), reverse=True)
    decode = checkpoint.load(tuned).config.decode
    assert (decode.beam, decode.length_penalty) == (rows[0]["beam"], rows[0]["length_penalty"])


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_training_saves_last_pt_and_the_same_command_resumes(
    sig, corpus_files, tmp_path
):
    import signal
    import time

    f, out = corpus_files, tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "mt_cli",
        "train",
        "--train-src",
        f["train_src"],
        "--train-tgt",
        f["train_tgt"],
        "--valid-src",
        f["valid_src"],
        "--valid-tgt",
        f["valid_tgt"],
        "--out",
        out,
        "--preset",
        "tiny",
        "--max-steps",
        "100000",
        "--set",
        "tokenizer.vocab_size=100",
        "--set",
        "train.log_every=1",
        "--set",
        "train.valid_every=100000",
        "--set",
        "train.batch_tokens=300",
    ]
    proc = subprocess.Popen(
        list(map(str, cmd)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = out / "log.jsonl"
    deadline = time.monotonic() + 300
    while not (log.is_file() and log.read_text().count("\n") >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
        time.sleep(0.2)
    sent = time.monotonic()
    proc.send_signal(getattr(signal, sig))
    _, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 30
    assert proc.returncode == 1 and "Traceback" not in stderr
    assert f"{sig} at step" in stderr and "rerun the same command to resume" in stderr
    step = int(stderr.split(f"{sig} at step ")[1].split(":")[0])
    from mt_cli.model import checkpoint

    assert checkpoint.load(out / "last.pt").train_state["step"] == step
    cmd[cmd.index("100000")] = str(step + 2)  # the same run, told to stop soon
    again = mt(*cmd[3:])
    assert f"resuming {out / 'last.pt'} at step {step}" in again.stderr
