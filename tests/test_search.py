import torch

from conftest import ScriptedModel, make_pairs
from mt_cli.config import DecodeConfig
from mt_cli.data.collate import pad
from mt_cli.data.tokenizer import EOS
from mt_cli.decode.beam import beam_search
from mt_cli.decode.engine import Engine
from mt_cli.decode.precision import Int8Linear
from mt_cli.decode.search import batches, greedy_search, search_batch, search_ids
from mt_cli.decode.translator import Translator

A, B = 4, 5
VOCAB = 6
# Next-token probabilities after each prefix, worked out on paper below; anything else ends (EOS
# .98).
SCRIPT = {
    (): {A: 0.6, B: 0.39, EOS: 0.01},
    (A,): {A: 0.4, EOS: 0.3, B: 0.3},
    (B,): {EOS: 0.9, A: 0.05, B: 0.05},
}


def scripted() -> ScriptedModel:
    return ScriptedModel(lambda prefix: SCRIPT.get(prefix, {EOS: 0.98, A: 0.01, B: 0.01}), VOCAB)


def tokens(hyps) -> list[list[int]]:
    return [h.tokens for h in hyps]


def best(per_sentence) -> list[list[int]]:
    """The tokens of each sentence's best hypothesis."""
    return [hyps[0].tokens for hyps in per_sentence]


def test_beam_search_on_a_scripted_model_returns_the_hypotheses_worked_out_on_paper():
    # Greedy: A (.6), A (.4), EOS (.98) -> p = .235.  Beam 2 also finds B EOS: .39 * .9 = .351.
    # Without length normalisation B EOS wins; with score / length, A A EOS wins
    # (log .235 / 3 = -0.482 > log .351 / 2 = -0.524).
    model, src, max_lens = scripted(), torch.ones(1, 3, dtype=torch.long), torch.tensor([10])
    assert tokens(greedy_search(model, src, max_lens)) == [[A, A]]
    assert best(beam_search(model, src, max_lens, beam=2, length_penalty=0.0)) == [[B]]
    assert best(beam_search(model, src, max_lens, beam=2, length_penalty=1.0)) == [[A, A]]


def test_output_stops_at_the_length_limit():
    model, src = scripted(), torch.ones(1, 3, dtype=torch.long)
    # With room for only one token, that token must be EOS.
    assert tokens(greedy_search(model, src, torch.tensor([1]))) == [[]]
    assert best(beam_search(model, src, torch.tensor([2]), beam=2, length_penalty=1.0)) in (
        [[A]],
        [[B]],
    )


def _sources(tokenizer):
    lines = [
        "Ein hund.",
        "Der mann sieht ein rot haus und ein baum.",
        "Kind läuft.",
        "Frau hat ein ball und haus.",
    ]
    return tokenizer.encode_src(lines)


def test_beam_1_equals_greedy(tiny_model, tokenizer):
    src_ids = _sources(tokenizer)
    greedy = best(search_ids(Engine(tiny_model), src_ids, DecodeConfig(beam=1, max_len_offset=5)))
    beam1 = [
        best(
            beam_search(
                Engine(tiny_model),
                pad([s]),
                torch.tensor([len(s) * 3 // 2 + 5]),
                beam=1,
                length_penalty=1.0,
            )
        )[0]
        for s in src_ids
    ]
    assert greedy == beam1
    assert any(len(h) > 0 for h in greedy)


def test_batched_decoding_equals_one_by_one(tiny_model, tokenizer):
    src_ids = _sources(tokenizer)
    for beam in (1, 4):
        cfg = DecodeConfig(beam=beam, max_len_offset=5, batch_size=4)
        batched = best(search_batch(Engine(tiny_model), src_ids, cfg))
        alone = [best(search_batch(Engine(tiny_model), [s], cfg))[0] for s in src_ids]
        assert batched == alone, f"beam {beam}"


def test_translate_ids_returns_input_order_whatever_the_batching(tiny_model, tokenizer):
    src_ids = _sources(tokenizer)
    one = best(
        search_ids(
            Engine(tiny_model), src_ids, DecodeConfig(beam=3, batch_size=1, max_len_offset=5)
        )
    )
    many = best(
        search_ids(
            Engine(tiny_model), src_ids, DecodeConfig(beam=3, batch_size=3, max_len_offset=5)
        )
    )
    assert one == many


def test_int8_and_bf16_decoding_translate_every_line_and_mostly_as_fp32_does(trained):
    """The fast paths change the arithmetic, not the search: on a trained model they should agree
    with fp32 on most sentences (speed.py checks BLEU on a real model)."""
    _, run_dir = trained
    lines = make_pairs(40, seed=11)[0] + ["", "Ein hund."]
    outputs = {}
    for precision in ("fp32", "int8", "bf16"):
        translator = Translator.load(run_dir / "run" / "best.pt", "cpu", precision=precision)
        model = translator.model
        outputs[precision] = translator.translate(lines)
        if precision == "int8":
            assert isinstance(model.output_projection, Int8Linear)  # the output layer too
    assert len(set(outputs["fp32"])) > 20, "the model should translate, not repeat one string"
    for precision in ("int8", "bf16"):
        out = outputs[precision]
        assert len(out) == len(lines) and out[-2] == ""
        assert sum(a == b for a, b in zip(out, outputs["fp32"])) >= 0.8 * len(lines)


def test_a_token_budget_cuts_length_sorted_batches_and_changes_no_translation(
    tiny_model, tokenizer
):
    cut = batches([5, 3, 8, 2, 12, 1], DecodeConfig(batch_size=3, batch_tokens=10))
    # 1+2+3 tokens; 5 (+8 > 10); 8; 12 alone, over the budget
    assert cut == [
        [5, 3, 1],
        [0],
        [2],
        [4],
    ]
    src_ids = _sources(tokenizer)
    by_sentences = best(
        search_ids(Engine(tiny_model), src_ids, DecodeConfig(beam=3, max_len_offset=5))
    )
    by_tokens = best(
        search_ids(
            Engine(tiny_model), src_ids, DecodeConfig(beam=3, max_len_offset=5, batch_tokens=20)
        )
    )
    assert by_tokens == by_sentences
