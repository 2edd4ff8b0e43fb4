"""The vocabulary shortlist: built from co-occurrence, used by search where nothing else names
target ids, stored in checkpoints by `mt train` and `mt shortlist`."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from typer.testing import CliRunner

from conftest import make_pairs, scripted, write_lines
from mt_cli import Translator
from mt_cli.cli import app
from mt_cli.config import DecodeConfig
from mt_cli.data.lexicon import build_lexicon, pair_chunks
from mt_cli.data.pairs import Pairs
from mt_cli.data.tokenizer import EOS
from mt_cli.decode.beam import beam_search
from mt_cli.decode.engine import Engine
from mt_cli.decode.precision import quantize_int8
from mt_cli.decode.search import greedy_search, search_batch
from mt_cli.decode.shortlist import SPECIALS, Shortlist
from mt_cli.model import checkpoint
from mt_cli.tools.add_shortlist import add_shortlist


def test_each_source_piece_keeps_the_target_pieces_it_co_occurs_with_most_strongly():
    # Source 10 always comes with target 20; 11 with 21; target 30 is in every sentence (frequent).
    src = [[10, 5, EOS], [10, 6, EOS], [11, 5, EOS], [11, 6, EOS], [10, 11, EOS]]
    tgt = [[20, 30], [20, 30], [21, 30], [21, 30], [20, 21, 30]]
    short = build_lexicon(pair_chunks(Pairs(src, tgt), size=2), 40, 40, per_source=2, frequent=1)
    assert short.table[10].tolist()[0] == 20 and short.table[11].tolist()[0] == 21
    assert short.table[7].tolist() == [-1, -1]  # never seen: nothing of its own
    assert short.frequent.tolist() == [30]
    # Counting in chunks of 2 and in one chunk gives the same lexicon.
    whole = build_lexicon(pair_chunks(Pairs(src, tgt)), 40, 40, per_source=2, frequent=1)
    assert torch.equal(whole.table, short.table)


def test_a_batch_shortlist_is_sorted_with_the_special_pieces_at_their_own_columns():
    table = torch.full((12, 2), -1, dtype=torch.int32)
    table[7] = torch.tensor([9, 5], dtype=torch.int32)
    short = Shortlist(table, torch.tensor([11], dtype=torch.int32), tgt_vocab_size=15)
    vocab, allowed = short.for_batch(torch.tensor([[7, EOS], [EOS, 0]]))
    assert vocab.tolist() == [0, 1, 2, 3, 5, 9, 11]
    assert vocab[:SPECIALS].tolist() == list(range(SPECIALS))
    # Each sentence's own columns: the second has only the specials and the frequent piece.
    assert allowed.tolist() == [[True] * 7, [True] * 4 + [False, False, True]]


def _everything(vocab_size: int) -> Shortlist:
    return Shortlist(
        torch.full((vocab_size, 1), -1, dtype=torch.int32),
        torch.arange(vocab_size, dtype=torch.int32),
        vocab_size,
    )


@pytest.mark.parametrize("beam", [1, 4])
def test_a_shortlist_of_the_whole_vocabulary_changes_nothing(tiny_model, tokenizer, beam):
    src = tokenizer.encode_src(["Ein hund sieht ein rot haus.", "Kind hat ein ball.", "Der baum."])
    cfg = DecodeConfig(beam=beam, max_len_offset=5)
    engine = Engine(tiny_model)
    plain = search_batch(engine, src, cfg)
    listed = search_batch(engine, src, cfg, shortlist=_everything(tokenizer.tgt_vocab_size))
    for a, b in zip(plain, listed):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize("beam", [1, 2])
def test_search_outputs_only_shortlisted_pieces_scored_over_the_shortlist(beam):
    # Token 4 is the model's favourite but left out; 5 then wins, normalised over {specials, 5}.
    model = scripted({(): {4: 0.6, 5: 0.3, EOS: 0.1}, (5,): {EOS: 0.9, 4: 0.1}})
    short = Shortlist(
        torch.tensor([[5]] * 6, dtype=torch.int32), torch.zeros(0, dtype=torch.int32), 6
    )
    src, max_lens = torch.tensor([[5, EOS]]), torch.tensor([4])

    def best(vocab):
        if beam == 1:
            return greedy_search(model, src, max_lens, 0.0, shortlist=vocab)[0]
        return beam_search(model, src, max_lens, beam, 0.0, shortlist=vocab)[0][0]

    listed = best(short.for_batch(src))
    assert listed.tokens == [5]
    listed_mass = 0.3 + 0.1 + 2e-6  # 5, EOS, and UNK and BOS at 1e-6 each (PAD is never an output)
    assert listed.token_logprobs[0] == pytest.approx(math.log(0.3 / listed_mass), abs=1e-4)
    assert best(None).tokens == [4]


def test_a_prefix_or_an_ngram_ban_decodes_over_the_whole_vocabulary(tiny_model, tokenizer):
    # A shortlist of the specials only could output nothing but EOS; a forced prefix must still come
    # out.
    none = Shortlist(
        torch.full((tokenizer.src_vocab_size, 1), -1, dtype=torch.int32),
        torch.zeros(0, dtype=torch.int32),
        tokenizer.tgt_vocab_size,
    )
    tr = Translator(tiny_model, tokenizer, DecodeConfig(beam=2, max_len_offset=4), shortlist=none)
    assert tr.search(["Ein hund."])[0][0].tokens == []
    prefix = "dog dog"
    hyp = tr.search(["Ein hund."], prefixes=[prefix])[0][0]
    assert hyp.tokens[: len(tokenizer.encode_tgt([prefix])[0])] == tokenizer.encode_tgt([prefix])[0]
    assert tr.with_options(shortlist=False).search(["Ein hund."])[0][0].tokens != []


def test_an_int8_model_decodes_with_a_shortlist(tiny_model, tokenizer):
    src = tokenizer.encode_src(["Ein hund sieht ein rot haus.", "Kind hat ein ball."])
    cfg = DecodeConfig(beam=3, max_len_offset=5)
    engine = Engine(quantize_int8(tiny_model), "int8")
    plain = search_batch(engine, src, cfg)
    listed = search_batch(engine, src, cfg, shortlist=_everything(tokenizer.tgt_vocab_size))
    # The shortlist's rows of the int8 output layer are the same int8 rows: the same scores.
    for a, b in zip(plain, listed):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_mt_shortlist_adds_one_to_a_checkpoint_and_translate_uses_it(
    trained, corpus_files, tmp_path
):
    ckpt, d = trained
    assert ckpt.shortlist is not None  # mt train built one from its training pairs
    bare = tmp_path / "bare.pt"
    checkpoint.save(
        bare, checkpoint.Checkpoint(ckpt.config, ckpt.tokenizer, ckpt.model_state, None)
    )
    out = tmp_path / "listed.pt"
    add_shortlist(
        bare, corpus_files["train_src"], corpus_files["train_tgt"], out, 5, 10, log=lambda _: None
    )
    listed = checkpoint.load(out)
    assert listed.shortlist is not None and listed.shortlist["table"].shape[1] == 5
    assert all(torch.equal(listed.model_state[k], v) for k, v in ckpt.model_state.items())
    lines = ["Ein hund sieht ein rot haus.", "Der mann läuft schnell."]
    tr = Translator.load(out, device="cpu")
    assert tr.plan.shortlist is not None
    # The toy language's words are all in its shortlist: the same translations as without.
    assert tr.translate(lines) == tr.with_options(shortlist=False).translate(lines)
    with pytest.raises(Exception, match="already exists"):
        add_shortlist(
            bare,
            corpus_files["train_src"],
            corpus_files["train_tgt"],
            out,
            5,
            10,
            log=lambda _: None,
        )


def run_cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_the_cli_adds_a_shortlist_in_place_and_translate_can_turn_it_off(
    trained, corpus_files, tmp_path
):
    ckpt, _ = trained
    path = tmp_path / "model.pt"
    checkpoint.save(
        path, checkpoint.Checkpoint(ckpt.config, ckpt.tokenizer, ckpt.model_state, None)
    )
    f = corpus_files
    done = run_cli(
        "shortlist",
        "--checkpoint",
        path,
        "--train-src",
        f["train_src"],
        "--train-tgt",
        f["train_tgt"],
        "--out",
        path,
        "--per-source",
        "3",
    )
    assert done.exit_code == 0, done.output
    assert checkpoint.load(path).shortlist is not None
    src = write_lines(tmp_path / "in.txt", ["Ein hund sieht ein rot haus."])
    on = run_cli("translate", "--checkpoint", path, src)
    off = run_cli("translate", "--checkpoint", path, src, "--no-shortlist")
    assert on.exit_code == 0 and off.exit_code == 0
    assert on.stdout.strip() and off.stdout.strip()


def test_ctranslate2_with_the_exported_vocabulary_map_translates_as_mt_with_the_shortlist(
    trained, corpus, tmp_path
):
    ctranslate2 = pytest.importorskip(
        "ctranslate2", reason="needs the test extra: pip install -e '.[test]'"
    )
    pytest.importorskip(
        "transformers", reason="CTranslate2's converter reads the Hugging Face export"
    )
    from mt_cli.interop import export

    ckpt, _ = trained
    tok = ckpt.tokenizer
    # A tight shortlist (1 target piece per source piece, none frequent), so that it bites.
    pairs = Pairs(tok.encode_src(corpus[0]), tok.encode_tgt(corpus[1]))
    lexicon = build_lexicon(
        pair_chunks(pairs), tok.src_vocab_size, tok.tgt_vocab_size, per_source=1, frequent=0
    )
    short = Shortlist.of(lexicon)
    ckpt = dataclasses.replace(ckpt, shortlist=short.to_state())
    lines = make_pairs(24, seed=7)[0]
    # CTranslate2's arithmetic
    greedy = dataclasses.replace(ckpt.config.decode, beam=1, precision="fp32")
    mt = Translator(ckpt.build_model(), tok, greedy, shortlist=short).translate(lines)
    whole = Translator(ckpt.build_model(), tok, greedy).translate(lines)
    assert mt != whole  # the shortlist changes what comes out
    translator = ctranslate2.Translator(str(export(ckpt, tmp_path / "ct2", "ct2")), device="cpu")
    # One line per batch: CTranslate2 lets each line choose among its whole batch's candidates,
    # mt among the line's own, which are the same when a line is alone.
    pieces = [tok.src.encode(line, out_type=str) + ["</s>"] for line in lines]
    results = [translator.translate_batch([p], beam_size=1, use_vmap=True)[0] for p in pieces]
    assert [" ".join(tok.tgt.decode_pieces(r.hypotheses[0]).split()) for r in results] == mt


def test_mt_shortlist_refuses_bad_sizes_and_misaligned_files_in_one_line(
    trained, corpus_files, tmp_path
):
    _, d = trained
    f = corpus_files
    short = write_lines(tmp_path / "short.en", ["A dog."])
    out = tmp_path / "o.pt"
    base = [
        "shortlist",
        "--checkpoint",
        d / "run" / "best.pt",
        "--train-src",
        f["train_src"],
        "--out",
        out,
    ]
    cases = [
        (["--train-tgt", f["train_tgt"], "--per-source", "0"], "--per-source 0"),
        (["--train-tgt", f["train_tgt"], "--frequent", "-1"], "--frequent -1"),
        (["--train-tgt", short], "short.en"),
    ]
    for extra, expected in cases:
        done = run_cli(*base, *extra)
        assert done.exit_code == 1 and "Traceback" not in done.output, done.output
        assert expected in done.output and not out.exists()


@pytest.mark.parametrize("beam", [1, 3])
def test_with_a_shortlist_a_batch_translates_as_its_lines_do_one_by_one(
    tiny_model, tokenizer, beam
):
    # Three candidates per source piece, drawn at random: each sentence's own set differs from the
    # batch's union, so a row that chose over the union would pick pieces its sentence does not
    # allow.
    gen = torch.Generator().manual_seed(0)
    table = torch.randint(
        SPECIALS, tokenizer.tgt_vocab_size, (tokenizer.src_vocab_size, 3), generator=gen
    )
    short = Shortlist(table.int(), torch.zeros(0, dtype=torch.int32), tokenizer.tgt_vocab_size)
    lines = [
        "Ein hund sieht ein rot haus.",
        "Kind hat ein ball.",
        "Der baum.",
        "Der mann läuft schnell.",
        "Ein rot ball und ein hund.",
    ]
    tr = Translator(
        tiny_model.eval(), tokenizer, DecodeConfig(beam=beam, max_len_offset=5), shortlist=short
    )
    batched = tr.search(lines)
    alone = [tr.search([line])[0] for line in lines]
    assert [[h.tokens for h in hyps] for hyps in batched] == [
        [h.tokens for h in hyps] for hyps in alone
    ]
    for a, b in zip(batched, alone):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    allowed = {
        i
        for line in lines
        for piece in tokenizer.encode_src([line])[0]
        for i in table[piece].tolist()
    }
    # shortlisted only
    assert all(t < SPECIALS or t in allowed for hyps in batched for h in hyps for t in h.tokens)
