"""Lexically constrained beam search with dynamic beam allocation, and glossaries: pinned on a
scripted model worked out on paper, checked on real ones."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from conftest import scripted, write_lines
from mt_cli import Translator
from mt_cli.data.tokenizer import EOS
from mt_cli.decode.beam import beam_search
from mt_cli.decode.constraints import Constraints, TermState, bank_sizes
from mt_cli.decode.glossary import Glossary, load_glossary
from mt_cli.decode.processors import end_at_limit
from mt_cli.errors import MtError

A, B, VOCAB = 4, 5, 6
SCRIPT = {
    (): {A: 0.6, B: 0.39, EOS: 0.01},
    (A,): {A: 0.4, EOS: 0.3, B: 0.3},
    (B,): {EOS: 0.9, A: 0.05, B: 0.05},
}
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"


def constrained(terms, beam=2, length_penalty=0.0, limit=10):
    guide = Constraints([terms], beam)
    src, max_lens = torch.ones(1, 3, dtype=torch.long), torch.tensor([limit])
    return beam_search(
        scripted(SCRIPT), src, max_lens, beam, length_penalty, (guide.rules, end_at_limit), guide
    )[0]


def test_constrained_search_on_a_scripted_model_finds_the_hypotheses_worked_out_on_paper():
    # Unconstrained, beam 2 without length normalisation prefers B EOS (.39 * .9 = .351).
    # With the term A B: step 0 keeps A (bank 1) and B (bank 0); step 1 has A A (.24, bank 1),
    # A B (.18, bank 2), and no EOS (no term met yet): the banks keep A B and A A. Step 2: A B EOS
    # (.6 * .3 * .98 = .1764) ends; step 3: A A B EOS (.24 * .01 * .98) ends. Both hold the term.
    plain = beam_search(
        scripted(SCRIPT), torch.ones(1, 3, dtype=torch.long), torch.tensor([10]), 2, 0.0
    )[0]
    assert plain[0].tokens == [B]
    hyps = constrained(((A, B),))
    assert [h.tokens for h in hyps] == [[A, B], [A, A, B]]
    assert hyps[0].score == pytest.approx(math.log(0.6 * 0.3 * 0.98), abs=1e-4)
    assert hyps[0].token_logprobs == pytest.approx(
        [math.log(p) for p in (0.6, 0.3, 0.98)], abs=1e-4
    )


def test_a_term_the_best_hypothesis_already_holds_changes_nothing():
    assert [h.tokens for h in constrained(((B,),))][0] == [B]


def test_a_term_that_does_not_fit_the_length_limit_still_gives_a_finished_hypothesis():
    hyps = constrained(((A, B, A, B),), limit=3)
    assert hyps and all(len(h.tokens) <= 2 for h in hyps) and math.isfinite(hyps[0].score)


def test_term_state_tracks_progress_breaks_and_restarts():
    s = TermState(((1, 2, 3), (7,)))
    assert s.next_tokens() == {1, 7} and s.progress == 0
    s = s.advance(1).advance(2)
    assert s.progress == 2 and s.next_tokens() == {3}
    s = s.advance(1)  # breaks 1 2 3, but 1 starts it again
    assert s.progress == 1 and s.current == 0
    s = s.advance(2).advance(3).advance(7)
    assert s.complete and s.progress == 4


@pytest.mark.parametrize(
    ("beam", "counts", "expected"),
    [
        (5, [9, 9, 9], [1, 1, 3]),  # K / (C+1) each, the remainder to the top bank
        (5, [9, 9, 0], [1, 4, 0]),  # an empty top bank passes its places down
        (4, [2, 0, 0], [2, 0, 0]),  # fewer candidates than places: every candidate goes on
        (2, [5, 1, 0], [1, 1, 0]),
    ],
)
def test_bank_sizes_share_the_beam_over_banks_and_move_unused_places(beam, counts, expected):
    assert bank_sizes(beam, counts) == expected


LINES = [
    line for line in (FIXTURE.parent / "src.txt").read_text(encoding="utf-8").splitlines() if line
][:24]


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu", beam=4)


def test_without_terms_constrained_search_gives_plain_beam_search_output(translator):
    # Every line but the first has no term: in one batch with a constrained line they still
    # decode exactly as plain beam search decodes them.
    plain = translator.search(LINES)
    mixed = translator.search(LINES, constraints=[["cat"]] + [[] for _ in LINES[1:]])
    assert [[h.tokens for h in hyps] for hyps in mixed[1:]] == [
        [h.tokens for h in hyps] for hyps in plain[1:]
    ]
    scores = lambda found: [h.score for hyps in found[1:] for h in hyps]  # noqa: E731
    assert scores(mixed) == pytest.approx(scores(plain))


def test_every_constrained_output_of_a_trained_model_has_its_terms_and_batching_does_not_matter(
    trained,
):
    ckpt, _ = trained
    tr = Translator.from_checkpoint(ckpt, "cpu", beam=5)
    lines = [
        "Ein hund sieht ein haus.",
        "Der mann läuft schnell.",
        "Frau hat ein ball.",
        "Kind sieht baum.",
    ]
    terms = [["cat"], ["woman", "small"], [], ["the big house"]]
    out = [h[0].text for h in tr.search(lines, constraints=terms)]
    for text, wanted in zip(out, terms):
        for term in wanted:
            assert term in text, (text, term)
    assert out[2] == tr.translate([lines[2]])[0]  # no term: as without constraints
    alone = tr.with_options(batch_size=1)
    one_by_one = [alone.search([line], constraints=[t])[0][0].text for line, t in zip(lines, terms)]
    assert one_by_one == out


def test_terms_are_not_taken_for_a_prefix(translator):
    (request,) = translator.requests(["Rot hund."], constraints=[["red dog", "big"]])
    assert request.prefix == () and len(request.constraints) == 2
    found = translator.search(["Rot hund."], constraints=[["big"]])[0][0]
    assert "big" in found.text


def test_terms_need_beam_search_and_a_vocabulary_that_can_write_them(translator):
    with pytest.raises(MtError, match="need beam search"):
        translator.with_options(beam=1).search(LINES[:2], constraints=[["cat"], []])
    with pytest.raises(
        MtError, match="line 2: the term 'Øl' has characters the model's target vocabulary lacks"
    ):
        translator.search(LINES[:2], constraints=[[], ["Øl"]])


def test_glossary_terms_match_case_sensitive_on_word_boundaries():
    g = Glossary([("Hund", "hound"), ("Mann", "guy"), ("New York", "NYC")])
    assert g.terms_for("Der Hund sieht einen Mann.") == ["hound", "guy"]
    assert g.terms_for("Die Hunde und der hund.") == []  # neither Hunde nor lower-case hund
    assert g.terms_for("In New York!") == ["NYC"]


def test_a_glossary_line_without_a_tab_is_one_error_naming_file_and_line(tmp_path):
    good = write_lines(tmp_path / "g.tsv", ["# comment", "Hund\thound", "", "Mann\tguy"])
    assert load_glossary(good).entries == [("Hund", "hound"), ("Mann", "guy")]
    bad = write_lines(tmp_path / "bad.tsv", ["Hund\thound", "Mann guy"])
    with pytest.raises(
        MtError,
        match=r"bad.tsv:2: no tab; write one entry per line as `source term<TAB>target term`",
    ):
        load_glossary(bad)
    with pytest.raises(MtError, match=r"empty.tsv:1: empty target term"):
        load_glossary(write_lines(tmp_path / "empty.tsv", ["Hund\t "]))
