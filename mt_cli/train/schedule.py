"""The learning-rate schedule, a pure function of the step and the fraction of the budget spent
(train/budget.py)."""

from __future__ import annotations

import math

from mt_cli.config import TrainConfig


def lr_at(
    step: int,
    peak: float,
    warmup: int,
    schedule: str = TrainConfig.lr_schedule,
    progress: float = 0.0,
    cooldown: float = TrainConfig.lr_cooldown,
) -> float:
    """The learning rate for update `step` (counted from 1): linear warmup to `peak`, then

    - "inverse_sqrt": decay with 1/sqrt(step), the paper's schedule scaled to its peak;
    - "cosine": a half cosine that reaches 0 when `progress`, the spent fraction of the budget, is
      1;
    - "wsd" (warmup-stable-decay): hold the peak, then fall linearly to 0 over the last `cooldown`
      fraction of the budget.
    """
    step = max(step, 1)
    warm = min(step / warmup, 1.0) if warmup else 1.0
    progress = min(max(progress, 0.0), 1.0)
    if schedule == "cosine":
        return peak * warm * 0.5 * (1.0 + math.cos(math.pi * progress))
    if schedule == "wsd":
        return peak * warm * min(1.0, (1.0 - progress) / cooldown)
    if warmup == 0:
        return peak
    return peak * min(warm, math.sqrt(warmup / step))
