"""What a training run records, for plots and for resuming.

:func:`minitransformer.training.fit` fills a :class:`History`: one entry per
optimiser step (training loss, tokens, time) and one per
evaluation (validation cross-entropy). It converts to and from a plain dict,
so it travels inside checkpoints and JSON files.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch
from torch import Tensor

__all__ = ["History"]


@dataclass
class History:
    """Per-step and per-evaluation records of a training run.

    Attributes:
        step: optimiser step numbers (1, 2, ...).
        train_loss: training loss of each step (nats/token): the trainer's
            objective, label-smoothed when the run uses label smoothing.
        tokens: source + target tokens (non-pad) of each step, all processes.
        seconds: cumulative time spent in training steps (evaluation excluded).
        valid_step, valid_epoch, valid_loss: at each evaluation, the step,
            the (fractional) epoch and the validation cross-entropy (nats/token,
            no label smoothing).
        stop_reason: "epochs", "max_steps" or "max_minutes" once ``fit`` returns.
    """

    step: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    valid_step: list[int] = field(default_factory=list)
    valid_epoch: list[float] = field(default_factory=list)
    valid_loss: list[float] = field(default_factory=list)
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        self._pending: list[Tensor] = []  # losses not yet moved off the device

    def add_step(self, step: int, loss: Tensor | float, tokens: int, seconds: float) -> None:
        """Record one step; the loss may stay a tensor until :meth:`flush`
        (so a GPU need not synchronise every step)."""
        self.step.append(step)
        self.tokens.append(tokens)
        self.seconds.append(seconds)
        if isinstance(loss, Tensor):
            self._pending.append(loss)
        else:
            self.flush()
            self.train_loss.append(float(loss))

    def flush(self) -> None:
        """Move pending losses into :attr:`train_loss`."""
        if self._pending:
            self.train_loss.extend(torch.stack(self._pending).float().cpu().tolist())
            self._pending = []

    def add_valid(self, step: int, epoch: float, loss: float) -> None:
        """Record one evaluation."""
        self.valid_step.append(step)
        self.valid_epoch.append(epoch)
        self.valid_loss.append(loss)

    @property
    def tokens_per_second(self) -> float:
        """Mean training throughput of the run (source + target tokens per second)."""
        return sum(self.tokens) / self.seconds[-1] if self.seconds and self.seconds[-1] else 0.0

    def recent_tps(self, window: int = 50) -> float:
        """Throughput over the last ``window`` steps."""
        if len(self.seconds) < 2:
            return self.tokens_per_second
        k = min(window, len(self.seconds) - 1)
        dt = self.seconds[-1] - self.seconds[-1 - k]
        return sum(self.tokens[-k:]) / dt if dt > 0 else 0.0

    def to_dict(self) -> dict:
        """Plain dict (lists of numbers); :meth:`from_dict` rebuilds it."""
        self.flush()
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), list) else v
                for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})

    def smoothed_train_loss(self, window: int = 50) -> list[float]:
        """Moving average of :attr:`train_loss` over the last ``window`` steps."""
        self.flush()
        out, acc = [], 0.0
        for i, x in enumerate(self.train_loss):
            acc += x
            if i >= window:
                acc -= self.train_loss[i - window]
            out.append(acc / min(i + 1, window))
        return out

    def plot(self, ax=None, window: int = 50):
        """Training loss (moving average) and validation loss against the step.

        The training curve is the trainer's objective (label-smoothed if the
        run used smoothing; History does not record which), the validation
        curve plain cross-entropy."""
        import matplotlib.pyplot as plt

        self.flush()
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        if self.train_loss:
            ax.plot(self.step, self.train_loss, alpha=0.25, lw=0.8, color="C0")
            ax.plot(self.step, self.smoothed_train_loss(window), color="C0",
                    label=f"training loss ({window}-step mean)")
        if self.valid_loss:
            ax.plot(self.valid_step, self.valid_loss, "o-", color="C1",
                    label="validation (cross-entropy)")
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("loss (nats per target token)")
        if self.train_loss or self.valid_loss:
            ax.legend()
        return ax
