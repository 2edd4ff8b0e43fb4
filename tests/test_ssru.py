"""The SSRU (model/ssru.py): the recurrence as the paper and Marian write it, and the whole-target
forward equal to stepping one position at a time, as decoding will."""

import torch

from mt_cli.model.ssru import SSRU


def test_the_ssru_computes_the_gated_recurrence_of_its_definition():
    layer = SSRU(1)
    with torch.no_grad():
        layer.input_proj.weight.fill_(2.0)  # x W = 2x
        layer.forget_proj.weight.fill_(0.0)
        layer.forget_proj.bias.fill_(0.0)  # f = sigmoid(0) = 0.5
    x = torch.tensor([[[1.0], [3.0], [-10.0]]])  # (B=1, T=3, D=1)
    # c1 = 0.5*0 + 0.5*2 = 1; c2 = 0.5*1 + 0.5*6 = 3.5; c3 = 0.5*3.5 + 0.5*(-20) = -8.25 -> ReLU 0
    assert layer(x).flatten().tolist() == [1.0, 3.5, 0.0]


def test_the_whole_target_at_once_equals_one_position_at_a_time():
    torch.manual_seed(0)
    layer = SSRU(8)
    x = torch.randn(3, 5, 8)
    cell = torch.zeros(3, 8)
    steps = []
    for t in range(5):
        h, cell = layer.step(x[:, t], cell)
        steps.append(h)
    torch.testing.assert_close(layer(x), torch.stack(steps, dim=1))
