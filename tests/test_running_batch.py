"""A running batch (decode/running_batch.py): sentences join between decoder steps and leave as they
end, and each gets exactly the hypotheses it gets searched alone, whatever joins beside it and
when. Oracle: Search.batch of that one sentence (the offline path)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from conftest import tiny_config
from mt_cli import Translator
from mt_cli.config import DecodeConfig
from mt_cli.data.tokenizer import EOS
from mt_cli.decode.engine import Engine
from mt_cli.decode.hypothesis import Hypothesis, Request
from mt_cli.decode.running_batch import RunningBatch
from mt_cli.decode.search import Search
from mt_cli.decode.shortlist import SPECIALS, Shortlist
from mt_cli.model.transformer import build_model

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
LINES = [
    line for line in (FIXTURE.parent / "src.txt").read_text(encoding="utf-8").splitlines() if line
][:24]


def run_schedule(
    batch: RunningBatch, requests: list[Request], seed: int, most: int = 4
) -> tuple[dict[int, list[Hypothesis]], int]:
    """Each request joins the batch at a random step (0 to `most` at a time), the batch stepping
    until every one has ended: each one's hypotheses, and the most rows that ran at once."""
    rng = random.Random(seed)
    waiting = list(range(len(requests)))
    got: dict = {}
    widest = 0
    for _ in range(10_000):
        n = rng.randint(0, most) if len(batch) else rng.randint(1, most)
        joining, waiting = waiting[:n], waiting[n:]
        batch.add([requests[i] for i in joining], joining)
        widest = max(widest, batch.rows)
        for tag, hyps in batch.step():
            assert tag not in got
            got[tag] = hyps
        if not waiting and not len(batch):
            return got, widest
    raise AssertionError("the batch never emptied")


def assert_as_alone(
    search: Search, requests: list[Request], got: dict[int, list[Hypothesis]], tol: float = 1e-4
):
    """The same hypotheses, their scores within `tol` (bf16's products round differently with the
    rows beside them: a whole batch against its lines one by one differs by 1e-2 here too)."""
    assert sorted(got) == list(range(len(requests)))
    for i, r in enumerate(requests):
        want = search.batch([r])[0]
        mine = got[i]
        assert [h.tokens for h in mine] == [h.tokens for h in want], (i, r)
        assert [h.score for h in mine] == pytest.approx([h.score for h in want], abs=tol)
        assert mine[0].token_logprobs == pytest.approx(want[0].token_logprobs, abs=tol)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"beam": 1},
        {"beam": 3},
        {"beam": 5, "length_penalty": 0.0},
        {"precision": "int8"},
        {"precision": "bf16", "beam": 2},
    ],
    ids=["beam", "greedy", "beam-3", "beam-5-no-penalty", "int8", "bf16"],
)
def test_sentences_joining_at_random_steps_get_what_they_get_alone(options):
    tr = Translator.load(FIXTURE, device="cpu", engine="eager", **options)
    requests = [r for r in tr.requests(LINES) if r is not None]
    batch = tr.running_batch()
    assert batch is not None and isinstance(tr.engine, Engine)
    for seed in (0, 1):
        got, widest = run_schedule(batch, requests, seed)
        assert widest > batch.k * 4  # sentences did run side by side, joining while others ran
        assert_as_alone(tr._search, requests, got, 5e-2 if tr.cfg.precision == "bf16" else 1e-4)
        assert batch.cache is None and batch.rows == 0  # empty again, ready for more


def test_an_ensemble_joining_at_random_steps_gets_what_it_gets_alone():
    pair = Translator.load([FIXTURE, FIXTURE], device="cpu", engine="eager", beam=3)
    requests = [r for r in pair.requests(LINES[:12]) if r is not None]
    batch = pair.running_batch()
    assert batch is not None and len(batch.engines) == 2
    got, _ = run_schedule(batch, requests, seed=2)
    assert_as_alone(pair._search, requests, got)


