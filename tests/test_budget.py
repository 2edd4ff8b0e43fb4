"""The run's budget (train/budget.py): one fraction spent, for the schedule, the bar and the stop
rule."""

from __future__ import annotations

from mt_cli.config import TrainConfig
from mt_cli.train.budget import Budget


def test_the_fraction_spent_is_the_most_spent_of_the_limits_that_are_set():
    # The same values schedule.budget_progress gave (tests/test_train.py before the budget had its
    # module).
    assert Budget.of(TrainConfig()).spent(500, 60.0, 1.0) == 0.0
    assert Budget.of(TrainConfig(max_steps=1000)).spent(500, 60.0, 1.0) == 0.5
    assert Budget.of(TrainConfig(max_steps=1000, max_minutes=4)).spent(500, 60.0, 1.0) == 0.5
    assert Budget.of(TrainConfig(max_steps=1000, max_minutes=4)).spent(500, 180.0, 1.0) == 0.75
    assert Budget.of(TrainConfig(max_steps=1000, max_epochs=5)).spent(500, 60.0, 2.5) == 0.5


def test_epochs_count_fractionally_so_the_fraction_grows_within_an_epoch():
    budget = Budget(max_epochs=2)
    assert [budget.spent(0, 0.0, e) for e in (0.0, 0.25, 1.0, 1.5, 2.0)] == [
        0.0,
        0.125,
        0.5,
        0.75,
        1.0,
    ]


def test_the_stop_rule_is_the_fraction_reaching_one_exactly_at_each_limit():
    steps = Budget(max_steps=7)
    assert not steps.exhausted(6, 1e9, 1e9) and steps.exhausted(7, 0.0, 0.0)
    minutes = Budget(max_minutes=0.1)  # 6 s, which 0.1 * 60 gives as 6.000000000000001
    limit = 0.1 * 60
    below = limit - 1e-15
    assert below < limit and not minutes.exhausted(10**9, below, 10**9)
    assert minutes.exhausted(0, limit, 0.0)
    epochs = Budget(max_epochs=3)
    assert not epochs.exhausted(0, 0.0, 2 + 999_999 / 1_000_000) and epochs.exhausted(0, 0.0, 3.0)
    for step in range(1, 2000):  # a quotient of two counts is 1 only when they are equal
        assert Budget(max_steps=step).exhausted(step - 1, 0.0, 0.0) is False


def test_no_limit_never_stops_and_the_fraction_may_pass_one():
    assert not TrainConfig().budgeted and not Budget().exhausted(10**9, 1e9, 1e9)
    assert TrainConfig(max_minutes=1).budgeted and Budget(max_minutes=1).spent(0, 90.0, 0.0) == 1.5


def test_a_budget_is_read_from_the_train_config():
    t = TrainConfig(max_steps=10, max_minutes=2.5, max_epochs=3)
    assert Budget.of(t) == Budget(10, 2.5, 3)
