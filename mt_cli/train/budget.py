"""A run's budget: the limits it trains within (updates, minutes, passes over the data) and the
one fraction of it used so far, which the learning-rate schedule decays over, the progress bar
shows and the stop rule ends the run at (1: a limit is reached)."""

from __future__ import annotations

from dataclasses import dataclass

from mt_cli.config import TrainConfig


@dataclass(frozen=True)
class Budget:
    """0 in a field: no limit of that kind; no limits at all (not `TrainConfig.budgeted`): the run
    ends by patience or a signal."""

    max_steps: int = 0
    max_minutes: float = 0.0
    max_epochs: int = 0

    @classmethod
    def of(cls, t: TrainConfig) -> Budget:
        return cls(t.max_steps, t.max_minutes, t.max_epochs)

    def spent(self, step: int, elapsed_s: float, epochs: float) -> float:
        """The fraction used after `step` updates, `elapsed_s` seconds and `epochs` passes (counted
        fractionally: 2.5 is halfway through the third): the largest over the limits that are set,
        0 with none. It reaches 1 exactly when a limit is reached (each part is a quotient of
        numbers that reach the limit itself), and may pass it (minutes run on within a step)."""
        fractions = [0.0]
        if self.max_steps > 0:
            fractions.append(step / self.max_steps)
        if self.max_minutes > 0:
            fractions.append(elapsed_s / (self.max_minutes * 60))
        if self.max_epochs > 0:
            fractions.append(epochs / self.max_epochs)
        return max(fractions)

    def exhausted(self, step: int, elapsed_s: float, epochs: float) -> bool:
        return used_up(self.spent(step, elapsed_s, epochs))


def used_up(spent: float) -> bool:
    """The stop rule, on a fraction `Budget.spent` gave: some limit is reached."""
    return spent >= 1.0