def with_shortlist(**options) -> Translator:
    """The fixture with a random shortlist (three candidates per source piece, no frequent ones):
    each sentence's own columns differ from the batch's union, and a sentence whose list is under
    the 2K candidates beam search takes decodes over the whole vocabulary."""
    tr = Translator.load(FIXTURE, device="cpu", engine="eager", **options)
    gen = torch.Generator().manual_seed(0)
    vocab = tr.tokenizer.tgt_vocab_size
    table = torch.randint(SPECIALS, vocab, (tr.tokenizer.src_vocab_size, 3), generator=gen)
    short = Shortlist(table.int(), torch.zeros(0, dtype=torch.int32), vocab)
    return Translator(tr.model, tr.tokenizer, tr.cfg, shortlist=short)


@pytest.mark.parametrize(
    "options", [{"beam": 3}, {"beam": 1}, {"beam": 3, "precision": "int8"}], ids=str
)
def test_with_a_shortlist_each_sentence_keeps_to_its_own_columns_as_alone(options):
    tr = with_shortlist(**options)
    requests = [r for r in tr.requests(LINES) if r is not None]
    batch = tr.running_batch()
    assert batch is not None and batch.shortlist is not None
    batch.add(requests[:6], list(range(6)))
    assert batch.vocab is not None and batch.vocab.numel() < tr.tokenizer.tgt_vocab_size
    assert batch.allowed is not None and not bool(batch.allowed.all())
    while len(batch):
        batch.step()
    got, _ = run_schedule(batch, requests, seed=4)
    assert_as_alone(tr._search, requests, got)


def test_decoder_start_ids_of_different_lengths_are_read_in_turn_beside_each_other():
    """A target language token (Request.start) is read one id per step before the first output;
    sentences with none, one and two start ids run in one batch."""
    tr = Translator.load(FIXTURE, device="cpu", engine="eager", beam=3)
    plain = [r for r in tr.requests(LINES[:12]) if r is not None]
    starts = [(), (7,), (9, 11)]
    requests = [Request(src=r.src, key=i, start=starts[i % 3]) for i, r in enumerate(plain)]
    batch = tr.running_batch()
    assert batch is not None
    got, _ = run_schedule(batch, requests, seed=3)
    assert_as_alone(tr._search, requests, got)


@pytest.mark.parametrize("autoreg", ["attention", "ssru"])
def test_a_random_model_that_runs_to_its_length_limit_gets_what_it_gets_alone(tokenizer, autoreg):
    """Random weights rarely end a sentence: outputs run to their length limits, sources of very
    different lengths join (the cross-attention padded, then trimmed), and an SSRU decoder keeps
    a cell per row."""
    torch.manual_seed(0)
    model = build_model(tiny_config(tokenizer, decoder_autoreg=autoreg)).eval()
    cfg = DecodeConfig(beam=2, max_len_ratio=1.0, max_len_offset=3)
    engine = Engine(model)
    gen = torch.Generator().manual_seed(5)
    requests = []
    for i in range(14):
        n = int(torch.randint(1, 12, (1,), generator=gen))
        ids = torch.randint(4, tokenizer.src_vocab_size, (n,), generator=gen).tolist()
        requests.append(Request(src=(*ids, EOS), key=i))
    got, _ = run_schedule(RunningBatch(engine, cfg), requests, seed=7, most=3)
    assert_as_alone(Search(engine, cfg), requests, got)


def test_a_long_stream_keeps_the_cache_as_long_as_its_oldest_sentence_not_the_stream():
    """Sentences streaming through for many steps: the self-attention columns no running row reads
    are dropped, so the cache stays the length of the longest sentence running."""
    tr = Translator.load(FIXTURE, device="cpu", engine="eager", beam=2)
    requests = [r for r in tr.requests(LINES) if r is not None] * 4
    batch = tr.running_batch()
    assert batch is not None
    longest = max(len(r.src) for r in requests) * tr.cfg.max_len_ratio + tr.cfg.max_len_offset
    steps, i, deepest = 0, 0, 0
    while i < len(requests) or len(batch):
        if len(batch) < 6 and i < len(requests):
            batch.add([requests[i]], [i])
            i += 1
        batch.step()
        steps += 1
        if batch.cache is not None:
            deepest = max(deepest, batch.cache.length)
    assert steps > 3 * longest  # the stream ran far longer than any sentence
    assert deepest <= longest + 1
