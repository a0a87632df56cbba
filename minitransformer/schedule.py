"""Learning-rate schedules for training the Transformer.

Vaswani et al. (2017), section 5.3, train with Adam (β₁ = 0.9, β₂ = 0.98,
ε = 1e-9) and the "warm-up" (often called *Noam*) schedule

    lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

which rises linearly for ``warmup_steps`` steps and then decays with the
inverse square root of the step. Its peak, at ``step = warmup_steps``, is
``(d_model · warmup_steps)^-0.5``. This module writes it with the peak as the
knob, ``lr · min(step / warmup, √(warmup / step))``, so that the same number
means the same thing for every model width: :func:`paper_noam_lr` gives the
paper's form, and the two agree when ``lr = (d_model · warmup)^-0.5``.

The simpler option, ``"constant"``, warms up linearly the same way and then
stays at ``lr``.
"""

from __future__ import annotations

import math

__all__ = ["SCHEDULES", "learning_rate", "paper_noam_lr"]

#: Names accepted by :func:`learning_rate` (and ``TrainConfig.schedule``).
SCHEDULES = ("noam", "constant")


def learning_rate(step: int, lr: float, schedule: str = "noam", warmup_steps: int = 0) -> float:
    """Learning rate for optimiser step ``step`` (counted from 1).

    Args:
        step: the step about to be taken, 1 for the first.
        lr: the peak learning rate (reached at ``step == warmup_steps``).
        schedule: ``"noam"`` (linear warm-up, then ∝ 1/√step) or
            ``"constant"`` (linear warm-up, then flat).
        warmup_steps: length of the linear warm-up; 0 for none.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"learning_rate: schedule must be one of {SCHEDULES}, got {schedule!r}")
    if step < 1:
        raise ValueError(f"learning_rate: step counts from 1, got {step}")
    if warmup_steps < 0:
        raise ValueError(f"learning_rate: warmup_steps must be >= 0, got {warmup_steps}")
    if warmup_steps and step < warmup_steps:
        return lr * step / warmup_steps
    if schedule == "constant" or warmup_steps == 0:
        return lr if schedule == "constant" else lr / math.sqrt(step)
    return lr * math.sqrt(warmup_steps / step)


def paper_noam_lr(step: int, d_model: int, warmup_steps: int = 4000, factor: float = 1.0) -> float:
    """The paper's formula, ``factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)``."""
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
