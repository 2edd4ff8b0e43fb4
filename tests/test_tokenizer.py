import pytest

from mt_cli.config import TokenizerConfig
from mt_cli.data.tokenizer import EOS, Tokenizer, train_tokenizer
from mt_cli.errors import MtError
from mt_cli.scripts import is_mostly_cjk


def test_tokenizer_training_handles_mostly_chinese_text():
    zh = ["我们今天去公园。", "他喜欢看书。", "这是一个很好的例子。", "她在学校学习中文。"] * 20
    en = [
        "We go to the park today.",
        "He likes reading.",
        "This is a good example.",
        "She studies.",
    ] * 20
    assert is_mostly_cjk(zh) and not is_mostly_cjk(en)
    tok = train_tokenizer(zh, en, TokenizerConfig(vocab_size=120, joint=False))
    assert tok.decode_tgt(tok.encode_tgt(["We go to the park today."])) == [
        "We go to the park today."
    ]
    assert (
        "".join(tok.src.encode("我们今天去公园。", out_type=str)).replace("▁", "")
        == "我们今天去公园。"
    )


def test_source_ids_end_with_eos_and_targets_carry_no_specials(tokenizer):
    src = tokenizer.encode_src(["Ein hund."])[0]
    tgt = tokenizer.encode_tgt(["A dog."])[0]
    assert src[-1] == EOS and EOS not in tgt


def test_joint_and_separate_tokenizers_save_and_load(tmp_path, corpus):
    src, tgt = corpus
    for joint in (True, False):
        tok = train_tokenizer(src, tgt, TokenizerConfig(vocab_size=100, joint=joint))
        tok.save(tmp_path / str(joint))
        loaded = Tokenizer.load(tmp_path / str(joint))
        assert loaded.joint == joint
        assert loaded.encode_src(src[:3]) == tok.encode_src(src[:3])
        assert loaded.encode_tgt(tgt[:3]) == tok.encode_tgt(tgt[:3])


def test_a_missing_or_empty_tokenizer_folder_is_a_clear_error(tmp_path):
    with pytest.raises(MtError, match="tokenizer folder not found"):
        Tokenizer.load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MtError, match="holds neither joint.model"):
        Tokenizer.load(tmp_path / "empty")


def test_a_vocabulary_smaller_than_the_alphabet_is_a_clear_error_not_a_sentencepiece_traceback():
    # 280 distinct characters
    lines = ["".join(chr(0x4E00 + 7 * i + j) for j in range(7)) for i in range(40)]
    with pytest.raises(MtError, match=r"vocab_size 50 is too small: this text needs \d+ pieces"):
        train_tokenizer(
            lines, lines, TokenizerConfig(vocab_size=50, joint=True, character_coverage=1.0)
        )
