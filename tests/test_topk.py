"""The block-wise top k (decode/topk.py) returns what torch.topk does, on rows long enough to take
it."""

import torch

from mt_cli.decode.topk import BLOCK, topk


def test_topk_equals_torch_topk_on_random_rows_with_a_partial_last_block():
    torch.manual_seed(0)
    x = torch.randn(6, 40 * BLOCK + 37)
    for k in (1, 2, 5):
        values, cols = topk(x, k)
        expected = x.topk(k, dim=-1)
        assert torch.equal(values, expected.values)
        assert torch.equal(cols, expected.indices)


def test_topk_finds_the_best_entries_when_they_share_one_block_or_sit_after_the_last():
    x = torch.randn(2, 20 * BLOCK + 5) - 10.0
    x[0, 3 * BLOCK + 1 : 3 * BLOCK + 4] = torch.tensor([3.0, 5.0, 4.0])  # all three in one block
    x[1, -3:] = torch.tensor([7.0, 9.0, 8.0])  # all three after the last whole block
    values, cols = topk(x, 3)
    assert values.tolist() == [[5.0, 4.0, 3.0], [9.0, 8.0, 7.0]]
    assert cols[0].tolist() == [3 * BLOCK + 2, 3 * BLOCK + 3, 3 * BLOCK + 1]
    assert cols[1].tolist() == [x.size(1) - 2, x.size(1) - 1, x.size(1) - 3]


def test_topk_keeps_the_one_finite_entry_of_a_row_ended_at_its_limit():
    x = torch.full((1, 16 * BLOCK), float("-inf"))
    x[0, 2] = -1.5  # EOS, the only choice left
    values, cols = topk(x, 1)
    assert values.tolist() == [[-1.5]] and cols.tolist() == [[2]]


def test_topk_of_short_rows_is_torch_topk():
    x = torch.randn(3, 2 * BLOCK)
    assert torch.equal(topk(x, 4)[1], x.topk(4, dim=-1).indices)
