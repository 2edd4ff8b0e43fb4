"""`mt import` of a Hugging Face Marian (OPUS-MT-shaped) folder, with transformers as the oracle:
a MarianMTModel with random weights and a toy vocabulary is built in the test, saved with
save_pretrained, imported, and must tokenize, score and translate as transformers does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import make_pairs
from mt_cli import Translator
from mt_cli.config import TokenizerConfig
from mt_cli.data.marian_vocab import mt_order
from mt_cli.data.tokenizer import train_sentencepiece
from mt_cli.errors import MtError
from mt_cli.interop.hf_import import import_hf
from mt_cli.model import checkpoint

transformers = pytest.importorskip("transformers")

EOS_BIAS = 1.0
LINES = [
    "Ein hund sieht ein rot haus.",
    "Der mann läuft schnell und die frau sieht ihn.",
    ">>en<< Kind hat ball.",
    "x",
    "Ωμέγα ☃ qüz",
]


def _vocab(spm: bytes, extra: tuple[str, ...] = ()) -> list[str]:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_proto=spm)
    pieces = [
        sp.id_to_piece(i)
        for i in range(sp.get_piece_size())
        if not (sp.is_control(i) or sp.is_unknown(i))
    ]
    return ["</s>", "<unk>", *extra, *pieces, "<pad>"]


def marian_folder(d: Path, activation: str = "swish", separate: bool = False) -> Path:
    """An OPUS-MT-shaped folder: two SentencePiece models, vocab.json with </s> 0, <unk> 1 and
    <pad> last, a >>en<< language token, swish, a final_logits_bias; `separate`: each side its own
    SentencePiece model, vocabulary and embeddings (share_encoder_decoder_embeddings false)."""
    src, tgt = make_pairs(300)
    spm = train_sentencepiece(src + tgt, TokenizerConfig(vocab_size=90))
    tgt_spm = train_sentencepiece(tgt, TokenizerConfig(vocab_size=60)) if separate else spm
    vocab = _vocab(spm, (">>en<<",))
    tgt_vocab = _vocab(tgt_spm) if separate else vocab
    v, tv = len(vocab), len(tgt_vocab)
    cfg = transformers.MarianConfig(
        vocab_size=v,
        decoder_vocab_size=tv,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        activation_function=activation,
        pad_token_id=tv - 1,
        eos_token_id=0,
        decoder_start_token_id=tv - 1,
        forced_eos_token_id=0,
        scale_embedding=True,
        init_std=0.2,
        share_encoder_decoder_embeddings=not separate,
    )
    torch.manual_seed(0)
    model = transformers.MarianMTModel(cfg).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)
        # as OPUS-MT's converter and mt's export write it
        model.final_logits_bias[0, tv - 1] = float("-inf")
        # </s>: so that random weights end some outputs early
        model.final_logits_bias[0, 0] = EOS_BIAS
    model.save_pretrained(d)
    (d / "source.spm").write_bytes(spm)
    (d / "target.spm").write_bytes(tgt_spm)
    (d / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}), encoding="utf-8")
    tc = {
        "unk_token": "<unk>",
        "eos_token": "</s>",
        "pad_token": "<pad>",
        "separate_vocabs": separate,
    }
    if separate:
        (d / "target_vocab.json").write_text(
            json.dumps({p: i for i, p in enumerate(tgt_vocab)}), encoding="utf-8"
        )
        tc["target_vocab_file"] = str(d / "target_vocab.json")
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    return d


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    d = marian_folder(tmp_path_factory.mktemp("opus"))
    out = import_hf(d, d / "imported.pt")
    return d, out


def test_an_imported_model_tokenizes_1000_lines_as_marian_tokenizer_does(imported):
    folder, out = imported
    hf_tok = transformers.MarianTokenizer.from_pretrained(folder)
    ours = checkpoint.load(out).tokenizer
    odd = ["Ωμέγα ☃ qüz", "日本語 テキスト", ">>en<< Hund 🐕", "Ein\tHund  läuft", "ÆØÅ æøå ß"]
    lines = [
        line if i % 10 else odd[i // 10 % len(odd)] + " " + line
        for i, line in enumerate(make_pairs(1000, 3)[0])
    ]
    to_mt = torch.argsort(
        torch.tensor(mt_order(ours.src_vocab, ours.specials))
    ).tolist()  # Marian id -> mt id
    theirs = [[to_mt[i] for i in ids] for ids in hf_tok(lines).input_ids]
    assert ours.encode_src(lines) == theirs
    # unknown pieces (<unk> is mt id 1) are among them
    assert sum(ids.count(1) for ids in theirs) > 50
    pieces = hf_tok.convert_ids_to_tokens(hf_tok([LINES[2]]).input_ids[0])
    # the language token: one piece
    assert ours.src_pieces(LINES[2]) == pieces and pieces[0] == ">>en<<"


def test_an_imported_model_gives_transformers_log_probabilities_at_every_position(imported):
    folder, out = imported
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    ckpt = checkpoint.load(out)
    model = ckpt.build_model()
    tok = transformers.MarianTokenizer.from_pretrained(folder)
    batch = tok(
        LINES[:2],
        text_target=["A dog sees a red house.", "The man runs."],
        padding=True,
        return_tensors="pt",
    )
    start = torch.full((2, 1), hf.config.decoder_start_token_id)
    dec_in = torch.cat([start, batch["labels"][:, :-1]], dim=1)
    with torch.no_grad():
        theirs = hf(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, decoder_input_ids=dec_in
        ).logits
        order = torch.tensor(mt_order(ckpt.tokenizer.tgt_vocab, ckpt.tokenizer.specials))
        to_mt = torch.argsort(order)  # Marian id -> mt id
        src, tgt_in = to_mt[batch.input_ids], to_mt[dec_in]
        src[batch.attention_mask == 0] = 0
        tgt_in[dec_in == hf.config.pad_token_id] = 0  # mt's PAD: the start and the padding
        ours = model(src, tgt_in)[..., to_mt]  # (B, T, V) in Marian's id order
    real = (batch["labels"] != -100) & (batch["labels"] != hf.config.pad_token_id)
    # <pad>: -inf in both, never an output
    keep = torch.arange(theirs.size(-1)) != hf.config.pad_token_id
    ours_lp, theirs_lp = (torch.log_softmax(x[real][:, keep], dim=-1) for x in (ours, theirs))
    assert (ours_lp - theirs_lp).abs().max() < 1e-5


def test_an_imported_model_translates_100_sentences_as_transformers_generate_does(imported):
    folder, out = imported
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    tok = transformers.MarianTokenizer.from_pretrained(folder)
    tr = Translator.load(out, device="cpu", beam=1)  # as imported: fp32, transformers' arithmetic
    assert tr.cfg.precision == "fp32"
    lines = LINES + make_pairs(95, seed=5)[0]
    ours = tr.translate(lines)
    for line, mine in zip(lines, ours):
        ids = tok([line], return_tensors="pt").input_ids
        limit = int(ids.size(1) * tr.cfg.max_len_ratio) + tr.cfg.max_len_offset
        with torch.no_grad():
            gen = hf.generate(ids, num_beams=1, do_sample=False, max_new_tokens=limit)
        assert mine == tok.batch_decode(gen, skip_special_tokens=True)[0]


def test_import_refuses_what_marian_cannot_hold_in_one_line(tmp_path):
    d = marian_folder(tmp_path / "a")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "normalize_before": True}))
    with pytest.raises(MtError, match="normalize_before is True \\(pre-norm\\)"):
        import_hf(d, tmp_path / "x.pt")
    (d / "config.json").write_text(json.dumps({**cfg, "activation_function": "tanh"}))
    with pytest.raises(MtError, match="activation_function 'tanh'"):
        import_hf(d, tmp_path / "x.pt")
    (d / "vocab.json").unlink()
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(MtError, match="vocab.json: not found"):
        import_hf(d, tmp_path / "x.pt")
    with pytest.raises(MtError, match="not a folder"):
        import_hf(tmp_path / "nothing", tmp_path / "x.pt")


def test_an_imported_model_exports_back_to_the_folder_it_came_from(imported, tmp_path):
    from safetensors.torch import load_file

    from mt_cli.interop import export

    folder, out = imported
    back = export(checkpoint.load(out), tmp_path / "back", "hf")
    before, after = (
        load_file(str(folder / "model.safetensors")),
        load_file(str(back / "model.safetensors")),
    )
    for name, tensor in before.items():
        # positions are a fixed table
        if "embed_positions" not in name and name != "lm_head.weight":
            assert torch.equal(after[name], tensor), name
    assert json.loads((back / "vocab.json").read_text()) == json.loads(
        (folder / "vocab.json").read_text()
    )
    for name in ("source.spm", "target.spm"):
        assert (back / name).read_bytes() == (folder / name).read_bytes(), name
    hf_tok = transformers.MarianTokenizer.from_pretrained(back)
    original, exported = (
        transformers.MarianMTModel.from_pretrained(d).eval() for d in (folder, back)
    )
    ids = hf_tok(LINES, return_tensors="pt", padding=True)
    with torch.no_grad():
        assert torch.equal(
            original.generate(**ids, num_beams=2, max_new_tokens=20),
            exported.generate(**ids, num_beams=2, max_new_tokens=20),
        )


def test_an_imported_model_exports_to_ctranslate2_and_translates_as_mt(imported, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from mt_cli.interop import export

    folder, out = imported
    ckpt = checkpoint.load(out)
    ct2 = ctranslate2.Translator(str(export(ckpt, tmp_path / "ct2", "ct2")), device="cpu")
    tok = ckpt.tokenizer
    # A random model seldom ends early: mt's limit of 40 (EOS included) leaves 39 pieces,
    # CTranslate2's max_decoding_length counts pieces without EOS.
    results = ct2.translate_batch(
        [tok.src_pieces(line) for line in LINES], beam_size=1, max_decoding_length=39
    )
    found = Translator.load(
        out, device="cpu", beam=1, max_len_offset=40, max_len_ratio=0.01, precision="fp32"
    ).search(LINES)
    assert [tok.tgt_pieces(hyps[0].tokens) for hyps in found] == [r.hypotheses[0] for r in results]


def test_fine_tuning_an_imported_model_starts_from_its_weights_keeps_frozen_parts_and_resumes(
    imported, tmp_path, corpus_files
):
    from mt_cli.config import build_config
    from mt_cli.data.marian_vocab import MarianVocab
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    _, out = imported
    start = checkpoint.load(out)
    f = corpus_files
    spec = DataSpec.text_files(f["train_src"], f["train_tgt"], f["valid_src"], f["valid_tgt"])
    sets = [
        f"train.init={out}",
        "train.freeze_embeddings=true",
        "train.freeze_encoder=true",
        "train.valid_every=20",
        "train.warmup_steps=5",
        "train.batch_tokens=400",
    ]
    run = tmp_path / "run"
    train(spec, run, build_config(sets=[*sets, "train.max_steps=20"]), log=lambda *_: None)
    tuned = checkpoint.load(run / "last.pt")
    assert isinstance(tuned.tokenizer, MarianVocab) and tuned.config.model == start.config.model
    assert tuned.train_state is not None and tuned.train_state["step"] == 20
    for name, w in start.model_state.items():
        frozen = (
            name.startswith("encoder.")
            or "embeddings" in name
            or name == "output_projection.weight"
        )
        assert torch.equal(tuned.model_state[name], w) == frozen, name
    # the same command, resumed
    train(spec, run, build_config(sets=[*sets, "train.max_steps=30"]), log=lambda *_: None)
    assert checkpoint.load(run / "last.pt").train_state["step"] == 30
    with pytest.raises(MtError, match="give train.init CKPT"):
        train(
            spec,
            tmp_path / "r2",
            build_config(sets=["train.freeze_encoder=true", "train.max_steps=1"]),
        )


def test_separate_vocabularies_import_and_translate_as_transformers_does(tmp_path):
    folder = marian_folder(tmp_path / "sep", separate=True)
    out = import_hf(folder, tmp_path / "sep.pt")
    tok = checkpoint.load(out).tokenizer
    assert tok.src_vocab_size != tok.tgt_vocab_size and not tok.joint
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    hf_tok = transformers.MarianTokenizer.from_pretrained(folder)
    ours = Translator.load(out, device="cpu", beam=1).translate(LINES)  # fp32, as imported
    for line, mine in zip(LINES, ours):
        ids = hf_tok([line], return_tensors="pt").input_ids
        with torch.no_grad():
            gen = hf.generate(
                ids, num_beams=1, do_sample=False, max_new_tokens=int(ids.size(1) * 1.5) + 10
            )
        # Without the start token: MarianTokenizer skips the source side's <pad> id, not the
        # target's.
        assert mine == hf_tok.batch_decode(gen[:, 1:], skip_special_tokens=True)[0]


def test_unknown_pieces_and_the_target_language_token(imported):
    folder, out = imported
    tr = Translator.load(out, device="cpu", beam=1)
    assert "<unk>" in tr.tokenizer.src_pieces(LINES[4])  # characters the vocabulary lacks
    to_en = tr.for_languages(target="en")
    assert to_en.source_ids(["Kind hat ball."]) == tr.source_ids([">>en<< Kind hat ball."])
    # a line's own token is kept
    assert to_en.source_ids([">>en<< x"]) == tr.source_ids([">>en<< x"])
    with pytest.raises(
        MtError, match=r"target language 'fr': the model has no such language; it has en"
    ):
        tr.for_languages(target="fr")


def test_a_hub_id_offline_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(
        MtError, match="Helsinki-NLP/opus-mt-xx-yy: could not fetch it from the Hugging Face hub"
    ):
        import_hf(Path("Helsinki-NLP/opus-mt-xx-yy"), tmp_path / "x.pt")


def test_mt_import_then_mt_translate_and_score_from_the_command_line(imported, tmp_path):
    from typer.testing import CliRunner

    from conftest import write_lines
    from mt_cli.cli import app

    folder, _ = imported
    runner, out = CliRunner(), tmp_path / "cli.pt"
    done = runner.invoke(app, ["import", str(folder), "--out", str(out)])
    assert done.exit_code == 0, done.output
    src = write_lines(tmp_path / "in.txt", LINES[:3])
    got = runner.invoke(
        app, ["translate", "--checkpoint", str(out), str(src), "--target-lang", "en", "--beam", "2"]
    )
    assert got.exit_code == 0 and len(got.stdout.splitlines()) == 3, got.output
    scored = runner.invoke(
        app, ["score", "--checkpoint", str(out), "--src", str(src), "--tgt", str(src)]
    )
    assert scored.exit_code == 0 and len(scored.stdout.splitlines()) == 3, scored.output
    bad = runner.invoke(app, ["import", str(tmp_path / "missing"), "--out", str(out)])
    assert bad.exit_code != 0 and "not a folder" in bad.output and "Traceback" not in bad.output


def test_an_mt_model_exported_and_imported_back_has_its_weights_bitwise_and_translates_the_same(
    trained, tmp_path
):
    from mt_cli.interop import export

    ckpt, _ = trained
    back = checkpoint.load(import_hf(export(ckpt, tmp_path / "hf", "hf"), tmp_path / "back.pt"))
    for name, w in ckpt.model_state.items():
        got = back.model_state[name]
        if name.endswith("embeddings.token.weight") or name == "output_projection.weight":
            # <pad>'s row is never read by mt (it embeds as zeros, is never output); export writes
            # zeros there, Marian's start vector. Every other row comes back bit for bit.
            got, w = got[1:], w[1:]
        assert torch.equal(got, w), name
    assert not back.model_state[
        "output_projection.bias"
    ].any()  # the exported bias: zeros (and -inf at <pad>)
    lines = make_pairs(40, seed=4)[0]
    assert back.config.decode.precision == "fp32"  # an import decodes in fp32 until checked
    for beam, precision in ((1, "fp32"), (4, "fp32"), (4, "int8")):
        given = {"beam": beam, "precision": precision}
        original = Translator.from_checkpoint(ckpt, "cpu", **given).translate(lines)
        assert Translator.from_checkpoint(back, "cpu", **given).translate(lines) == original


def test_fine_tuning_starts_at_the_initial_models_loss_and_falls(trained, tmp_path, corpus_files):
    from conftest import write_lines
    from mt_cli.config import build_config
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    _, run = trained  # trained on one half of the toy language: make_pairs(400)
    src, tgt = make_pairs(400, seed=11)  # the other half
    f = {
        "train_src": write_lines(tmp_path / "t.de", src),
        "train_tgt": write_lines(tmp_path / "t.en", tgt),
    }
    spec = DataSpec.text_files(
        f["train_src"], f["train_tgt"], corpus_files["valid_src"], corpus_files["valid_tgt"]
    )
    sets = [
        "train.max_steps=50",
        "train.log_every=1",
        "train.valid_every=50",
        "train.batch_tokens=500",
        "train.warmup_steps=5",
        "train.lr=1e-3",
    ]
    losses = {}
    for name, extra in (
        ("tuned", [f"train.init={run / 'run' / 'best.pt'}"]),
        ("scratch", ["tokenizer.vocab_size=100"]),
    ):
        lines: list[str] = []
        train(spec, tmp_path / name, build_config("tiny", sets=[*sets, *extra]), log=lines.append)
        entries = [json.loads(e) for e in (tmp_path / name / "log.jsonl").read_text().splitlines()]
        losses[name] = [e["loss"] for e in entries if "loss" in e]
    # the initial model's loss, not a random model's
    assert losses["tuned"][0] < 0.5 * losses["scratch"][0]
    assert sum(losses["tuned"][-5:]) / 5 < losses["tuned"][0]  # and it falls


def test_a_fine_tuning_run_killed_with_sigkill_resumes_bitwise_as_any_run(
    imported, tmp_path, corpus_files
):
    import signal
    import subprocess
    import sys

    from test_resume import _assert_same_state, _killed_at

    _, init = imported
    f = corpus_files

    def args(out: Path) -> list[str]:
        return list(
            map(
                str,
                [
                    "train",
                    "--init",
                    init,
                    "--train-src",
                    f["train_src"],
                    "--train-tgt",
                    f["train_tgt"],
                    "--valid-src",
                    f["valid_src"],
                    "--valid-tgt",
                    f["valid_tgt"],
                    "--out",
                    out,
                    "--max-steps",
                    "12",
                    "--set",
                    "train.batch_tokens=300",
                    "--set",
                    "train.save_every=3",
                    "--set",
                    "train.valid_every=6",
                    "--set",
                    "decode.beam=1",
                ],
            )
        )

    ref, run = tmp_path / "ref", tmp_path / "run"
    subprocess.run([sys.executable, "-m", "mt_cli", *args(ref)], check=True, capture_output=True)
    proc = _killed_at("step", 5, args(run))  # after the 5th update, before anything records it
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    subprocess.run([sys.executable, "-m", "mt_cli", *args(run)], check=True, capture_output=True)
    want, got = checkpoint.load(ref / "last.pt"), checkpoint.load(run / "last.pt")
    assert got.train_state["step"] == 12
    _assert_same_state(want.model_state, got.model_state, "model")
    _assert_same_state(want.train_state, got.train_state, "train_state")
