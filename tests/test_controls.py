"""Decoding controls besides terms: prefixes, sampling, ensembles, alignment, progress; each
through search and the Translator, batched as one by one, and bad input as one clear line."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from conftest import scripted, write_lines
from mt_cli import Translator
from mt_cli.cli import app
from mt_cli.config import Config, DecodeConfig
from mt_cli.data.tokenizer import EOS
from mt_cli.decode.attention_maps import record_attention
from mt_cli.decode.beam import beam_search
from mt_cli.decode.processors import DEFAULT_PROCESSORS, ForcePrefix
from mt_cli.decode.sampling import Sampler
from mt_cli.decode.search import greedy_search
from mt_cli.errors import MtError
from mt_cli.model import checkpoint
from mt_cli.tools.translation_progress import Progress

A, B, VOCAB = 4, 5, 6
SCRIPT = {
    (): {A: 0.6, B: 0.39, EOS: 0.01},
    (A,): {A: 0.4, EOS: 0.35, B: 0.25},
    (B,): {EOS: 0.9, A: 0.05, B: 0.05},
}
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
LINES = [
    line for line in (FIXTURE.parent / "src.txt").read_text(encoding="utf-8").splitlines() if line
][:30]


def _prefixed(prefix: list[int]) -> tuple:
    return (ForcePrefix([prefix], torch.device("cpu")), *DEFAULT_PROCESSORS)


def test_a_prefix_on_a_scripted_model_gives_the_hypotheses_worked_out_on_paper():
    src, limit = torch.ones(1, 3, dtype=torch.long), torch.tensor([10])
    # Greedy after B A (forced, .39 * .05) ends: EOS .98.
    hyp = greedy_search(scripted(SCRIPT), src, limit, 0.0, _prefixed([B, A]))[0]
    assert hyp.tokens == [B, A]
    assert hyp.token_logprobs == pytest.approx([math.log(p) for p in (0.39, 0.05, 0.98)], abs=1e-4)
    # Beam 2 after A: A EOS (.6 * .35 = .21) ends at step 1, A A EOS (.6 * .4 * .98 = .235) at
    # step 2; B EOS (.351), best without the prefix, is barred.
    hyps = beam_search(scripted(SCRIPT), src, limit, 2, 0.0, _prefixed([A]))[0]
    assert [h.tokens for h in hyps] == [[A, A], [A]]
    assert [h.score for h in hyps] == pytest.approx(
        [math.log(0.6 * 0.4 * 0.98), math.log(0.6 * 0.35)], abs=1e-4
    )


def test_sampling_distribution_keeps_the_top_k_and_the_nucleus():
    lprobs = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    cfg = lambda **kw: DecodeConfig(method="sample", beam=1, **kw)  # noqa: E731
    dist = lambda **kw: Sampler(cfg(**kw), [(0, 0)]).distribution(lprobs)[0]  # noqa: E731
    assert dist(sampling_topk=2).tolist() == pytest.approx([0.625, 0.375, 0, 0])
    # Top-p .7: .5 alone is short of .7, .5 + .3 reaches it; the rest go.
    assert (dist(sampling_topp=0.7) > 0).tolist() == [True, True, False, False]
    hot = dist(temperature=2.0)
    assert hot[3] > 0.05 and hot.sum() == pytest.approx(1.0)  # flatter than the model's own


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.load(FIXTURE, device="cpu", beam=4)


def test_a_prefix_starts_the_output_and_batching_does_not_change_it(translator):
    prefixes = ["The", "", "A big", None] * (len(LINES) // 4) + [""] * (len(LINES) % 4)
    out = [h[0].text for h in translator.search(LINES, prefixes=prefixes)]
    plain = translator.translate(LINES)
    for text, prefix, base in zip(out, prefixes, plain):
        assert text.startswith(prefix) if prefix else text == base
    alone = translator.with_options(batch_size=1)
    assert [
        alone.search([line], prefixes=[p])[0][0].text for line, p in zip(LINES, prefixes)
    ] == out
    with pytest.raises(MtError, match="3 prefixes for 30 lines"):
        translator.search(LINES, prefixes=["a", "b", "c"])


def test_sampling_is_reproducible_by_seed_whatever_the_batch_and_differs_across_seeds(translator):
    sample = translator.with_options(sampling_topk=10, seed=7)
    a = [h.tokens for hyps in sample.search(LINES, nbest=3) for h in hyps]
    b = [
        h.tokens for hyps in sample.with_options(batch_size=1).search(LINES, nbest=3) for h in hyps
    ]
    c = [h.tokens for hyps in sample.with_options(seed=8).search(LINES, nbest=3) for h in hyps]
    assert a == b
    assert sum(x != y for x, y in zip(a, c)) > len(a) // 4
    # the checkpoint's beam 4 is not kept
    assert sample.cfg.method == "sample" and sample.cfg.beam == 1
    with pytest.raises(MtError, match="takes no beam"):
        translator.with_options(sampling_topp=0.9, beam=3)


def test_sampling_with_top_k_1_is_greedy(translator):
    greedy = translator.with_options(beam=1).translate(LINES)
    assert translator.with_options(sampling_topk=1, seed=3).translate(LINES) == greedy


def test_an_ensemble_of_a_model_with_itself_is_that_model(translator):
    pair = Translator.load([FIXTURE, FIXTURE], device="cpu", beam=4)
    one, two = translator.search(LINES), pair.search(LINES)
    assert [[h.tokens for h in hyps] for hyps in two] == [[h.tokens for h in hyps] for hyps in one]
    flat = lambda found: [h.score for hyps in found for h in hyps]  # noqa: E731
    assert flat(two) == pytest.approx(flat(one), abs=1e-5)
    assert pair.score(LINES[:3], ["A dog.", "Red.", ""])[0].score == pytest.approx(
        translator.score(LINES[:3], ["A dog.", "Red.", ""])[0].score, abs=1e-5
    )


def test_an_ensemble_of_models_with_different_vocabularies_is_one_clear_error(
    tmp_path, tokenizer, tiny_model
):
    other = tmp_path / "other.pt"  # the session tokenizer has 117 pieces, the fixture's 100
    weights = checkpoint.Checkpoint(
        Config(model=tiny_model.cfg), tokenizer, tiny_model.state_dict(), None
    )
    checkpoint.save(other, weights)
    with pytest.raises(
        MtError, match=r"model.pt and .*other.pt have different target vocabularies \(100 and 117"
    ):
        Translator.load([FIXTURE, other], device="cpu")


def test_alignment_is_the_argmax_of_the_last_layers_cross_attention_over_heads(translator):
    found = translator.search(LINES[:5], alignment=True)
    for line, hyps in zip(LINES[:5], found):
        h = hyps[0]
        maps = record_attention(translator, line, h.text).maps["decoder-cross"][-1]  # (H, T+1, S)
        assert len(h.alignment) == len(h.token_logprobs)
        # the heat map re-encodes the text
        if translator.tokenizer.encode_tgt([h.text])[0] == h.tokens:
            assert h.alignment == maps.mean(dim=0).argmax(dim=-1).tolist()


def test_progress_shows_lines_rate_and_time_left():
    stream = io.StringIO()
    p = Progress(1000, stream, every_s=0.0)
    p.advance(250)
    p.close()
    last = stream.getvalue().split("\r")[-1]
    assert last.startswith("250 lines of 1,000, ") and "lines/s" in last and "left" in last


runner = CliRunner()


def _fails(args, expected: str) -> None:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert expected in result.output, result.output


def test_mt_translate_takes_every_control_and_refuses_bad_input_in_one_line(tmp_path):
    src = write_lines(tmp_path / "in.de", LINES[:4])
    ok = runner.invoke(
        app,
        [
            "translate",
            "--checkpoint",
            str(FIXTURE),
            "--checkpoint",
            str(FIXTURE),
            str(src),
            "--prefix-file",
            str(write_lines(tmp_path / "p.txt", ["The", "", "", "A"])),
        ],
    )
    assert ok.exit_code == 0, ok.output
    lines = ok.stdout.splitlines()
    assert len(lines) == 4 and lines[0].startswith("The") and lines[3].startswith("A")
    assert "lines/s" not in ok.output  # no progress when stderr is not a terminal
    glossary = write_lines(tmp_path / "g.tsv", ["hund\tcat", "mann guy"])
    base = ["translate", "--checkpoint", FIXTURE, src]
    _fails([*base, "--glossary", glossary], "g.tsv:2: no tab")
    three = write_lines(tmp_path / "p3.txt", ["a", "b", "c"])
    _fails([*base, "--prefix-file", three], "p3.txt: 3 lines, but the input has 4")
    _fails(
        [*base, "--constraints-file", tmp_path / "none.txt"],
        "none.txt: tab-separated list of terms file not found",
    )
    _fails([*base, "--sampling-topk", 5, "--beam", 3], "takes no beam")
    _fails([*base, "--alignment"], "need --format jsonl")
    _fails(
        [*base, "--format", "jsonl", "--alignment", "--checkpoint", FIXTURE],
        "does not combine with an ensemble",
    )
    got = runner.invoke(
        app,
        [
            str(a)
            for a in [
                *base,
                "--format",
                "jsonl",
                "--alignment",
                "--sampling-topp",
                0.9,
                "--seed",
                1,
                "--nbest",
                2,
            ]
        ],
    )
    rows = [json.loads(line) for line in got.stdout.splitlines()]
    assert (
        got.exit_code == 0
        and len(rows) == 4
        and all(len(r["nbest"]) == 2 and "alignment" in r for r in rows)
    )


@pytest.mark.parametrize(
    "options",
    [
        {"no_repeat_ngram": 2},
        {"sampling_topp": 0.8, "seed": 5},
        {"temperature": 1.5, "seed": 2},
        {"beam": 3},
    ],
    ids=["no-repeat", "top-p", "temperature", "beam-3"],
)
def test_each_option_decodes_a_batch_as_it_decodes_line_by_line(translator, options):
    tr = translator.with_options(**options)
    together = [
        [(h.tokens, h.alignment) for h in hyps]
        for hyps in tr.search(LINES, nbest=2, alignment=True)
    ]
    alone = tr.with_options(batch_size=1)
    apart = [
        [
            (h.tokens, h.alignment)
            for h in alone.search([line], nbest=2, alignment=True, first_line=i)[0]
        ]
        for i, line in enumerate(LINES)
    ]
    assert together == apart


def test_an_ensemble_decodes_a_batch_as_it_decodes_line_by_line(trained):
    _, run = trained
    pair = Translator.load([FIXTURE, run / "run" / "best.pt"], device="cpu", beam=3)
    alone = pair.with_options(batch_size=1)
    assert pair.translate(LINES) == [alone.translate([line])[0] for line in LINES]
