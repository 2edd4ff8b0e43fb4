"""`mt import` of M2M100 and NLLB-200 folders, with transformers and CTranslate2 as the oracles: a
random-weight M2M100ForConditionalGeneration of each flavour (M2M100's __de__ tokens and
vocab.json; NLLB's deu_Latn tokens and tokenizer.json), with a SentencePiece model trained in the
test on lines in five scripts, is saved with save_pretrained, imported, and must tokenize, score
and translate as transformers does."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from conftest import make_pairs
from mt_cli import Translator
from mt_cli.data.marian_vocab import mt_order
from mt_cli.decode.scoring import force
from mt_cli.errors import MtError
from mt_cli.interop.hf_import import import_hf
from mt_cli.model import checkpoint

transformers = pytest.importorskip("transformers")

# Latin letters -> letters of another script, so that lines of the test's own words are written in
# it (the shared data has no Cyrillic, Arabic or Devanagari text). Han has no spaces.
SCRIPTS = {
    "cyrillic": dict(zip("abcdefghijklmnopqrstuvwxyzäöü", "абцдефгхийклмнопкрстувшхызэюя")),
    "arabic": dict(zip("abcdefghijklmnopqrstuvwxyzäöü", "ابتدهفغحيجكلمنوپقرسطئوشخيزعءؤ")),
    "devanagari": dict(zip("abcdefghijklmnopqrstuvwxyzäöü", "अबचदेफगहिजकलमनोपकरसतुवशखयज़ऐऔऊ")),
    "han": dict(
        zip(
            "abcdefghijklmnopqrstuvwxyzäöü",
            "人口大小山水火木金土日月天地上下中左右年生学先不了是我你",
        )
    ),
}
ODD = [
    "Ωμέγα ☃ qüz",
    "日本語 テキスト",
    "Ein\tHund  läuft",
    "ÆØÅ æøå ß",
    "😀 emoji",
    " leading space",
    "a  b   c",
]


def script_lines(n: int, seed: int = 0) -> list[str]:
    """n lines: a fifth Latin, the rest in Cyrillic, Arabic, Devanagari and Han letters, and some
    odd ones."""
    src, tgt = make_pairs(n, seed)
    out = []
    for i, line in enumerate(src if seed % 2 == 0 else tgt):
        kind = ["latin", *SCRIPTS][i % 5]
        if kind != "latin":
            line = "".join(SCRIPTS[kind].get(c, c) for c in line.lower())
            line = line.replace(" ", "") if kind == "han" else line
        out.append(f"{ODD[i // 5 % len(ODD)]} {line}" if i % 11 == 0 else line)
    return out


def spm_model(lines: list[str]) -> bytes:
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=400,
        model_type="bpe",
        character_coverage=0.999,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return model.getvalue()


def random_model(d: Path, vocab_size: int, **extra: object) -> None:
    cfg = transformers.M2M100Config(
        vocab_size=vocab_size,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=128,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        init_std=0.2,
        scale_embedding=True,
        **extra,
    )
    torch.manual_seed(0)
    transformers.M2M100ForConditionalGeneration(cfg).eval().save_pretrained(d)


def m2m100_folder(d: Path) -> Path:
    """M2M100's layout: vocab.json (fairseq's dictionary: <s> <pad> </s> <unk>, then the pieces),
    sentencepiece.bpe.model, the __xx__ tokens after the pieces, 8 made-up words after them."""
    import sentencepiece

    d.mkdir(parents=True, exist_ok=True)
    spm = spm_model(script_lines(1500, seed=2))
    sp = sentencepiece.SentencePieceProcessor(model_proto=spm)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        if not (sp.is_control(i) or sp.is_unknown(i)):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (d / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (d / "sentencepiece.bpe.model").write_bytes(spm)
    tok = transformers.M2M100Tokenizer(str(d / "vocab.json"), str(d / "sentencepiece.bpe.model"))
    tok.save_pretrained(d)
    random_model(d, len(vocab) + len(tok.lang_code_to_id) + 8)
    return d


def nllb_folder(d: Path) -> Path:
    """NLLB-200's layout: sentencepiece.bpe.model, tokenizer.json with the 202 deu_Latn-style
    codes as added tokens, and two unused rows past the tokenizer (256206 against 256204)."""
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    src = d.parent / f"{d.name}-spm"
    src.mkdir(parents=True, exist_ok=True)
    (src / "sentencepiece.bpe.model").write_bytes(spm_model(script_lines(1500, seed=2)))
    (src / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "NllbTokenizer"}))
    tok = transformers.NllbTokenizer.from_pretrained(
        src, extra_special_tokens=FAIRSEQ_LANGUAGE_CODES
    )
    tok.save_pretrained(d)
    (d / "sentencepiece.bpe.model").write_bytes((src / "sentencepiece.bpe.model").read_bytes())
    random_model(d, len(tok) + 2, tokenizer_class="NllbTokenizer")
    return d


FLAVOURS = {"m2m100": (m2m100_folder, "de", "en"), "nllb": (nllb_folder, "deu_Latn", "eng_Latn")}


@pytest.fixture(scope="module", params=sorted(FLAVOURS))
def imported(request, tmp_path_factory):
    make, src, tgt = FLAVOURS[request.param]
    d = make(tmp_path_factory.mktemp(request.param) / "hf")
    return d, import_hf(d, d.parent / "imported.pt"), src, tgt


def hf_tokenizer(folder: Path, src: str, tgt: str):
    return transformers.AutoTokenizer.from_pretrained(folder, src_lang=src, tgt_lang=tgt)


def to_mt(tok) -> list[int]:
    """The model's id -> mt's id."""
    return torch.argsort(torch.tensor(mt_order(tok.src_vocab, tok.specials))).tolist()


def test_1000_lines_in_five_scripts_get_the_token_ids_transformers_gives(imported):
    folder, out, src, tgt = imported
    hf_tok = hf_tokenizer(folder, src, tgt)
    tr = Translator.load(out, device="cpu").for_languages(src, tgt)
    lines = script_lines(1000, seed=3)
    ids = to_mt(tr.tokenizer)
    theirs = [[ids[i] for i in row] for row in hf_tok(lines).input_ids]
    ours = tr.source_ids(lines)
    assert ours == theirs
    assert (
        ours[0][0]
        == ids[hf_tok.convert_tokens_to_ids(hf_tok.src_lang if "_" in src else f"__{src}__")]
    )
    # unknown characters (<unk> is mt id 1) are among them
    assert sum(row.count(1) for row in ours) > 20


def test_log_probabilities_match_transformers_at_every_position(imported):
    folder, out, src, tgt = imported
    hf = transformers.M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    hf_tok = hf_tokenizer(folder, src, tgt)
    ckpt = checkpoint.load(out)
    model = ckpt.build_model()
    lines, targets = script_lines(12, seed=4), script_lines(12, seed=5)
    batch = hf_tok(lines, text_target=targets, padding=True, return_tensors="pt")
    labels = batch["labels"]
    # </s> [target language] y ...
    dec_in = torch.cat([torch.full((len(lines), 1), 2), labels[:, :-1]], dim=1)
    ids = torch.tensor(to_mt(ckpt.tokenizer))
    with torch.no_grad():
        theirs = hf(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, decoder_input_ids=dec_in
        ).logits
        src_ids, tgt_in = ids[batch.input_ids], ids[dec_in]
        src_ids[batch.attention_mask == 0] = 0
        tgt_in[dec_in == 1] = 0  # mt's PAD
        ours = model(src_ids, tgt_in)[..., ids]  # (B, T, V) in the model's id order
    real = labels != 1
    keep = torch.arange(theirs.size(-1)) != 1  # <pad>: never an output in mt
    ours_lp, theirs_lp = (torch.log_softmax(x[real][:, keep], dim=-1) for x in (ours, theirs))
    assert real.sum() > 100
    assert (ours_lp - theirs_lp).abs().max() < 1e-5


def test_100_greedy_translations_equal_generate_with_the_forced_target_language(imported):
    folder, out, src, tgt = imported
    hf = transformers.M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    hf_tok = hf_tokenizer(folder, src, tgt)
    tr = Translator.load(out, device="cpu", beam=1, precision="fp32").for_languages(src, tgt)
    lines = script_lines(100, seed=6)
    found = tr.search(lines)
    forced = hf_tok.convert_tokens_to_ids(tgt if "_" in tgt else f"__{tgt}__")
    model_ids = mt_order(tr.tokenizer.src_vocab, tr.tokenizer.specials)  # mt id -> the model's
    languages = set(tr.tokenizer.codes.values())
    for line, hyps in zip(lines, found):
        enc = hf_tok([line], return_tensors="pt")
        limit = int(enc.input_ids.size(1) * tr.cfg.max_len_ratio) + tr.cfg.max_len_offset
        # mt's limit counts EOS, which it writes at the limit; transformers' counts the language
        # token
        with torch.no_grad():
            gen = hf.generate(
                **enc,
                forced_bos_token_id=forced,
                num_beams=1,
                do_sample=False,
                max_new_tokens=limit,
                suppress_tokens=[1],
            )[0].tolist()
        assert gen[:2] == [2, forced]  # </s>, then the target language
        assert [model_ids[t] for t in hyps[0].tokens] == [t for t in gen[2:] if t != 2], line
        # The text: transformers' own decoding, without language tokens (their tokenizer may keep
        # them)
        text_ids = [t for t in hyps[0].tokens if t not in languages]
        expected = hf_tok.decode([model_ids[t] for t in text_ids], skip_special_tokens=True)
        assert hyps[0].text == " ".join(expected.split()), line


def test_a_language_the_model_lacks_is_one_line_naming_the_nearest(imported):
    _, out, src, tgt = imported
    tr = Translator.load(out, device="cpu")
    with pytest.raises(MtError, match=r"name the source language \(source_lang\)"):
        tr.translate(["x"])
    with pytest.raises(
        MtError, match=r"target language 'xx': the model has no such language; nearest: "
    ):
        tr.for_languages(src, "xx")
    assert tr.for_languages("de", "en").source_ids(["x"]) == tr.for_languages(src, tgt).source_ids(
        ["x"]
    )


def test_export_writes_back_the_folder_bitwise_and_transformers_loads_it(imported, tmp_path):
    from safetensors.torch import load_file

    from mt_cli.interop import export

    folder, out, src, tgt = imported
    back = export(checkpoint.load(out), tmp_path / "back", "hf")
    before, after = (
        load_file(str(folder / "model.safetensors")),
        load_file(str(back / "model.safetensors")),
    )
    assert set(after) <= set(before)
    for name, tensor in before.items():
        if name in after or name not in (
            "lm_head.weight",
            "model.encoder.embed_tokens.weight",
            "model.decoder.embed_tokens.weight",
        ):
            # the tied copies are one matrix, written once
            assert torch.equal(after[name], tensor), name
    for name in (
        "sentencepiece.bpe.model",
        "tokenizer_config.json",
        "vocab.json",
        "tokenizer.json",
    ):
        if (folder / name).is_file():
            assert (back / name).read_bytes() == (folder / name).read_bytes(), name
    original, exported = (
        transformers.M2M100ForConditionalGeneration.from_pretrained(d).eval()
        for d in (folder, back)
    )
    hf_tok = hf_tokenizer(back, src, tgt)
    enc = hf_tok(script_lines(6, seed=7), return_tensors="pt", padding=True)
    forced = hf_tok.convert_tokens_to_ids(tgt if "_" in tgt else f"__{tgt}__")
    with torch.no_grad():
        before_gen, after_gen = (
            m.generate(**enc, num_beams=2, max_new_tokens=20, forced_bos_token_id=forced)
            for m in (original, exported)
        )
    assert torch.equal(before_gen, after_gen)


def test_ctranslate2_translates_the_export_as_mt_does(imported, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from mt_cli.interop import export

    folder, out, src, tgt = imported
    tr = Translator.load(
        out, device="cpu", beam=1, max_len_offset=30, max_len_ratio=0.01, precision="fp32"
    )
    tr = tr.for_languages(src, tgt)
    ct2 = ctranslate2.Translator(
        str(export(checkpoint.load(out), tmp_path / "ct2", "ct2")), device="cpu"
    )
    lines = script_lines(20, seed=8)
    tok = tr.tokenizer
    # the language token, pieces, </s>
    sources = [tok.tgt_pieces(ids) for ids in tr.source_ids(lines)]
    target = tok.tgt_pieces(list(tr.decoder_start))
    # CTranslate2's max_decoding_length counts the target prefix and not </s>: 1 + 29 against mt's
    # 30.
    results = ct2.translate_batch(
        sources, target_prefix=[target] * len(lines), beam_size=1, max_decoding_length=30
    )
    found = tr.search(lines)
    assert [target + tok.tgt_pieces(hyps[0].tokens) for hyps in found] == [
        r.hypotheses[0] for r in results
    ]


def test_the_engine_beam_search_scoring_and_int8_read_the_language_tokens(imported):
    _, out, src, tgt = imported
    lines = script_lines(24, seed=9)
    eager = Translator.load(
        out, device="cpu", beam=4, engine="eager", precision="fp32"
    ).for_languages(src, tgt)
    step = Translator.load(
        out, device="cpu", beam=4, engine="step", precision="fp32"
    ).for_languages(src, tgt)
    found = eager.search(lines)
    assert [h[0].text for h in step.search(lines)] == [h[0].text for h in found]
    # Forced scoring reads </s> and the target language first, as search did: the same
    # log-probabilities
    best = [hyps[0] for hyps in found]
    scored = force(
        eager.model,
        eager.source_ids(lines),
        [h.tokens for h in best],
        eager.cfg,
        eager.decoder_start,
    )
    for s, h in zip(scored, best):
        assert s.tokens == h.tokens and s.token_logprobs == pytest.approx(
            h.token_logprobs, abs=1e-4
        )
    int8 = Translator.load(out, device="cpu", beam=4, precision="int8").for_languages(src, tgt)
    assert int8.translate(lines[:6]) == [int8.translate([line])[0] for line in lines[:6]]


def test_a_shortlist_for_an_imported_model_restricts_its_output_and_exports_as_a_vmap(
    imported, tmp_path
):
    from conftest import write_lines
    from mt_cli.data.collate import pad
    from mt_cli.interop import export
    from mt_cli.tools.add_shortlist import add_shortlist

    _, out, src, tgt = imported
    sources, targets = script_lines(300, seed=10), script_lines(300, seed=11)
    shortlist = add_shortlist(
        out,
        write_lines(tmp_path / "s", sources),
        write_lines(tmp_path / "t", targets),
        tmp_path / "short.pt",
        per_source=5,
        frequent=10,
        log=lambda *_: None,
    )
    tr = Translator.load(tmp_path / "short.pt", device="cpu", beam=2, shortlist=True).for_languages(
        src, tgt
    )
    lines = script_lines(10, seed=12)
    # one batch: its lines' union
    allowed = set(shortlist.for_batch(pad(tr.source_ids(lines)))[0].tolist())
    assert len(allowed) < tr.tokenizer.tgt_vocab_size / 2
    for hyps in tr.search(lines):
        assert hyps[0].tokens and set(hyps[0].tokens) <= allowed
    ct2 = export(checkpoint.load(tmp_path / "short.pt"), tmp_path / "ct2", "ct2")
    assert (ct2 / "vmap.txt").read_text(encoding="utf-8").count("\n") > 50


def test_mt_import_translate_and_score_from_the_command_line(imported, tmp_path):
    from typer.testing import CliRunner

    from conftest import write_lines
    from mt_cli.cli import app

    folder, _, src, tgt = imported
    runner, out = CliRunner(), tmp_path / "cli.pt"
    done = runner.invoke(app, ["import", str(folder), "--out", str(out)])
    assert done.exit_code == 0, done.output
    lines = write_lines(tmp_path / "in.txt", script_lines(3, seed=13))
    args = ["translate", "--checkpoint", str(out), str(lines), "--beam", "2"]
    got = runner.invoke(app, [*args, "--source-lang", src, "--target-lang", "en"])
    assert got.exit_code == 0 and len(got.stdout.splitlines()) == 3, got.output
    missing = runner.invoke(app, [*args, "--target-lang", "en"])
    assert missing.exit_code == 1 and "name the source language (source_lang)" in missing.output
    assert "Traceback" not in missing.output and len(missing.output.strip().splitlines()) == 1
    scored = runner.invoke(
        app,
        [
            "score",
            "--checkpoint",
            str(out),
            "--src",
            str(lines),
            "--tgt",
            str(lines),
            "--source-lang",
            "de",
            "--target-lang",
            tgt,
        ],
    )
    assert scored.exit_code == 0 and len(scored.stdout.splitlines()) == 3, scored.output


def test_a_server_of_an_imported_model_takes_each_requests_languages(imported):
    pytest.importorskip("fastapi")
    from libretranslatepy import LibreTranslateAPI

    from mt_cli.config import ServeConfig
    from mt_cli.serve.web_app import create_app
    from serving import Running, call

    _, out, src, tgt = imported
    tr = Translator.load(out, device="cpu", beam=2)
    running = Running(create_app(lambda: tr, "imported.pt", ServeConfig(max_wait_ms=5)))
    try:
        lines = script_lines(4, seed=14)
        to_en, to_fr = tr.for_languages(src, tgt), tr.for_languages("de", "fr")
        asked = {"text": lines, "source_lang": "de", "target_lang": "en"}
        status, _, body = call(running.url, "POST", "/translate", asked)
        assert status == 200 and body["translations"] == to_en.translate(lines)
        status, _, body = call(
            running.url, "POST", "/translate", {**asked, "source_lang": src, "target_lang": "fr"}
        )
        assert status == 200 and body["translations"] == to_fr.translate(lines)
        status, _, body = call(
            running.url, "POST", "/translate", {"text": lines[:1], "source_lang": "de"}
        )
        assert status == 422 and "name the target language" in body["error"]
        lt = LibreTranslateAPI(running.url)  # LibreTranslate's clients send ISO 639-1 codes
        assert lt.translate(lines[0], "de", "fr") == to_fr.translate_document(lines[0], "text")
        listed = {entry["code"] for entry in lt.languages()}
        assert {"de", "en", "fr"} <= listed and len(listed) == len(tr.tokenizer.codes)
        status, _, body = call(
            running.url, "POST", "/translate", {"q": "x", "source": "de", "target": "xx"}
        )
        assert status == 400 and "de -> xx is not supported" in body["error"]
    finally:
        running.stop()


def test_fine_tuning_an_imported_model_reads_its_language_tokens_and_its_scores_improve(
    imported, tmp_path
):
    from conftest import write_lines
    from mt_cli.config import build_config
    from mt_cli.data.language_tokens import Directed
    from mt_cli.train.inputs import DataSpec
    from mt_cli.train.loop import train

    _, out, src, tgt = imported
    start = checkpoint.load(out)
    tok = start.tokenizer
    files = {}
    for name, n, seed in (("train", 200, 15), ("valid", 30, 16)):
        files[name] = (
            write_lines(tmp_path / f"{name}.de", script_lines(n, seed)),
            write_lines(tmp_path / f"{name}.en", script_lines(n, seed + 1)),
        )
    # What training reads: the source language before each source, </s> then the target language
    # before each target (the decoder's input), as transformers' tokenizer with text_target gives
    # them.
    directed = Directed(tok, tok.language_tokens(src, tgt))
    assert (
        directed.encode_src(["x y"])[0]
        == Translator.load(out).for_languages(src, tgt).source_ids(["x y"])[0]
    )
    assert directed.encode_tgt(["x y"])[0] == [tok.codes[tgt], *tok.encode_tgt(["x y"])[0]]
    sets = [
        f"train.init={out}",
        "train.valid_every=40",
        "train.warmup_steps=5",
        "train.batch_tokens=600",
        "train.max_steps=40",
        "train.lr=3e-3",
        "decode.beam=1",
        "model.dropout=0",
    ]
    train(
        DataSpec.text_files(*files["train"], *files["valid"]),
        tmp_path / "run",
        build_config(sets=sets),
        log=lambda *_: None,
    )
    tuned = checkpoint.load(tmp_path / "run" / "last.pt")
    assert tuned.tokenizer.to_state() == tok.to_state() and tuned.config.model == start.config.model
    valid = [p.read_text(encoding="utf-8").splitlines() for p in files["valid"]]
    before, after = (
        Translator.from_checkpoint(c, "cpu").for_languages("de", "en").score(*valid)
        for c in (start, tuned)
    )
    # log-probabilities of the pairs rose
    assert sum(h.score for h in after) > sum(h.score for h in before)
    txt = [write_lines(tmp_path / f"x{i}.txt", script_lines(20, i)) for i in range(2)]
    with pytest.raises(MtError, match="name the data's with files named by language"):
        train(
            DataSpec.text_files(*txt, *txt),
            tmp_path / "r2",
            build_config(sets=sets),
            log=lambda *_: None,
        )


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")
# One decoder for both flavours; NLLB's also has rows past its tokenizer. A compile takes ~15 s,
# so NLLB's alone is compiled.
@pytest.mark.parametrize("imported", ["nllb"], indirect=True)
def test_the_compiled_step_translates_an_imported_model_as_the_eager_one(imported, tmp_path):
    from mt_cli.decode import compiled

    _, out, src, tgt = imported
    path = tmp_path / "model.pt"
    shutil.copy(out, path)
    compiled.compile_checkpoint(path, "fp32")
    lines = script_lines(16, seed=18)
    for beam in (1, 3):
        eager = Translator.load(path, device="cpu", beam=beam, engine="eager").for_languages(
            src, tgt
        )
        fast = Translator.load(path, device="cpu", beam=beam, engine="compiled").for_languages(
            src, tgt
        )
        assert fast.engine is not None and fast.engine.compiled is not None
        assert fast.translate(lines) == eager.translate(lines)


REAL = {  # one real sentence per language, for language identification
    "de": "Ein Mann fährt mit dem Fahrrad durch die ganze Stadt.",
    "fr": "Une femme lit un livre dans le jardin de sa maison.",
    "cs": "Muž jede na kole přes celé město a zpívá si.",
    "en": "A woman is reading a book in the garden of her house.",
    "ru": "Женщина читает книгу в саду своего дома.",
}


def test_source_auto_identifies_each_lines_language_and_reads_it(imported, tmp_path):
    pytest.importorskip("lingua")
    from typer.testing import CliRunner

    from conftest import write_lines
    from mt_cli.cli import app
    from mt_cli.data.languages import short_code

    _, out, src, tgt = imported
    tr = Translator.load(out, device="cpu", beam=2, precision="fp32")
    auto = tr.for_languages("auto", tgt)
    lines = [*REAL.values(), "", REAL["de"]]
    requests = auto.requests(lines)
    detected = [r.source_lang if r is not None else None for r in requests]
    assert [short_code(c) if c else c for c in detected] == [*REAL, None, "de"]
    for line, code, got in zip(lines, detected, auto.translate(lines)):
        if code:  # the same as naming the line's language
            assert got == tr.for_languages(code, tgt).translate([line])[0]
    scored = auto.score(lines[:2], ["x y", "z"])  # forced decoding reads each line's language too
    alone = [
        tr.for_languages(c, tgt).score([s], [t])[0].score
        for c, s, t in zip(detected[:2], lines[:2], ["x y", "z"])
    ]
    # batched: padding changes the last bits
    assert [h.score for h in scored] == pytest.approx(alone, abs=1e-4)
    given = write_lines(tmp_path / "in.txt", list(REAL.values()))
    jsonl = CliRunner().invoke(
        app,
        [
            "translate",
            "--checkpoint",
            str(out),
            str(given),
            "--source-lang",
            "auto",
            "--target-lang",
            tgt,
            "--format",
            "jsonl",
            "--beam",
            "2",
        ],
    )
    assert jsonl.exit_code == 0, jsonl.output
    assert [short_code(json.loads(x)["source_lang"]) for x in jsonl.stdout.splitlines()] == list(
        REAL
    )


def test_source_auto_on_a_model_that_records_no_source_language_is_one_line(tmp_path):
    from mt_cli.config import ModelConfig

    fixture = Path(__file__).resolve().parent / "fixtures" / "decode" / "model.pt"
    ckpt = checkpoint.load(fixture)
    assert ckpt.config.model.source_langs == ModelConfig().source_langs == ()
    with pytest.raises(
        MtError, match="source language auto: the model records no source languages"
    ):
        Translator.from_checkpoint(ckpt, "cpu").for_languages("auto", None)


def test_nllbs_legacy_layout_puts_the_source_language_after_eos_as_transformers_does(
    imported, tmp_path
):
    folder, _, src, tgt = imported
    if (folder / "vocab.json").is_file():
        pytest.skip("M2M100 has no legacy layout; NLLB's tokenizer has")
    legacy = tmp_path / "legacy"
    shutil.copytree(folder, legacy)
    tc = json.loads((legacy / "tokenizer_config.json").read_text())
    (legacy / "tokenizer_config.json").write_text(json.dumps({**tc, "legacy_behaviour": True}))
    hf_tok = transformers.AutoTokenizer.from_pretrained(legacy, src_lang=src, tgt_lang=tgt)
    tr = Translator.load(import_hf(legacy, tmp_path / "legacy.pt"), device="cpu").for_languages(
        src, tgt
    )
    lines = script_lines(200, seed=19)
    ids = to_mt(tr.tokenizer)
    theirs = [[ids[i] for i in row] for row in hf_tok(lines).input_ids]
    assert (
        tr.source_ids(lines) == theirs and theirs[0][-1] == ids[hf_tok.convert_tokens_to_ids(src)]
    )
