"""`mt translate` at the edges of its files: an output that is the input, paths that are folders or
unreadable, temporaries a killed run left, and input text whatever it holds: one clear line, or one
output line per input line, never a traceback."""

from __future__ import annotations

import fcntl
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.config import OutputConfig
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.tools.line_inputs import count_lines, input_lines
from mt_cli.tools.translate_files import translate_stream

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode"
MODEL = FIXTURE / "model.pt"
SOURCE = (FIXTURE / "src.txt").read_text(encoding="utf-8")
runner = CliRunner()
ROOT_REASON = "runs as root, which reads and writes whatever the permissions say"


def _mt(*args: object, checkpoint: Path = MODEL) -> tuple[int, str]:
    result = runner.invoke(
        app, ["translate", "--checkpoint", str(checkpoint), "--device", "cpu", *map(str, args)]
    )
    # CliRunner keeps an uncaught exception (a traceback for the user) in result.exception.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _one_error(args: list[object], *expected: str, checkpoint: Path = MODEL) -> str:
    code, output = _mt(*args, checkpoint=checkpoint)
    assert code == 1, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mt: error: "), output
    assert all(e in lines[0] for e in expected), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
    """The fixture source's translation, written to a file of its own."""
    out = tmp_path_factory.mktemp("ref") / "out.txt"
    assert _mt(FIXTURE / "src.txt", "--output", out)[0] == 0
    return out.read_text(encoding="utf-8")


# --- the output is the input --------------------------------------------------------------------


def test_an_output_that_is_the_input_by_any_name_is_refused_and_the_input_kept(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    Path("a.txt").write_text(SOURCE, encoding="utf-8")
    Path("link.txt").symlink_to("a.txt")
    for output in ("a.txt", "./a.txt", "link.txt", tmp_path / "a.txt"):
        _one_error(["a.txt", "--output", output], f"{Path(output)}: the input itself", "--in-place")
    _one_error(["link.txt", "--output", "a.txt"], "a.txt: the input itself")
    assert Path("a.txt").read_text(encoding="utf-8") == SOURCE and Path("link.txt").is_symlink()
    assert sorted(os.listdir()) == ["a.txt", "link.txt"]  # no temporary left either


def test_in_place_replaces_the_input_with_its_translation_keeping_its_mode_and_symlinks(
    tmp_path, reference
):
    a, link = tmp_path / "a.txt", tmp_path / "link.txt"
    a.write_text(SOURCE, encoding="utf-8")
    a.chmod(0o640)
    link.symlink_to(a.name)
    code, output = _mt(a, "--in-place")
    assert code == 0 and f"translated 65 lines into {a}" in output
    assert a.read_text(encoding="utf-8") == reference and oct(a.stat().st_mode & 0o777) == oct(
        0o640
    )
    a.write_text(SOURCE, encoding="utf-8")
    assert _mt(link, "--output", link, "--in-place")[0] == 0  # through the link: the file it names
    assert link.is_symlink() and a.read_text(encoding="utf-8") == reference
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "link.txt"]


