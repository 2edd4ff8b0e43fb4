"""Export: the same weights translate to the same strings in mt, Hugging Face transformers and
CTranslate2."""

from dataclasses import replace

import pytest
import torch

from conftest import make_pairs
from mt_cli.decode.translator import Translator
from mt_cli.errors import MtError
from mt_cli.interop import export
from mt_cli.interop.marian import check_exportable

# Sentences of the toy language the model has not been trained on.
LINES = make_pairs(24, seed=7)[0] + ["Ein hund.", "Der mann und die frau sehen ein rot haus."]


def _mt_greedy(ckpt) -> list[str]:
    out = Translator(
        ckpt.build_model(), ckpt.tokenizer, replace(ckpt.config.decode, beam=1)
    ).translate(LINES)
    assert len(set(out)) > len(LINES) // 2, "the model should translate, not repeat one string"
    return out


def test_hugging_face_greedy_translations_equal_mt_beam_1(trained, tmp_path):
    transformers = pytest.importorskip(
        "transformers", reason="needs the test extra: pip install -e '.[test]'"
    )
    ckpt, _ = trained
    hf_dir = export(ckpt, tmp_path / "hf", "hf")
    tok = transformers.MarianTokenizer.from_pretrained(hf_dir)
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    batch = tok(LINES, return_tensors="pt", padding=True)
    with torch.inference_mode():
        ids = model.generate(**batch, num_beams=1, do_sample=False)
    hf = [" ".join(s.split()) for s in tok.batch_decode(ids, skip_special_tokens=True)]
    assert hf == _mt_greedy(ckpt)
    # The Auto classes (what the pipeline and most user code call) take the folder as it is.
    auto_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    auto_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf_dir)
    assert (
        type(auto_tok).__name__ == "MarianTokenizer"
        and type(auto_model).__name__ == "MarianMTModel"
    )
    # transformers 5 removed the translation pipeline
    if int(transformers.__version__.split(".")[0]) < 5:
        pipe = transformers.pipeline("translation", model=str(hf_dir), device="cpu")
        assert [r["translation_text"] for r in pipe(LINES[:4], num_beams=1)] == hf[:4]


def test_ctranslate2_greedy_translations_equal_mt_beam_1(trained, tmp_path):
    ctranslate2 = pytest.importorskip(
        "ctranslate2", reason="needs the test extra: pip install -e '.[test]'"
    )
    pytest.importorskip(
        "transformers", reason="CTranslate2's converter reads the Hugging Face export"
    )
    ckpt, _ = trained
    ct2_dir = export(ckpt, tmp_path / "ct2", "ct2")
    translator = ctranslate2.Translator(str(ct2_dir), device="cpu")
    sp = ckpt.tokenizer.src
    results = translator.translate_batch(
        [sp.encode(line, out_type=str) + ["</s>"] for line in LINES], beam_size=1
    )
    ct2 = [" ".join(sp.decode_pieces(r.hypotheses[0]).split()) for r in results]
    assert ct2 == _mt_greedy(ckpt)


def test_a_pre_norm_model_is_not_exportable(trained):
    ckpt, _ = trained
    pre = replace(
        ckpt, config=replace(ckpt.config, model=replace(ckpt.config.model, pre_norm=True))
    )
    with pytest.raises(MtError, match="not exportable: model.pre_norm"):
        check_exportable(pre)


def test_a_format_1_model_that_starts_from_bos_is_not_exportable(trained):
    ckpt, _ = trained
    bos = replace(
        ckpt, config=replace(ckpt.config, model=replace(ckpt.config.model, decoder_start="bos"))
    )
    with pytest.raises(MtError, match="not exportable: this checkpoint"):
        check_exportable(bos)


def test_export_refuses_a_non_empty_folder_and_leaves_it_as_it_was(trained, tmp_path):
    ckpt, _ = trained
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(MtError, match="not empty"):
        export(ckpt, out, "hf")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".taken")]
