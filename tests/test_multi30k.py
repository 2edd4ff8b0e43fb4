"""The chain on real data: a Multi30k subset from ../shared/data, and the `datasets` loading
path."""

import json

import pytest
import sacrebleu

from conftest import SHARED_DATA, write_lines
from mt_cli.data.text import read_lines
from mt_cli.tools.quickstart import fetch_multi30k
from test_cli import mt

MULTI30K = SHARED_DATA / "multi30k"
needs_multi30k = pytest.mark.skipif(
    not (MULTI30K / "train.de").is_file(),
    reason=f"Multi30k not found at {MULTI30K} (see data/README.md)",
)


@needs_multi30k
def test_the_chain_runs_on_a_multi30k_subset(tmp_path):
    sub = {}
    for name, n in (("train", 3000), ("val", 100), ("test2016", 100)):
        for lang in ("de", "en"):
            sub[f"{name}.{lang}"] = write_lines(
                tmp_path / f"{name}.{lang}", read_lines(MULTI30K / f"{name}.{lang}")[:n]
            )
    run = tmp_path / "run"
    mt(
        "train",
        "--train-src",
        sub["train.de"],
        "--train-tgt",
        sub["train.en"],
        "--valid-src",
        sub["val.de"],
        "--valid-tgt",
        sub["val.en"],
        "--out",
        run,
        "--preset",
        "tiny",
        "--max-steps",
        40,
        "--batch-tokens",
        2000,
        "--device",
        "cpu",
        "--set",
        "tokenizer.vocab_size=1000",
        "--set",
        "train.valid_every=40",
        "--set",
        "train.log_every=10",
    )
    hyp = tmp_path / "hyp.en"
    mt(
        "translate",
        "--checkpoint",
        run / "best.pt",
        sub["test2016.de"],
        "--output",
        hyp,
        "--beam",
        2,
    )
    assert len(read_lines(hyp)) == 100
    result = json.loads(mt("evaluate", "--hyp", hyp, "--ref", sub["test2016.en"], "--json").stdout)
    hyps, refs = read_lines(hyp), read_lines(sub["test2016.en"])
    # sacreBLEU's own figure
    assert result["bleu"] == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    # translations, not one string or copies
    assert len(set(hyps)) > 1 and hyps != read_lines(sub["test2016.de"])
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    losses = [e["loss"] for e in log if "loss" in e]
    assert losses[-1] < losses[0], "40 steps on real data should lower the training loss"


def test_multi30k_in_the_hub_layout_loads_through_datasets(tmp_path):
    # The hub dataset (bentrevett/multi30k) is JSON lines with `en` and `de` columns in
    # train/val/test files; the same layout in a local folder goes through the same code.
    hub = tmp_path / "hub"
    hub.mkdir()
    rows = {"train": 5, "val": 2, "test": 3}
    for split, n in rows.items():
        lines = [json.dumps({"en": f"A dog {i}.", "de": f"Ein Hund {i}."}) for i in range(n)]
        (hub / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    out = fetch_multi30k(tmp_path / "out", dataset=str(hub))
    assert read_lines(out / "train.de") == [f"Ein Hund {i}." for i in range(5)]
    assert len(read_lines(out / "val.en")) == 2 and len(read_lines(out / "test2016.en")) == 3


@needs_multi30k
def test_a_local_multi30k_folder_is_used_in_place():
    assert fetch_multi30k(MULTI30K.parent / "unused", local_dir=MULTI30K) == MULTI30K