def test_in_place_refuses_stdin_and_an_output_that_is_not_the_input(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text(SOURCE, encoding="utf-8")
    _one_error(["--in-place"], "--in-place writes over the input file", "stdin")
    _one_error(
        [a, "--output", tmp_path / "b.txt", "--in-place"], "b.txt: not the input", "drop one"
    )
    assert a.read_text(encoding="utf-8") == SOURCE and not (tmp_path / "b.txt").exists()


def test_an_interrupted_in_place_run_leaves_the_input_whole_while_streaming_it(
    tmp_path, monkeypatch
):
    """Chunks of 10 lines: the input is still being read, the temporary half written, when it
    stops."""
    import mt_cli.tools.translate_files as translate_files

    a = tmp_path / "a.txt"
    a.write_text(SOURCE, encoding="utf-8")
    real, calls = Translator.search_requests, []

    def search_then_stop(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(translate_files, "CHUNK_LINES", 10)
    monkeypatch.setattr(Translator, "search_requests", search_then_stop)
    code, output = _mt(a, "--in-place")
    assert code == 130 and "mt: interrupted" in output
    assert a.read_text(encoding="utf-8") == SOURCE and [p.name for p in tmp_path.iterdir()] == [
        "a.txt"
    ]


def test_in_place_translates_a_document_over_itself_as_into_another_file(tmp_path):
    page = (
        "<html><body><h1>Rot hund.</h1>\r\n<p>Sieht schnell frau. Und rot rot sieht "
        "gross.</p></body></html>\r\n"
    )
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    a.write_bytes(page.encode())
    assert _mt(a, "--output", b)[0] == 0
    _one_error([a, "--output", a, "--input-type", "html"], "the input itself")
    assert _mt(a, "--in-place", "--input-type", "html")[0] == 0
    assert a.read_bytes() == b.read_bytes() != page.encode()


def test_score_refuses_an_output_that_is_one_of_its_inputs(tmp_path):
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("Rot hund.\n", encoding="utf-8")
    tgt.write_text("Red dog.\n", encoding="utf-8")
    for output in (src, tgt):
        result = runner.invoke(
            app,
            [
                "score",
                "--checkpoint",
                str(MODEL),
                "--src",
                str(src),
                "--tgt",
                str(tgt),
                "--output",
                str(output),
                "--device",
                "cpu",
            ],
        )
        assert result.exit_code == 1 and f"{output}: also an input" in result.output, (
            result.exception
        )
    assert (
        src.read_text(encoding="utf-8") == "Rot hund.\n"
        and tgt.read_text(encoding="utf-8") == "Red dog.\n"
    )


# --- paths that are no files, or cannot be read or written
# ------------------------------------------


@pytest.mark.parametrize(
    "option", ["input", "--checkpoint", "--prefix-file", "--glossary", "--constraints-file"]
)
def test_a_folder_where_a_file_is_expected_is_named_as_a_folder(tmp_path, option):
    folder = tmp_path / "folder"
    folder.mkdir()
    src = tmp_path / "a.txt"
    src.write_text("Rot hund.\n", encoding="utf-8")
    if option == "--checkpoint":
        _one_error(
            [src], f"{folder}: a folder, not a file; give the checkpoint itself", checkpoint=folder
        )
    else:
        _one_error(
            [folder] if option == "input" else [src, option, folder],
            f"{folder}: a folder, not a file",
        )


@pytest.mark.skipif(os.geteuid() == 0, reason=ROOT_REASON)
def test_a_file_without_read_permission_is_named_with_the_reason(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("Rot hund.\n", encoding="utf-8")
    src.chmod(0)
    _one_error([src], f"{src}: the input file is not readable (permission denied)")
    model = tmp_path / "model.pt"
    model.write_bytes(MODEL.read_bytes())
    model.chmod(0)
    _one_error([FIXTURE / "src.txt"], f"{model}: the checkpoint is not readable", checkpoint=model)


def test_an_output_in_a_file_or_a_folder_is_named_before_any_work(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("Rot hund.\n", encoding="utf-8")
    _one_error(
        [src, "--output", src / "out.txt"], f"{src / 'out.txt'}: cannot write here: {src} is a file"
    )
    _one_error([src, "--output", tmp_path], f"{tmp_path}: a folder, not a file")


@pytest.mark.skipif(os.geteuid() == 0, reason=ROOT_REASON)
def test_an_output_in_a_folder_without_write_permission_is_named_with_the_reason(tmp_path):
    src, locked = tmp_path / "a.txt", tmp_path / "locked"
    src.write_text("Rot hund.\n", encoding="utf-8")
    locked.mkdir()
    locked.chmod(0o555)
    _one_error(
        [src, "--output", locked / "out.txt"], f"cannot write in {locked} (permission denied)"
    )


# --- temporaries a killed run left ----------------------------------------------------------------


def test_stale_temporaries_of_the_output_are_removed_and_nothing_else(tmp_path, reference):
    out = tmp_path / "out.txt"
    stale, live = tmp_path / ".out.txt.k1ll3d_0.tmp", tmp_path / ".out.txt.wr1t1ng0.tmp"
    others = [
        tmp_path / n
        for n in (".out.txt.gz.abcdefgh.tmp", ".other.txt.abcdefgh.tmp", ".out.txt.x.tmp")
    ]
    for p in [stale, live, *others]:
        p.write_text("And half a", encoding="utf-8")
        os.utime(p, (1_000_000_000, 1_000_000_000))  # 2001: older than this run
    with open(live, "rb") as held:  # a run writing it now holds its lock
        fcntl.flock(held, fcntl.LOCK_EX)
        assert _mt(FIXTURE / "src.txt", "--output", out)[0] == 0
    assert out.read_text(encoding="utf-8") == reference
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in [out, live, *others]
    )


def test_the_temporary_a_killed_translation_left_goes_with_the_next_run(tmp_path, reference):
    out = tmp_path / "out.txt"
    kill = (  # SIGKILL (kill_at's) at the rename: the temporary is complete, the output not there
        "import sys; sys.path.insert(0, 'tests'); import kill_at, mt_cli.files as f;"
        "f.os.replace = lambda *a: kill_at._die(); from mt_cli.cli import main;"
        f"sys.argv = ['mt', 'translate', '--checkpoint', {str(MODEL)!r}, "
        f"{str(FIXTURE / 'src.txt')!r},"
        f" '--output', {str(out)!r}, '--device', 'cpu']; main()"
    )
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", kill], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -9, proc.stderr
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".out.txt.") and left[0].endswith(".tmp")
    assert _mt(FIXTURE / "src.txt", "--output", out)[0] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"] and out.read_text(
        encoding="utf-8"
    ) == reference


# --- any text in: one line out per line in --------------------------------------------------------

BREAKS = [
    "\n",
    "\r\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x85",
    "\u2028",
    "\u2029",
    "\ufeff",
]
PIECES = st.one_of(
    st.characters(exclude_categories=("Cs",)),
    st.sampled_from(["Rot hund. ", " ", *BREAKS]),
    st.sampled_from(["\n", "\r\n"]),
)
TEXT = st.lists(PIECES, max_size=60).map("".join)  # any character, with words and line breaks often
# bad byte, cut, surrogate, ...
BAD_UTF8 = [
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xf4\x90\x80\x80",
]


@pytest.fixture(scope="module")
def greedy() -> Translator:
    return Translator.load(MODEL, device="cpu", beam=1)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lines") / "in.txt"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=TEXT,
    spoil=st.sampled_from([False, False, False, True]),
    bad=st.sampled_from(BAD_UTF8),
    at=st.integers(0, 1000),
)
def test_any_text_gives_one_line_out_per_newline_in_or_one_error_naming_the_bad_line(
    greedy, scratch, text, spoil, bad, at
):
    data = text.encode()
    # a quarter of the files get bytes that are not UTF-8, anywhere (inside a character too)
    if spoil:
        data = data[: at % (len(data) + 1)] + bad + data[at % (len(data) + 1) :]
    scratch.write_bytes(data)
    raw_lines = (
        data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n") if data else []
    )
    first_bad = next((n for n, raw in enumerate(raw_lines, 1) if not _decodes(raw)), None)
    event(
        "bad UTF-8"
        if first_bad is not None
        else f"{min(len(raw_lines), 3)}{'+' * (len(raw_lines) >= 3)} lines"
    )
    out = io.StringIO()
    if first_bad is not None:
        with pytest.raises(
            MtError,
            match=(
                rf"^{re.escape(str(scratch))}:{first_bad}: not valid UTF-8 \(byte "
                rf"0x[0-9a-f]{{2}} at column"
            ),
        ):
            translate_stream(greedy, input_lines(scratch), out, OutputConfig())
        return
    lines = list(input_lines(scratch))
    assert len(lines) == len(raw_lines) == count_lines(scratch)
    assert translate_stream(greedy, iter(lines), out, OutputConfig()) == len(lines)
    written = out.getvalue()
    assert written.count("\n") == len(lines) and written.endswith("\n") == bool(lines)
    outputs = written.split("\n")[:-1]
    assert all("\r" not in o for o in outputs)
    assert all(o == "" for line, o in zip(lines, outputs) if not line.strip())


def _decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_invalid_utf8_input_is_one_error_line_naming_the_file_line_and_byte_and_writes_nothing(
    tmp_path,
):
    src, out = tmp_path / "latin1.txt", tmp_path / "out.txt"
    src.write_bytes(b"Rot hund.\r\nSieht schnell frau.\n" + "Gr\u00fcn hund.\n".encode("latin-1"))
    _one_error([src, "--output", out], f"{src}:3: not valid UTF-8 (byte 0xfc at column 3)", "iconv")
    assert [p.name for p in tmp_path.iterdir()] == ["latin1.txt"]
