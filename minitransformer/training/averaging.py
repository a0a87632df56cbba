"""An exponential moving average (EMA) of a model's weights during training.

After every optimiser step the average moves towards the current weights,

    θ̄ ← d·θ̄ + (1 − d)·θ,   d = decay·(1 − decayⁿ) / (1 − decayⁿ⁺¹),

where ``n`` counts the updates so far. The factor in ``d`` is the bias
correction Adam uses for its moments: after ``n`` updates θ̄ is exactly the
weighted mean of the weights after steps 1..n, step ``i`` weighted by
``decay^(n−i)``, and the random initialisation counts for nothing (the
first update copies the weights). With ``decay`` 0.99 the average spans
roughly the last hundred steps.

Why: while the learning rate is still large, the weights jitter around the
valley the optimiser is descending; their average sits nearer its floor.
It costs one extra copy of the weights; what it gained on the book's
ten-minute CPU runs is measured in ``benchmarks/README.md``.
PyTorch's ``torch.optim.swa_utils.AveragedModel`` does the same job for a
wrapped copy of the whole module; this class keeps only the parameters and
copies or swaps them into the model itself, so decoding needs nothing new.
A checkpoint stores the average's :meth:`~ExponentialMovingAverage.state_dict`
beside the model's own (:mod:`minitransformer.training.checkpoint`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

__all__ = ["ExponentialMovingAverage"]


class ExponentialMovingAverage:
    """The moving average of ``model``'s floating-point parameters.

    Args:
        model: the model being trained (unwrapped from DDP if needed); the
            average starts at its current weights.
        decay: ``d`` in (0, 1), the weight of the old average at each update.

    Buffers (e.g. sinusoidal position tables) are not averaged.
    """

    def __init__(self, model: nn.Module, decay: float):
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 < decay < 1:
            raise ValueError(f"ExponentialMovingAverage: decay must be in (0, 1), got {decay!r}")
        self.decay = float(decay)
        self.num_updates = 0
        self.averaged: dict[str, Tensor] = {
            n: p.detach().clone() for n, p in _float_params(model)
        }

    def current_decay(self) -> float:
        """The ``d`` of the next update: 0 for the first, then rising to ``decay``."""
        n, d = self.num_updates, self.decay
        return d * (1 - d**n) / (1 - d ** (n + 1))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the average towards ``model``'s current parameters (call after
        each optimiser step)."""
        weight = 1.0 - self.current_decay()
        params = dict(_float_params(model))
        if list(params) != list(self.averaged):
            raise ValueError(
                "ExponentialMovingAverage.update: the model's parameters are not those "
                f"the average was made for ({len(params)} against {len(self.averaged)} tensors)"
            )
        for name, avg in self.averaged.items():
            avg.lerp_(params[name].detach(), weight)
        self.num_updates += 1

    @contextmanager
    def swapped_in(self, model: nn.Module) -> Iterator[dict[str, Tensor]]:
        """Inside the block ``model`` holds the averaged weights; its own come
        back afterwards (also after an exception). Yields copies of the
        model's own parameters ``{name: tensor}`` (e.g. to store them too)."""
        params = dict(_float_params(model))
        saved = {n: p.detach().clone() for n, p in params.items()}
        try:
            self.copy_to(model)
            yield saved
        finally:
            with torch.no_grad():
                for name, p in params.items():
                    p.copy_(saved[name])

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        """Overwrite ``model``'s parameters with the average."""
        params = dict(_float_params(model))
        for name, avg in self.averaged.items():
            params[name].copy_(avg)

    def state_dict(self) -> dict:
        """``{"decay", "num_updates", "averaged"}``: plain values and tensors."""
        return {
            "decay": self.decay,
            "num_updates": self.num_updates,
            "averaged": {n: t.clone() for n, t in self.averaged.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned (same parameter names,
        each tensor of its parameter's shape: nothing is broadcast)."""
        if set(state["averaged"]) != set(self.averaged):
            raise ValueError(
                "ExponentialMovingAverage.load_state_dict: the stored average is of "
                "different parameters"
            )
        for name, t in state["averaged"].items():
            mine = self.averaged[name]
            if not isinstance(t, Tensor) or t.shape != mine.shape or not t.is_floating_point():
                found = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
                raise ValueError(
                    f"ExponentialMovingAverage.load_state_dict: the average of {name!r} is "
                    f"{found}, expected a floating-point tensor of shape {tuple(mine.shape)}"
                )
        self.decay = float(state["decay"])
        self.num_updates = int(state["num_updates"])
        with torch.no_grad():
            for name, t in state["averaged"].items():
                self.averaged[name].copy_(t)


def _float_params(model: nn.Module) -> Iterator[tuple[str, Tensor]]:
    model = getattr(model, "module", model)  # DistributedDataParallel
    for name, p in model.named_parameters():
        if p.is_floating_point():
            yield name, p
