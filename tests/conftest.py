"""Tiny corpora and models made inside the tests: nothing is downloaded, everything runs on a
CPU."""

from __future__ import annotations

import math
import os
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from mt_cli.config import ModelConfig, TokenizerConfig, build_config
from mt_cli.data.tokenizer import Tokenizer, train_tokenizer
from mt_cli.model import checkpoint
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.train.inputs import DataSpec
from mt_cli.train.loop import train

# Tokenized caches and `datasets`' own cache go to a fresh folder, never the user's ~/.cache
# (set before anything imports `datasets`, which reads its cache path once).
_CACHE = tempfile.mkdtemp(prefix="mt-test-cache.")
os.environ.setdefault("MT_CACHE", os.path.join(_CACHE, "mt"))
os.environ.setdefault("HF_DATASETS_CACHE", os.path.join(_CACHE, "datasets"))

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `cuda` run where a GPU is; elsewhere they are skipped and say why."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(
        reason="no CUDA device here (benchmarks/gpu_check.sh runs these on a GPU machine)"
    )
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


# A toy language pair: word-for-word German-like to English, so a tiny model can learn it.
LEXICON = {
    "ein": "a",
    "hund": "dog",
    "mann": "man",
    "frau": "woman",
    "kind": "child",
    "sieht": "sees",
    "hat": "has",
    "rot": "red",
    "blau": "blue",
    "gross": "big",
    "klein": "small",
    "ball": "ball",
    "haus": "house",
    "und": "and",
    "der": "the",
    "läuft": "runs",
    "schnell": "fast",
    "baum": "tree",
}


def make_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    words = sorted(LEXICON)
    src, tgt = [], []
    for _ in range(n):
        sent = [rng.choice(words) for _ in range(rng.randint(2, 7))]
        src.append(" ".join(sent).capitalize() + ".")
        tgt.append(" ".join(LEXICON[w] for w in sent).capitalize() + ".")
    return src, tgt


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def corpus() -> tuple[list[str], list[str]]:
    return make_pairs(400)


@pytest.fixture(scope="session")
def tokenizer(corpus) -> Tokenizer:
    src, tgt = corpus
    return train_tokenizer(src, tgt, TokenizerConfig(vocab_size=120))


@pytest.fixture(scope="session")
def corpus_files(tmp_path_factory, corpus) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("corpus")
    src, tgt = corpus
    vsrc, vtgt = make_pairs(20, seed=1)
    return {
        "train_src": write_lines(d / "train.de", src),
        "train_tgt": write_lines(d / "train.en", tgt),
        "valid_src": write_lines(d / "valid.de", vsrc),
        "valid_tgt": write_lines(d / "valid.en", vtgt),
    }


def tiny_config(tokenizer: Tokenizer, **overrides) -> ModelConfig:
    fields = dict(
        d_model=32,
        n_heads=4,
        ffn_dim=64,
        enc_layers=2,
        dec_layers=2,
        dropout=0.0,
        src_vocab_size=tokenizer.src_vocab_size,
        tgt_vocab_size=tokenizer.tgt_vocab_size,
        shared_vocab=tokenizer.joint,
    )
    fields.update(overrides)
    return ModelConfig(**fields)


@pytest.fixture
def tiny_model(tokenizer) -> Transformer:
    torch.manual_seed(0)
    return build_model(tiny_config(tokenizer)).eval()


@pytest.fixture(scope="session")
def trained(tmp_path_factory, corpus_files):
    """A tiny model trained long enough to translate the toy language (and to stop on its own)."""
    d = tmp_path_factory.mktemp("trained")
    f = corpus_files
    cfg = build_config(
        "tiny",
        options={
            "tokenizer": {"vocab_size": 100},
            "train": {"max_steps": 300, "batch_tokens": 500},
        },
        sets=[
            "train.valid_every=300",
            "model.d_model=64",
            "model.ffn_dim=128",
            "model.dropout=0.0",
            "train.warmup_steps=50",
            "train.lr=3e-3",
        ],
    )
    paths = (
        DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"]),
        d / "run",
    )
    train(*paths, cfg, log=lambda *_: None)
    return checkpoint.load(d / "run" / "best.pt"), d


@dataclass
class PrefixCache:
    prefix: torch.Tensor  # (N, t) tokens generated so far
    vocab: torch.Tensor | None = None  # the shortlist search asked for when the cache was made

    def reorder(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> None:
        self.prefix = self.prefix.index_select(0, rows)


class ScriptedModel:
    """Stands in for a Transformer through the decoding contract (start_token, encode, decode,
    cache.reorder): `probs` gives the next-token probabilities after each prefix, written by hand.
    """

    start_token = 0

    def __init__(self, probs: Callable[[tuple[int, ...]], dict[int, float]], vocab: int) -> None:
        self.probs, self.vocab = probs, vocab

    def encode(self, src, src_mask):
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, tokens, memory, src_mask, cache=None, vocab=None):
        if cache is None:
            cache = PrefixCache(torch.zeros(tokens.size(0), 0, dtype=torch.long), vocab)
        else:
            cache.prefix = torch.cat([cache.prefix, tokens], dim=1)
        logits = torch.full((tokens.size(0), 1, self.vocab), math.log(1e-6))
        for row, prefix in enumerate(cache.prefix.tolist()):
            for tok, p in self.probs(tuple(prefix)).items():
                logits[row, 0, tok] = math.log(p)
        # A shortlist's columns only, as a Transformer gives them.
        return (logits if cache.vocab is None else logits[..., cache.vocab]), cache


def scripted(script: dict[tuple[int, ...], dict[int, float]], vocab: int = 6) -> ScriptedModel:
    """A ScriptedModel from a table of prefix -> next-token probabilities; any other prefix ends
    (EOS .98, tokens 4 and 5 .01 each)."""
    from mt_cli.data.tokenizer import EOS

    return ScriptedModel(lambda prefix: script.get(prefix, {EOS: 0.98, 4: 0.01, 5: 0.01}), vocab)


def prepared_run(corpus_files, folder: Path, **train):
    """A tiny run on the test corpus, prepared as `mt train` prepares it (train/setup.py), on the
    CPU: its model, optimizer, data and state, for tests that drive the step themselves."""
    from mt_cli.train import distributed as ddp
    from mt_cli.train.context import RunContext, TrainPaths
    from mt_cli.train.setup import prepare

    f = corpus_files
    spec = DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"])
    options = {"batch_tokens": 300, "device": "cpu", "doctor": False, **train}
    cfg = build_config("tiny", options={"tokenizer": {"vocab_size": 100}, "train": options})
    ctx = RunContext(
        TrainPaths(folder / "run"), spec, cfg, lambda m: None, ddp.Dist(), torch.device("cpu")
    )
    return prepare(ctx)
