"""The learning-rate schedule, as pure functions of the step and the spent budget."""

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
    - "cosine": a half cosine that reaches 0 when `progress`, the spent fraction of the budget, is 1;
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


def budget_progress(step: int, elapsed_s: float, epochs: float, cfg: TrainConfig) -> float:
    """The spent fraction of the run's budget: the largest over the limits that are set (0 if none).

    `epochs` counts fractionally (2.5 = halfway through the third epoch).
    """
    fractions = [0.0]
    if cfg.max_steps > 0:
        fractions.append(step / cfg.max_steps)
    if cfg.max_minutes > 0:
        fractions.append(elapsed_s / (cfg.max_minutes * 60))
    if cfg.max_epochs > 0:
        fractions.append(epochs / cfg.max_epochs)
    return max(fractions)
