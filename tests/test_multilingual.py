"""Several directions in one model: the sampling distribution and the epochs drawn by it, the joint
tokenizer with target tags, and a tiny multilingual run from the command line (its languages
recorded, validation BLEU per pair, the target language required and honoured)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import LEXICON, make_pairs, write_lines
from mt_cli import Translator
from mt_cli.data.mixture import MixedCorpus, epoch_counts, sample_by_language, sampling_probs
from mt_cli.data.ragged import Ragged
from mt_cli.errors import MtError
from mt_cli.model import checkpoint


def test_sampling_probabilities_follow_the_temperature_and_the_weights():
    assert sampling_probs([900, 100], [1, 1], 1.0) == pytest.approx([0.9, 0.1])
    assert sampling_probs([900, 100], [1, 1], 1e6) == pytest.approx([0.5, 0.5], abs=1e-5)
    t5 = sampling_probs([900, 100], [1, 1], 5.0)
    assert t5 == pytest.approx([0.9**0.2 / (0.9**0.2 + 0.1**0.2), 0.1**0.2 / (0.9**0.2 + 0.1**0.2)])
    assert sampling_probs([100, 100], [3, 1], 1.0) == pytest.approx([0.75, 0.25])
    assert epoch_counts([900, 100], t5) == [round(1000 * t5[0]), 1000 - round(1000 * t5[0])]
    assert sum(epoch_counts([7, 5, 3], [0.333, 0.333, 0.334])) == 15


class FakeCorpus:
    """Rows whose ids say which corpus and row they are: ([corpus, row], [row])."""

    def __init__(self, corpus: int, n: int) -> None:
        self.corpus, self.n = corpus, n
        self.src_lens, self.tgt_lens = np.full(n, 2), np.full(n, 1)

    def __len__(self) -> int:
        return self.n

    def take(self, indices):
        rows = list(np.asarray(indices).tolist())
        return Ragged.of([[self.corpus, r] for r in rows]), Ragged.of([[r] for r in rows])


def test_an_epoch_of_a_mixed_corpus_draws_each_by_its_share_repeating_the_small_one():
    big, small = FakeCorpus(0, 90), FakeCorpus(1, 10)
    probs = sampling_probs([90, 10], [1, 1], 5.0)
    mixed = MixedCorpus([big, small], probs)
    rows = mixed.epoch_rows(seed=3)
    src = mixed.take(rows)[0].tolist()
    per_corpus = [sum(1 for s in src if s[0] == i) for i in (0, 1)]
    assert per_corpus == mixed.counts and len(rows) == 100 and per_corpus[1] > 10  # upsampled
    small_rows = [s[1] for s in src if s[0] == 1]
    assert set(small_rows) == set(range(10))  # every line of the small corpus, repeated
    assert sorted(set(s[1] for s in src if s[0] == 0)) == sorted({s[1] for s in src if s[0] == 0})
    assert np.array_equal(mixed.epoch_rows(seed=3), rows) and not np.array_equal(
        mixed.epoch_rows(seed=4), rows
    )


def test_a_joint_tokenizer_sample_gives_each_language_its_share():
    texts = {"de": [f"d{i}" for i in range(900)], "fr": [f"f{i}" for i in range(100)]}
    lines = sample_by_language(texts, 5.0, seed=0)
    share = sum(line.startswith("f") for line in lines) / len(lines)
    assert len(lines) == 1000 and share == pytest.approx(
        sampling_probs([900, 100], [1, 1], 5.0)[1], abs=0.002
    )


def _second_language(line: str) -> str:
    """A made-up target language "fr": the English words reversed and doubled-vowelled."""
    return " ".join(w[::-1].replace("a", "aa") for w in line.split())


@pytest.fixture(scope="module")
def multilingual_run(tmp_path_factory):
    """A tiny run of two directions, de->en (400 pairs) and de->fr (150), from a config's
    data.pairs."""
    from mt_cli.cli import app

    d = tmp_path_factory.mktemp("multi")
    src, tgt = make_pairs(400)
    vsrc, vtgt = make_pairs(20, seed=1)
    src2, tgt2 = make_pairs(150, seed=2)
    files = {
        "en": (write_lines(d / "train.de", src), write_lines(d / "train.en", tgt)),
        "fr": (
            write_lines(d / "b.de", src2),
            write_lines(d / "b.fr", [_second_language(t) for t in tgt2]),
        ),
    }
    valid = {
        "en": (write_lines(d / "valid.de", vsrc), write_lines(d / "valid.en", vtgt)),
        "fr": (
            write_lines(d / "vb.de", vsrc),
            write_lines(d / "vb.fr", [_second_language(t) for t in vtgt]),
        ),
    }
    pairs = [
        {
            "src": str(files[k][0]),
            "tgt": str(files[k][1]),
            "valid_src": str(valid[k][0]),
            "valid_tgt": str(valid[k][1]),
        }
        for k in ("en", "fr")
    ]
    import yaml

    (d / "multi.yaml").write_text(yaml.safe_dump({"data": {"pairs": pairs, "temperature": 2.0}}))
    sets = [
        "train.valid_every=150",
        "model.d_model=64",
        "model.ffn_dim=128",
        "model.dropout=0.0",
        "train.warmup_steps=20",
        "train.lr=3e-3",
        "tokenizer.vocab_size=120",
        "decode.beam=1",
    ]
    args = [
        "train",
        "--config",
        str(d / "multi.yaml"),
        "--out",
        str(d / "run"),
        "--preset",
        "tiny",
        "--max-steps",
        "300",
        "--batch-tokens",
        "500",
        "--cache",
        str(d / "cache"),
    ]
    done = CliRunner().invoke(app, [*args, *[x for s in sets for x in ("--set", s)]])
    assert done.exit_code == 0, done.output
    return d, d / "run", done.output


def test_a_multilingual_run_records_its_languages_and_validates_each_pair(multilingual_run):
    d, run, output = multilingual_run
    ckpt = checkpoint.load(run / "last.pt")
    assert (ckpt.config.model.source_langs, ckpt.config.model.target_langs) == (
        ("de",),
        ("en", "fr"),
    )
    assert ckpt.tokenizer.target_tags().keys() == {"en", "fr"}
    logged = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    valid = [e for e in logged if "valid_bleu_by_pair" in e]
    assert valid and set(valid[-1]["valid_bleu_by_pair"]) == {"de-en", "de-fr"}
    assert valid[-1]["valid_bleu"] == pytest.approx(
        sum(valid[-1]["valid_bleu_by_pair"].values()) / 2
    )
    assert "sampling 2 pairs at temperature 2" in output and "de-en" in output


def test_a_multilingual_model_needs_its_target_language_and_writes_the_one_named(multilingual_run):
    d, run, _ = multilingual_run
    tr = Translator.load(run / "best.pt", device="cpu", beam=1)
    with pytest.raises(
        MtError, match=r"the model writes 2 languages \(en, fr\); name the target language"
    ):
        tr.translate(["Ein hund läuft."])
    lines = make_pairs(30, seed=9)[0]
    to_en, to_fr = (
        tr.for_languages(target="en").translate(lines),
        tr.for_languages(target="fr").translate(lines),
    )
    english = set(LEXICON.values())
    # The tag decides the language: English words for en, the made-up reversed ones for fr.
    en_words = [w.strip(".").lower() for line in to_en for w in line.split()]
    fr_words = [w.strip(".").lower() for line in to_fr for w in line.split()]
    assert sum(w in english for w in en_words) > 0.7 * len(en_words)
    assert sum(w in english for w in fr_words) < 0.3 * len(fr_words)
    got = CliRunner().invoke(
        _app(), ["translate", "--checkpoint", str(run / "best.pt"), str(d / "valid.de")]
    )
    assert got.exit_code == 1 and "name the target language (target_lang)" in got.output


def test_every_training_source_carries_its_pairs_target_tag(multilingual_run):
    from mt_cli.config import build_config
    from mt_cli.data.language_tokens import Directed
    from mt_cli.train.corpora import pair_tokens
    from mt_cli.train.inputs import DataSpec

    d, run, _ = multilingual_run
    tok = checkpoint.load(run / "last.pt").tokenizer
    spec = DataSpec.of_pairs(build_config(yaml_path=d / "multi.yaml").data)
    tags = tok.target_tags()
    for pair, lang in zip(spec.pairs, ("en", "fr")):
        encoded = Directed(tok, pair_tokens(tok, pair)).encode_src(["Ein hund läuft.", "Rot haus."])
        assert all(ids[0] == tags[lang] and tags[lang] not in ids[1:] for ids in encoded)


def test_data_pairs_refuse_files_that_name_no_language_and_command_line_data_beside_them(tmp_path):
    from mt_cli.config import build_config
    from mt_cli.train.inputs import DataSpec

    pair = {"src": "a.txt", "tgt": "b.en", "valid_src": "v.txt", "valid_tgt": "v.en"}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        json.dumps({"data": {"pairs": [pair, {**pair, "tgt": "b.fr", "valid_tgt": "v.fr"}]}})
    )
    with pytest.raises(
        MtError,
        match=r"data.pairs\[0\]: its files' names \(a.txt, b.en\) name no language; set "
        "source_lang",
    ):
        DataSpec.of_pairs(build_config(yaml_path=cfg).data)
    got = CliRunner().invoke(
        _app(),
        [
            "train",
            "--config",
            str(cfg),
            "--out",
            str(tmp_path / "r"),
            "--train-src",
            "x.de",
            "--train-tgt",
            "x.en",
        ],
    )
    assert got.exit_code == 1 and "the config lists data.pairs; give the data one way" in got.output


def _app():
    from mt_cli.cli import app

    return app


def test_a_run_of_one_direction_keeps_its_roles_and_sources(tmp_path):
    from mt_cli.train.inputs import DataSpec

    files = [write_lines(tmp_path / name, ["x"]) for name in ("t.de", "t.en", "v.de", "v.en")]
    spec = DataSpec.text_files(*files)
    assert list(spec.sources()) == ["train", "valid"] and len(spec.pairs) == 1
    assert spec.train.describe() == spec.sources()["train"].describe()
