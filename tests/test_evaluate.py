import pytest

from conftest import write_lines
from mt_cli.errors import MtError
from mt_cli.metrics import bleu_tokenizer, format_report, score
from mt_cli.tools.evaluate import score_files


def test_a_file_scored_against_itself_gives_bleu_100(tmp_path, corpus):
    path = write_lines(tmp_path / "ref.en", corpus[1][:50])
    result = score_files(path, [path])
    assert result["bleu"] == 100.0 and result["chrf"] == 100.0
    assert "tok:13a" in result["signature"]["bleu"]
    assert "BLEU = 100.00" in format_report(result)


def test_a_worse_hypothesis_scores_lower_and_ter_is_available():
    refs = [["The dog runs fast .", "A man sees a red house ."]]
    good = score(["The dog runs fast .", "A man sees a red house ."], refs, ("bleu", "chrf", "ter"))
    bad = score(["The cat sleeps .", "A woman sees a house ."], refs, ("bleu", "chrf", "ter"))
    assert bad["bleu"] < good["bleu"] and bad["chrf"] < good["chrf"] and bad["ter"] > good["ter"]


def test_mismatched_line_counts_name_both_counts(tmp_path):
    hyp = write_lines(tmp_path / "hyp", ["a", "b"])
    ref = write_lines(tmp_path / "ref", ["a", "b", "c"])
    with pytest.raises(MtError, match=r"hyp has 2 lines but .*ref has 3"):
        score_files(hyp, [ref])


def test_chinese_references_use_sacrebleus_zh_tokenizer():
    assert bleu_tokenizer(["我们今天去公园。", "他喜欢看书。"]) == "zh"
    assert bleu_tokenizer(["We go to the park today."]) == "13a"
    result = score(["我们今天去公园。"], [["我们今天去公园。"]], ("bleu",))
    assert "tok:zh" in result["signature"]["bleu"]
