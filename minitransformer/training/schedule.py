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

``"linear"`` is *budget-aware*: it warms up the same way and then falls in a
straight line to zero at the end of the training budget, so it needs to know
how much of the budget is spent (``progress``, from 0 to 1). Short runs gain
most from it: the noam schedule is still far from zero when a 10-minute
budget runs out, and the last steps, taken at a large learning rate, leave
the weights noisy (Li, Yumer and Ramanan 2020, "Budgeted training"). When
the budget is a number of steps, ``progress = step / max_steps`` and runs are
exactly reproducible; when it is wall time, progress is measured by the
clock, so two runs of the same seed may differ in their last digits.
"""

from __future__ import annotations

import math

__all__ = ["SCHEDULES", "learning_rate", "paper_noam_lr"]

#: Names accepted by :func:`learning_rate` (and ``TrainConfig.schedule``).
SCHEDULES = ("noam", "constant", "linear")


def learning_rate(
    step: int,
    lr: float,
    schedule: str = "noam",
    warmup_steps: int = 0,
    progress: float | None = None,
) -> float:
    """Learning rate for optimiser step ``step`` (counted from 1).

    Args:
        step: the step about to be taken, 1 for the first.
        lr: the peak learning rate (reached at ``step == warmup_steps``).
        schedule: ``"noam"`` (linear warm-up, then ∝ 1/√step),
            ``"constant"`` (linear warm-up, then flat) or ``"linear"``
            (linear warm-up, then a straight line to 0 at ``progress == 1``).
        warmup_steps: length of the linear warm-up; 0 for none.
        progress: the fraction of the training budget already spent, in
            [0, 1]; needed by ``"linear"`` only.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"learning_rate: schedule must be one of {SCHEDULES}, got {schedule!r}")
    if step < 1:
        raise ValueError(f"learning_rate: step counts from 1, got {step}")
    if warmup_steps < 0:
        raise ValueError(f"learning_rate: warmup_steps must be >= 0, got {warmup_steps}")
    if schedule == "linear":
        if progress is None or not 0.0 <= progress <= 1.0 or math.isnan(progress):
            raise ValueError(
                "learning_rate: the 'linear' schedule needs progress, the fraction of the "
                f"budget spent, in [0, 1]; got {progress!r}"
            )
        warm = step / warmup_steps if warmup_steps and step < warmup_steps else 1.0
        return lr * min(warm, 1.0 - progress)
    if warmup_steps and step < warmup_steps:
        return lr * step / warmup_steps
    if schedule == "constant" or warmup_steps == 0:
        return lr if schedule == "constant" else lr / math.sqrt(step)
    return lr * math.sqrt(warmup_steps / step)


def paper_noam_lr(step: int, d_model: int, warmup_steps: int = 4000, factor: float = 1.0) -> float:
    """The paper's formula, ``factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)``."""
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
