"""Every source format reads to the same pairs; the tokenized cache is built once and reused."""

from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pytest

from mt_cli.data.cache import TokenCorpus, build_cache
from mt_cli.data.sources import HubDataset, Table, TextPair
from mt_cli.errors import MtError

SRC = ["Ein Hund läuft.", 'Er sagt "hallo", dann geht er.', "Zwei\tKatzen?", "", "Ein Haus."]
TGT = ["A dog runs.", 'He says "hello", then he goes.', "Two cats?", "Nothing.", "A house."]


def _write_all_formats(d):
    (d / "p.de").write_text("".join(s.replace("\t", " ") + "\n" for s in SRC))
    (d / "p.en").write_text("".join(t + "\n" for t in TGT))
    with gzip.open(d / "p.de.gz", "wt") as f:
        f.write("".join(s.replace("\t", " ") + "\n" for s in SRC))
    with gzip.open(d / "p.en.gz", "wt") as f:
        f.write("".join(t + "\n" for t in TGT))
    (d / "p.tsv").write_text("".join(f"{s.replace(chr(9), ' ')}\t{t}\n" for s, t in zip(SRC, TGT)))
    with open(d / "p.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["de", "en"])
        w.writerows(zip([s.replace("\t", " ") for s in SRC], TGT))
    rows = [{"translation": {"de": s.replace("\t", " "), "en": t}} for s, t in zip(SRC, TGT)]
    (d / "p.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"de": [s.replace("\t", " ") for s in SRC], "en": TGT}), d / "p.parquet"
    )
    hub = d / "hub"
    hub.mkdir()
    (hub / "train.jsonl").write_text((d / "p.jsonl").read_text())
    (hub / "validation.jsonl").write_text((d / "p.jsonl").read_text())


def test_text_gz_tsv_csv_jsonl_parquet_and_a_dataset_folder_all_read_to_the_same_pairs(
    tmp_path, tokenizer
):
    _write_all_formats(tmp_path)
    want_src, want_tgt = [s.replace("\t", " ") for s in SRC], TGT
    sources = {
        "text": TextPair(tmp_path / "p.de", tmp_path / "p.en"),
        "gz": TextPair(tmp_path / "p.de.gz", tmp_path / "p.en.gz"),
        "tsv": Table(tmp_path / "p.tsv"),
        "csv": Table(tmp_path / "p.csv", src_lang="de", tgt_lang="en"),
        "jsonl": Table(tmp_path / "p.jsonl", src_lang="de", tgt_lang="en"),
        "parquet": Table(tmp_path / "p.parquet", src_lang="de", tgt_lang="en"),
        "dataset": HubDataset(
            str(tmp_path / "hub"), split="validation", src_lang="de", tgt_lang="en"
        ),
    }
    # the pair with an empty side is dropped, and counted
    keep = [i for i, s in enumerate(want_src) if s]
    for name, source in sources.items():
        # Validation reads whole texts; training reads token ids from the cache.
        corpus = source.read("error")
        assert (corpus.src, corpus.tgt) == (
            [want_src[i] for i in keep],
            [want_tgt[i] for i in keep],
        ), name
        data = TokenCorpus(
            build_cache(source, tokenizer, tmp_path / "cache", 1, print), 256, "drop", "error", name
        )
        assert _lists(data.take(range(len(data)))) == (
            tokenizer.encode_src([want_src[i] for i in keep]),
            tokenizer.encode_tgt([want_tgt[i] for i in keep]),
        ), name
        assert data.counts["empty"] == 1, name


def test_a_stray_carriage_return_does_not_split_a_line_of_a_parallel_text_corpus(
    tmp_path, tokenizer
):
    (tmp_path / "a.de").write_bytes(b"\xef\xbb\xbfEin\rHund.\r\nZwei.\n")
    (tmp_path / "a.en").write_bytes(b"A dog.\nTwo.\n")
    source = TextPair(tmp_path / "a.de", tmp_path / "a.en")
    data = TokenCorpus(
        build_cache(source, tokenizer, tmp_path / "cache", 1, print), 256, "drop", "error", "a"
    )
    assert _lists(data.take([0, 1])) == (
        tokenizer.encode_src(["Ein Hund.", "Zwei."]),
        tokenizer.encode_tgt(["A dog.", "Two."]),
    )


def test_misaligned_and_undecodable_training_files_are_named_with_the_line(tmp_path, tokenizer):
    (tmp_path / "a.de").write_bytes(b"Eins.\nZwei \xff.\nDrei.\n")
    (tmp_path / "a.en").write_bytes(b"One.\nTwo.\n")
    with pytest.raises(
        MtError, match=r"a\.de has 3 lines but .*a\.en has 2; the files must be line-aligned"
    ):
        build_cache(
            TextPair(tmp_path / "a.de", tmp_path / "a.en"), tokenizer, tmp_path / "cache", 1, print
        )
    (tmp_path / "a.en").write_bytes(b"One.\nTwo.\nThree.\n")
    cache = build_cache(
        TextPair(tmp_path / "a.de", tmp_path / "a.en"), tokenizer, tmp_path / "cache", 1, print
    )
    with pytest.raises(
        MtError, match=r"a\.de / .*a\.en: line 2: not valid UTF-8; .*train\.on_bad_utf8 to skip"
    ):
        TokenCorpus(cache, 256, "drop", "error", f"{tmp_path / 'a.de'} / {tmp_path / 'a.en'}")
    assert len(TokenCorpus(cache, 256, "drop", "skip", "a")) == 2
    assert len(TokenCorpus(cache, 256, "drop", "replace", "a")) == 3


def test_missing_columns_and_unknown_formats_get_one_clear_line(tmp_path):
    _write_all_formats(tmp_path)
    with pytest.raises(
        MtError,
        match=(
            r"p\.csv: no 'src' and 'tgt' columns \(found de, en\); name them as the pair's "
            r"source_lang"
        ),
    ):
        Table(tmp_path / "p.csv").texts()
    (tmp_path / "p.xml").write_text("<x/>")
    with pytest.raises(MtError, match=r"p\.xml: unknown table format"):
        Table(tmp_path / "p.xml")
    with pytest.raises(MtError, match=r"nope\.tsv: file not found"):
        Table(tmp_path / "nope.tsv")


def test_the_cache_is_built_once_reused_and_keyed_by_the_tokenizer_and_the_data(
    tmp_path, corpus_files, tokenizer
):
    from mt_cli.config import TokenizerConfig
    from mt_cli.data.tokenizer import train_tokenizer

    source = TextPair(corpus_files["train_src"], corpus_files["train_tgt"])
    said: list[str] = []
    first = build_cache(source, tokenizer, tmp_path / "cache", 1, said.append)
    stamp = (first / "mt-cache.json").stat().st_mtime_ns
    assert build_cache(source, tokenizer, tmp_path / "cache", 1, said.append) == first
    assert (first / "mt-cache.json").stat().st_mtime_ns == stamp and len(said) == 1  # not rebuilt
    other_tok = train_tokenizer(
        *[p.read_text().splitlines() for p in source.files()], TokenizerConfig(vocab_size=90)
    )
    assert build_cache(source, other_tok, tmp_path / "cache", 1, said.append) != first
    data = TokenCorpus(first, 256, "drop", "error", "train")
    src, tgt = _lists(data.take([0, 1]))
    lines = source.src.read_text().splitlines(), source.tgt.read_text().splitlines()
    assert src == tokenizer.encode_src(lines[0][:2]) and tgt == tokenizer.encode_tgt(lines[1][:2])
    assert data.src_lens[0] == len(src[0]) and len(data) == 400


def test_two_tokenizing_workers_build_the_same_cache_as_one(tmp_path, corpus_files, tokenizer):
    source = TextPair(corpus_files["train_src"], corpus_files["train_tgt"])
    one = TokenCorpus(
        build_cache(source, tokenizer, tmp_path / "a", 1, print), 256, "drop", "error", "a"
    )
    two = TokenCorpus(
        build_cache(source, tokenizer, tmp_path / "b", 2, print), 256, "drop", "error", "b"
    )
    assert np.array_equal(one.src_lens, two.src_lens) and np.array_equal(one.tgt_lens, two.tgt_lens)
    assert _lists(one.take(range(400))) == _lists(two.take(range(400)))


def test_mt_train_reads_a_dataset_folder_by_name_with_translation_dicts(tmp_path, corpus_files):
    from typer.testing import CliRunner

    from mt_cli.cli import app

    src, tgt = (corpus_files[k].read_text().splitlines() for k in ("train_src", "train_tgt"))
    hub = tmp_path / "hub"
    hub.mkdir()
    for split, n in (("train", 400), ("validation", 20)):
        rows = [{"translation": {"de": s, "en": t}} for s, t in zip(src[:n], tgt[:n])]
        (hub / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [
        "train",
        "--dataset",
        str(hub),
        "--src-lang",
        "de",
        "--tgt-lang",
        "en",
        "--out",
        str(tmp_path / "run"),
        "--preset",
        "tiny",
        "--max-steps",
        "2",
        "--set",
        "tokenizer.vocab_size=100",
        "--device",
        "cpu",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (
        f"{hub} [train]: 400 pairs" in result.output
        and f"{hub} [validation]: 20 pairs" in result.output
    )
    assert (tmp_path / "run" / "last.pt").is_file()


def _lists(pair):
    """A corpus's (source, target) Ragged rows as id lists."""
    return tuple(rows.tolist() for rows in pair)
