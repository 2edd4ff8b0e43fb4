"""`mt doctor` finds each kind of problem in a small corpus made here, with the lines it is on."""

import json

import pytest

from conftest import SHARED_DATA, write_lines
from mt_cli.data.doctor import diagnose

SRC = [
    "Ein Hund läuft schnell.",  # 1
    "Der Mann sieht ein rotes Haus.",  # 2
    "",  # 3: empty source
    "Ein Hund läuft schnell.",  # 4: duplicate of 1
    "Hallo Welt.",  # 5: source = target
    "Ein Kind.",  # 6: length ratio far off
    "Eine Frau " * 150,  # 7: over-long
    "Die Katze schläft.",  # 8: also in valid
]
TGT = [
    "A dog runs fast.",
    "The man sees a red house.",
    "Something.",
    "A dog runs fast.",
    "Hallo Welt.",
    "A child is sitting on the floor of a very large and crowded room, next to a window with blue "
    "curtains.",
    "A woman " * 150,
    "The cat sleeps.",
]


def _by_check(findings, where_has: str = "") -> dict[str, object]:
    return {f.check: f for f in findings if where_has in f.where}


def test_doctor_names_each_problem_and_its_lines(tmp_path):
    src, tgt = write_lines(tmp_path / "train.de", SRC), write_lines(tmp_path / "train.en", TGT)
    vsrc = write_lines(tmp_path / "valid.de", ["Die Katze schläft.", "Ein neuer Satz."])
    vtgt = write_lines(tmp_path / "valid.en", ["The cat sleeps.", "A new sentence."])
    found = diagnose({"train": (src, tgt), "valid": (vsrc, vtgt)})
    train = _by_check(found, "train")
    assert train["empty or blank side"].lines == [3]
    assert train["duplicate pairs"].lines == [4]
    assert train["source = target"].lines == [5]
    assert train["over-long lines"].lines == [7]
    assert 6 in train["length-ratio outliers"].lines
    assert _by_check(found, "valid")["overlap with train"].lines == [1]
    assert all(f.severity != "error" for f in found) and all(f.fix for f in found)


def test_doctor_reports_bad_bytes_and_misaligned_files_as_errors(tmp_path):
    src = tmp_path / "train.de"
    # BOM, CRLF, a byte that is not UTF-8
    src.write_bytes(b"\xef\xbb\xbfGut.\r\nSchlecht \xff.\r\nDrei.\r\n")
    tgt = write_lines(tmp_path / "train.en", ["Good.", "Bad."])
    found = diagnose({"train": (src, tgt)})
    errors = {f.check: f for f in found if f.severity == "error"}
    assert errors["not UTF-8"].lines == [2]
    assert "3 lines" in errors["line counts differ"].fix and "2" in errors["line counts differ"].fix
    # the BOM and \r were stripped, nothing else
    assert "source = target" not in {f.check for f in found}


def test_doctor_command_prints_json_and_exits_1_on_errors(tmp_path):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    src, tgt = write_lines(tmp_path / "a.de", SRC), write_lines(tmp_path / "a.en", TGT)
    ok = CliRunner().invoke(app, ["doctor", "--src", str(src), "--tgt", str(tgt), "--json"])
    assert ok.exit_code == 0, ok.output
    assert {"duplicate pairs", "source = target"} <= {f["check"] for f in json.loads(ok.output)}
    short = write_lines(tmp_path / "b.en", TGT[:3])
    bad = CliRunner().invoke(app, ["doctor", "--src", str(src), "--tgt", str(short)])
    assert bad.exit_code == 1 and "line counts differ" in bad.output


def test_doctor_on_multi30k_finds_its_two_broken_lines():
    d = SHARED_DATA / "multi30k"
    if not (d / "train.de").is_file():
        pytest.skip(f"needs Multi30k in {d}")
    found = diagnose({"train": (d / "train.de", d / "train.en")})
    outliers = _by_check(found)["length-ratio outliers"]
    assert {16510, 16664} <= set(outliers.lines)  # German side "@@"
