"""benchmarks/quality.py runs a recipe end to end and writes its rows; docs/quality.md's table comes
from them, and every table a benchmark script generates has its markers in the docs page it writes.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

import sacrebleu

from conftest import make_pairs, write_lines
from mt_cli.model import checkpoint

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import quality  # noqa: E402


def test_quality_script_runs_the_recipe_and_scores_best_pt_tuned_on_every_test_set(
    tmp_path,
):
    data = tmp_path / "data" / "multi30k"
    data.mkdir(parents=True)
    for stem, n, seed in (
        ("train", 300, 0),
        ("val", 20, 1),
        ("test2016", 10, 2),
        ("test2017", 10, 3),
        ("test2018", 10, 4),
    ):
        de, en = make_pairs(n, seed)
        write_lines(data / f"{stem}.de", de)
        write_lines(data / f"{stem}.en", en)
    recipe = tmp_path / "tiny-recipe.yaml"
    recipe.write_text(
        "preset: tiny\ntokenizer:\n  vocab_size: 100\ntrain:\n  max_steps: 20\n  valid_every: 10\n"
        "  keep_last: 2\n  average_last: 2\n  tune_beams: [1, 2]\n  tune_length_penalties: [0.8, "
        "1.2]\n"
        "  device: cpu\ndecode:\n  beam: 2\n"
    )
    results = tmp_path / "RESULTS.md"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "quality.py"),
        "--recipe",
        str(recipe),
        "--data",
        str(tmp_path / "data"),
        "--out",
        str(tmp_path / "run"),
        "--results",
        str(results),
        "--set",
        "train.batch_tokens=400",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = quality.read_results(results)
    assert [r["test"] for r in rows] == ["test2016", "test2017", "test2018"]
    assert all(r["pair"] == "de-en" and r["steps"] == "20" for r in rows)
    assert rows[0]["recipe"] == "tiny-recipe.yaml train.batch_tokens=400"
    assert re.fullmatch(
        r"best\.pt = (average of 2|step \d+), beam \d, lp [\d.]+ \(tuned\)", rows[0]["checkpoint"]
    )
    tuned = checkpoint.load(tmp_path / "run" / "best.pt").config.decode
    assert rows[0]["checkpoint"].endswith(f"beam {tuned.beam}, lp {tuned.length_penalty:g} (tuned)")
    assert "tuned decoding on the validation set (3 settings)" in proc.stderr
    assert "tok:13a" in rows[0]["signature"]
    for row in rows:  # each row's BLEU is sacreBLEU's on the hypotheses the script wrote
        hyps = (tmp_path / "run" / f"{row['test']}.hyp.en").read_text(encoding="utf-8").splitlines()
        refs = (data / f"{row['test']}.en").read_text(encoding="utf-8").splitlines()
        assert float(row["BLEU"]) == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)


def test_docs_table_shows_the_newest_row_of_each_recipe_pair_and_test(tmp_path):
    results = tmp_path / "RESULTS.md"
    row = dict.fromkeys(quality.COLUMNS, "x")
    quality.append_results(
        [{**row, "test": "t1", "BLEU": "30.00"}, {**row, "test": "t2", "BLEU": "20.00"}], results
    )
    quality.append_results([{**row, "test": "t1", "BLEU": "31.00"}], results)
    page = tmp_path / "quality.md"
    page.write_text("intro\n<!-- quality-table:start -->\nold\n<!-- quality-table:end -->\noutro\n")
    quality.update_docs(page, results)
    text = page.read_text()
    assert "31.00" in text and "20.00" in text and "30.00" not in text and "old" not in text
    assert text.startswith("intro\n") and text.endswith("outro\n")
    assert quality.QUALITY_PAGE == ROOT / "docs" / "quality.md"


def test_docs_table_puts_a_lowercased_score_under_the_cased_score_of_its_test_set(tmp_path):
    results = tmp_path / "RESULTS.md"
    row = dict.fromkeys(quality.COLUMNS, "x")
    for pair in ("en-de", "de-en"):
        quality.append_results(
            [
                {**row, "pair": pair, "test": test}
                for test in ("t1", "t1 lowercased", "t2", "t2 lowercased")
                if pair == "en-de" or "lowercased" not in test
            ],
            results,
        )
    # a later run of the first pair: its rows keep their places, cased before lowercased
    quality.append_results(
        [{**row, "pair": "en-de", "test": t} for t in ("t1", "t1 lowercased")], results
    )
    lines = quality.docs_table(quality.read_results(results)).splitlines()[2:]
    shown = [(line.split(" | ")[1], line.split(" | ")[2]) for line in lines]
    assert shown == [
        ("en-de", "t1"),
        ("en-de", "t1 lowercased"),
        ("en-de", "t2"),
        ("en-de", "t2 lowercased"),
        ("de-en", "t1"),
        ("de-en", "t2"),
    ]


def test_each_generated_table_has_its_markers_in_the_docs_page_its_script_writes():
    import results as results_module

    assert set(results_module.PAGES) == {
        "quality-table",
        "speed-table",
        "opus-speed-table",
        "shortlist-table",
        "serve-table",
        "data-scale",
        "documents-table",
        "protect-table",
        "neighbour-table",
        "levers-table",
        "m2m-speed-table",
        "multilingual-table",
        "clean-table",
        "distill-de-en-table",
        "distill-en-de-table",
        "pivot-table",
        "cache-table",
        "models-table",
        "office-table",
    }
    for marker, page in results_module.PAGES.items():
        text = page.read_text(encoding="utf-8")
        assert page.parent == ROOT / "docs", marker
        assert (
            text.count(f"<!-- {marker}:start -->") == 1
            and text.count(f"<!-- {marker}:end -->") == 1
        ), page
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ":start -->" not in readme, (
        "README holds no generated table: the scripts write docs/ pages"
    )


def test_the_docs_quality_table_is_the_one_results_md_generates():
    page = quality.QUALITY_PAGE.read_text(encoding="utf-8")
    table = page.split("<!-- quality-table:start -->\n", 1)[1].split(
        "\n<!-- quality-table:end -->", 1
    )[0]
    assert table == quality.docs_table(quality.read_results(quality.RESULTS))


def test_a_copied_run_shows_its_date_not_its_commit():
    import results as results_module

    text = results_module.newest_run("2026-12-01, commit b0fb5bf-dirty", "| a |\n")
    assert text == "Newest run (2026-12-01; every run: `benchmarks/RESULTS.md`):\n\n| a |"


def test_docs_table_leaves_out_runs_with_overrides_but_results_keeps_them(tmp_path):
    results = tmp_path / "RESULTS.md"
    row = dict.fromkeys(quality.COLUMNS, "x")
    shipped = {**row, "recipe": "r.yaml", "test": "t1", "BLEU": "30.00"}
    trial = {**row, "recipe": "r.yaml model.d_model=128", "test": "t1", "BLEU": "25.00"}
    quality.append_results([shipped, trial], results)
    table = quality.docs_table(quality.read_results(results))
    assert "30.00" in table and "25.00" not in table
    assert "25.00" in results.read_text()


def test_trials_table_names_what_each_run_changed_and_its_validation_bleu(tmp_path):
    import json

    import trials

    from mt_cli.config import build_config, to_yaml

    for name, sets, bleus in (
        ("a", [], [10.0, 20.0]),
        ("b", ["train.lr=0.002", "model.dropout=0.3"], [12.0, 11.0]),
    ):
        run = tmp_path / name
        run.mkdir()
        (run / "config.yaml").write_text(to_yaml(build_config("small", sets=sets)))
        log = [{"step": 50, "loss": 5.0, "tokens_per_s": 1000.0, "elapsed_s": 60.0}]
        log += [
            {"step": 100 * (i + 1), "valid_bleu": b, "valid_nll": 3.0 - i}
            for i, b in enumerate(bleus)
        ]
        (run / "log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    rows = trials.table([tmp_path / "a", tmp_path / "b"]).splitlines()[2:]
    assert rows[0] == "| a | (baseline) | 200 | 1.0 | 1000 | 2.000 | 20.00 | 20.00 | - |"
    assert rows[1] == (
        "| b | model.dropout=0.3, train.lr=0.002 | 200 | 1.0 | 1000 | 2.000 | 11.00 | 12.00 | - |"
    )
    # a run saved before a field existed (here train.rdrop) trained with its default: no change
    older = (tmp_path / "a" / "config.yaml").read_text().replace("  rdrop: 0.0\n", "")
    assert "rdrop" not in older
    (tmp_path / "a" / "config.yaml").write_text(older)
    rows = trials.table([tmp_path / "a", tmp_path / "b"]).splitlines()[2:]
    assert rows[1].startswith("| b | model.dropout=0.3, train.lr=0.002 |")


def test_new_quality_rows_join_their_table_above_sections_other_scripts_appended(tmp_path):
    results = tmp_path / "RESULTS.md"
    row = dict.fromkeys(quality.COLUMNS, "x")
    quality.append_results([{**row, "test": "t1"}], results)
    results.write_text(
        results.read_text() + "\n## Speed\n\n| decoding | beam |\n|---|---|\n| mt | 5 |\n"
    )
    quality.append_results([{**row, "test": "t2"}], results)
    text = results.read_text()
    assert text.index("| t2 |") < text.index("## Speed") and text.endswith("| mt | 5 |\n")
    assert [r["test"] for r in quality.read_results(results)] == ["t1", "t2"]


def test_en_de_rows_also_carry_lowercased_bleu_which_ignores_case_only(tmp_path):
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    write_lines(hyp, ["Ein Hund läuft über die Wiese .", "Zwei Männer spielen Fußball ."])
    write_lines(ref, ["ein hund läuft über die wiese .", "zwei Männer spielen Fussball ."])
    bleu, chrf, signature = quality.lowercased_bleu(hyp, ref)
    cased = sacrebleu.corpus_bleu(hyp.read_text().splitlines(), [ref.read_text().splitlines()])
    assert cased.score < bleu < 100  # the case no longer counts; the spelling still does
    assert "case:lc" in signature and "tok:13a" in signature and chrf == "-"
    assert ("en", "de") in quality.LOWERCASED and ("de", "en") not in quality.LOWERCASED


def test_trials_table_names_a_run_of_several_corpora_by_their_directions():
    import trials

    pairs = [
        {"src": "/d/train.de", "tgt": "/d/train.en", "valid_src": "/d/val.de", "weight": 2.0},
        {"src": "/d/train.fr", "tgt": "/d/train.en", "valid_src": "", "weight": 1.0},
    ]
    assert trials.shown("data.pairs", pairs) == "[de-en* x2, fr-en]"
    assert trials.shown("train.lr", 0.002) == 0.002


def test_also_adds_directions_of_the_corpus_unvalidated_and_names_the_target_only_where_it_varies(
    tmp_path,
):
    for name in ("train.de", "train.en", "train.fr", "val.de", "val.en"):
        write_lines(tmp_path / name, ["a line"])

    args = argparse.Namespace(src="de", tgt="en", also=["fr-en"], recipe=Path("r.yaml"), set=None)
    spec, inputs = quality.data_spec(args, tmp_path / "train", tmp_path / "val")
    assert [(p.name, p.valid is not None) for p in spec.pairs] == [
        ("de-en", True),
        ("fr-en", False),
    ]
    assert inputs.target_lang is None  # one target language: no tag to ask for
    assert quality.recipe_name(args) == "r.yaml +fr-en"
    both = argparse.Namespace(src="de", tgt="en", also=["en-de"], recipe=Path("r.yaml"), set=None)
    assert quality.data_spec(both, tmp_path / "train", tmp_path / "val")[1].target_lang == "en"
