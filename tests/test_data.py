import numpy as np
import pytest

from mt_cli.data.collate import collate
from mt_cli.data.pairs import MAX_BATCH_ROWS, Pairs, limit_length, make_batches
from mt_cli.data.sources import read_parallel
from mt_cli.data.text import read_lines
from mt_cli.data.tokenizer import BOS, EOS, PAD
from mt_cli.errors import MtError


def test_crlf_endings_and_a_bom_are_removed(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("\ufeffEins\r\nZwei\r\n".encode())
    assert read_lines(path) == ["Eins", "Zwei"]


def test_undecodable_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "latin1.de"
    path.write_bytes("gut\nschön\n".encode("latin-1"))
    with pytest.raises(MtError, match=r"latin1.de:2: not valid UTF-8"):
        read_lines(path)


def test_line_count_mismatch_names_both_counts(tmp_path):
    (tmp_path / "a").write_text("x\ny\nz\n")
    (tmp_path / "b").write_text("x\ny\n")
    with pytest.raises(MtError, match=r"a has 3 lines but .*b has 2"):
        read_parallel(tmp_path / "a", tmp_path / "b")


def test_pairs_with_an_empty_side_are_dropped_and_counted(tmp_path):
    (tmp_path / "a").write_text("one\n\nthree\n   \nfive\n")
    (tmp_path / "b").write_text("eins\nzwei\n\nvier\nfünf\n")
    corpus = read_parallel(tmp_path / "a", tmp_path / "b")
    assert corpus.src == ["one", "five"] and corpus.tgt == ["eins", "fünf"]
    assert corpus.dropped_empty == 3


def test_an_empty_corpus_and_a_missing_file_are_clear_errors(tmp_path):
    (tmp_path / "a").write_text("\n\n")
    (tmp_path / "b").write_text("\n\n")
    with pytest.raises(MtError, match="no sentence pairs"):
        read_parallel(tmp_path / "a", tmp_path / "b")
    with pytest.raises(MtError, match="missing.txt: file not found"):
        read_lines(tmp_path / "missing.txt")


def _pairs(n=50):
    return Pairs(
        [[5] * (1 + i % 9) + [EOS] for i in range(n)], [[6] * (1 + (i * 7) % 11) for i in range(n)]
    )


def test_batches_cover_every_pair_once_and_respect_the_token_budget():
    pairs = _pairs()
    batches = make_batches(pairs.src_lens, pairs.tgt_lens, batch_tokens=40, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(50))
    for b in batches:
        longest = max(max(len(pairs.src[i]), len(pairs.tgt[i]) + 1) for i in b)
        assert longest * len(b) <= 40 or len(b) == 1
    again = make_batches(pairs.src_lens, pairs.tgt_lens, 40, seed=3)
    assert [b.tolist() for b in again] == [b.tolist() for b in batches]
    other = make_batches(pairs.src_lens, pairs.tgt_lens, 40, seed=4)
    assert [b.tolist() for b in other] != [b.tolist() for b in batches]


def test_a_batch_of_short_pairs_never_holds_more_rows_than_fused_attention_kernels_take():
    # 150,000 two-token pairs fit a 1M-token budget in one batch but for the cap
    lens = np.full(150_000, 2)
    batches = make_batches(lens, lens - 1, batch_tokens=1 << 20, seed=0)
    assert max(len(b) for b in batches) == MAX_BATCH_ROWS
    assert sum(len(b) for b in batches) == 150_000


def test_over_long_pairs_are_dropped_and_counted():
    kept, long = limit_length([[1] * 3, [1] * 10, [1] * 2], [[2] * 2, [2] * 2, [2] * 9], max_len=5)
    assert kept.src == [[1] * 3] and kept.tgt == [[2] * 2] and long == 2


def test_over_long_pairs_can_be_truncated_to_fit_keeping_the_source_eos_and_are_counted():
    src = [[1, 1, EOS], [1, 2, 3, 4, 5, 6, 7, 8, EOS], [1, EOS]]
    tgt = [[2, 2], [2, 2], [4, 5, 6, 7, 8, 9]]
    cut, long = limit_length(src, tgt, max_len=5, mode="truncate")
    assert cut.src == [[1, 1, EOS], [1, 2, 3, 4, EOS], [1, EOS]]
    assert cut.tgt == [[2, 2], [2, 2], [4, 5, 6, 7]]  # + EOS in training = 5
    assert long == 2
    assert max(map(len, cut.src)) <= 5 and max(len(t) + 1 for t in cut.tgt) <= 5


def test_collate_shifts_the_target_for_teacher_forcing():
    pairs = Pairs([[7, 8, EOS], [9, EOS]], [[10, 11], [12]])
    src, tgt_in, tgt_out = collate(*pairs.take([0, 1]), start=PAD)
    assert src.tolist() == [[7, 8, EOS], [9, EOS, PAD]]
    assert tgt_in.tolist() == [[PAD, 10, 11], [PAD, 12, PAD]]
    assert collate(*pairs.take([0]), start=BOS)[1].tolist() == [[BOS, 10, 11]]
    assert tgt_out.tolist() == [[10, 11, EOS], [12, EOS, PAD]]
