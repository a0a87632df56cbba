"""The settings of a training run: :class:`TrainConfig`.

Defaults follow Vaswani et al. (2017), section 5 (Adam with β = (0.9, 0.98),
ε = 1e-9, label smoothing 0.1), with a shorter warm-up for small batches;
the book's CPU configuration is in :mod:`minitransformer.training.presets`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .device import AMP_MODES
from .schedule import SCHEDULES

__all__ = ["TrainConfig"]


@dataclass
class TrainConfig:
    """Settings of :func:`fit` (defaults: the paper's optimiser, a small warm-up)."""

    lr: float = 1e-3  # peak learning rate (after warm-up)
    # "noam" (warm-up then 1/√step), "constant" (warm-up then flat) or "linear"
    # (warm-up then a straight line to 0 at the end of the budget; see schedule.py)
    schedule: str = "noam"
    warmup_steps: int = 1000  # the paper: 4000 (with 25,000-token batches)
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    # keep a moving average of the weights (minitransformer.training.averaging) with this
    # decay; validation, build_model (from a checkpoint) and the model after fit use it
    ema_decay: float | None = None
    clip_norm: float | None = 1.0  # max global gradient norm; None = no clipping
    epochs: int | None = 10  # stop after this many passes over the data (None = no limit)
    max_steps: int | None = None  # ... or this many optimiser steps in total
    max_minutes: float | None = None  # ... or this much wall time in this call
    eval_every: int | None = None  # validate every N steps; None = after each epoch
    seed: int | None = 0  # seeds torch/random at the start (dropout); None = leave as is
    device: str = "auto"  # "auto" (CUDA, then MPS, then CPU) or a torch device string
    # "bf16", "off", "auto" (bf16 on CUDA GPUs that support it) or "native" (bf16 on
    # such GPUs, and on CPUs with AVX512_BF16 or AMX where a bf16 product measures faster)
    amp: str = "auto"
    checkpoint_dir: str | None = None  # write last.pt (and best.pt) here at each evaluation
    resume: bool = False  # continue from checkpoint_dir/last.pt if it exists
    log_every: int = 10  # steps between progress-bar updates and history flushes
    pad_id: int | None = None  # None: model.config.pad_id

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"TrainConfig: schedule must be one of {SCHEDULES}, got {self.schedule!r}"
            )
        if self.amp not in AMP_MODES:
            raise ValueError(f"TrainConfig: amp must be one of {AMP_MODES}, got {self.amp!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                f"TrainConfig: label_smoothing must be in [0, 1), got {self.label_smoothing}"
            )
        if self.ema_decay is not None and not 0.0 < self.ema_decay < 1.0:
            raise ValueError(
                f"TrainConfig: ema_decay must be in (0, 1) or None, got {self.ema_decay}"
            )
        if self.epochs is None and self.max_steps is None and self.max_minutes is None:
            raise ValueError("TrainConfig: set at least one of epochs, max_steps, max_minutes")
        if self.resume and not self.checkpoint_dir:
            raise ValueError("TrainConfig: resume=True needs a checkpoint_dir")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"TrainConfig: lr must be a positive finite number, got {self.lr}")
        if self.max_minutes is not None and not (
            self.max_minutes > 0 and math.isfinite(self.max_minutes)
        ):
            raise ValueError(
                f"TrainConfig: max_minutes must be a positive finite number or None, "
                f"got {self.max_minutes}"
            )
        self.betas = tuple(self.betas)

    def to_dict(self) -> dict:
        """Plain dict; ``TrainConfig(**d)`` rebuilds it."""
        return asdict(self)

