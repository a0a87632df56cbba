"""Run an experiment over several seeds and show the spread, not only a mean.

A comparison such as "four heads learn the task, one head does not" is a
claim only if it holds for more than the one seed a chapter happened to
use. :func:`run_seeds` calls a function once per seed and collects what it
returns; :meth:`SeedRuns.describe` prints the mean with the smallest and
largest value; :func:`plot_seeds` draws every seed's value as a dot beside
the mean, and :func:`plot_seed_curves` every seed's curve (e.g. validation
loss over steps). Quick mode may use fewer seeds; say how many the page
shows.

    from minitransformer.instruments.seeds import plot_seeds, run_seeds

    def experiment(heads, seed):
        torch.manual_seed(seed)
        model = build(heads)
        history = fit(model, train_batches, [valid_batch], config)
        return {"accuracy": accuracy(model, valid_batch),
                "step": history.valid_step, "valid_loss": history.valid_loss}

    runs = {f"{h} head(s)": run_seeds(lambda s, h=h: experiment(h, s), seeds=range(3))
            for h in (1, 4)}
    for name, r in runs.items():
        print(name, r.describe("accuracy"))  # 0.349 (0.331 to 0.360, 3 seeds)
    plot_seeds(runs, "accuracy")
    plot_seed_curves(runs, "step", "valid_loss")
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

__all__ = ["SeedRuns", "run_seeds", "plot_seeds", "plot_seed_curves"]


@dataclass
class SeedRuns:
    """The results of one experiment, one per seed (``results[i]`` is ``seeds[i]``'s)."""

    seeds: list[int]
    results: list[dict[str, Any]]

    def values(self, metric: str) -> list[float]:
        """``metric`` for every seed, in the order of :attr:`seeds`."""
        if not self.results or metric not in self.results[0]:
            known = sorted(self.results[0]) if self.results else []
            raise KeyError(f"SeedRuns: no metric {metric!r}; the runs returned {known}")
        return [_scalar(r[metric], metric) for r in self.results]

    def mean(self, metric: str) -> float:
        """Mean of ``metric`` over the seeds."""
        values = self.values(metric)
        return sum(values) / len(values)

    def min(self, metric: str) -> float:
        """Smallest value of ``metric`` over the seeds."""
        return min(self.values(metric))

    def max(self, metric: str) -> float:
        """Largest value of ``metric`` over the seeds."""
        return max(self.values(metric))

    def describe(self, metric: str, fmt: str = ".3f") -> str:
        """``"mean (min to max, n seeds)"``, e.g. ``"0.349 (0.331 to 0.360, 3 seeds)"``."""
        n = len(self.seeds)
        if n == 1:
            return f"{self.mean(metric):{fmt}} (1 seed)"
        return (f"{self.mean(metric):{fmt}} ({self.min(metric):{fmt}} to "
                f"{self.max(metric):{fmt}}, {n} seeds)")


def _scalar(value: Any, metric: str) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"SeedRuns: metric {metric!r} is {type(value).__name__}, not a number")


def run_seeds(
    experiment: Callable[[int], Mapping[str, Any] | float],
    seeds: Iterable[int] = (0, 1, 2),
    *,
    set_seed: bool = True,
) -> SeedRuns:
    """Call ``experiment(seed)`` for every seed and collect the results.

    Args:
        experiment: takes a seed, returns a number or a dict of named results
            (numbers, or sequences such as a loss curve). A bare number is
            stored as ``"value"``. Every seed must return the same names.
        seeds: the seeds, at least one (three is the book's minimum for a claim).
        set_seed: before each call, seed Python's ``random`` and PyTorch's
            generator with the seed (the experiment may still seed its own).

    Returns:
        A :class:`SeedRuns`.
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError("run_seeds: seeds is empty; give at least one seed, e.g. range(3)")
    results = []
    for seed in seeds:
        if set_seed:
            random.seed(seed)
            torch.manual_seed(seed)
        result = experiment(seed)
        result = dict(result) if isinstance(result, Mapping) else {"value": result}
        if results and result.keys() != results[0].keys():
            raise ValueError(
                f"run_seeds: seed {seed} returned {sorted(result)}, seed {seeds[0]} "
                f"returned {sorted(results[0])}; every seed must return the same names"
            )
        results.append(result)
    return SeedRuns(seeds, results)


def plot_seeds(
    runs: Mapping[str, SeedRuns],
    metric: str,
    ax: Axes | None = None,
    ylabel: str | None = None,
    title: str | None = None,
) -> Axes:
    """Every seed's ``metric`` as a dot, and the mean as a bar, for each experiment.

    Args:
        runs: experiment name (x-axis label) -> its :class:`SeedRuns`.
        metric: the scalar result to show.
        ax: axes to draw on; a new figure if None.
        ylabel: default ``metric``; give units where there are any.

    Returns: the axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 + 1.1 * len(runs), 3.2))
    for i, run in enumerate(runs.values()):
        values = run.values(metric)
        n = len(values)
        offsets = [0.0] if n == 1 else [-0.15 + 0.3 * j / (n - 1) for j in range(n)]
        color = f"C{i}"
        ax.scatter([i + o for o in offsets], values, color=color, zorder=3)
        ax.hlines(run.mean(metric), i - 0.25, i + 0.25, color=color, linewidth=2)
    ax.set_xticks(range(len(runs)), list(runs))
    ax.set_xlim(-0.6, len(runs) - 0.4)
    ax.set_ylabel(ylabel or metric)
    if title:
        ax.set_title(title)
    ax.legend(handles=[Line2D([], [], color="0.4", marker="o", linestyle="", label="one seed"),
                       Line2D([], [], color="0.4", linewidth=2, label="mean")])
    return ax


def plot_seed_curves(
    runs: Mapping[str, SeedRuns],
    x: str,
    y: str,
    ax: Axes | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    title: str | None = None,
) -> Axes:
    """One line per seed, one colour per experiment: the spread of whole curves.

    Args:
        runs: experiment name (legend) -> its :class:`SeedRuns`, whose results
            hold two equally long sequences under ``x`` and ``y`` (e.g. a
            :class:`~minitransformer.training.History`'s ``valid_step`` and
            ``valid_loss``).
        ax: axes to draw on; a new figure if None.
        xlabel, ylabel: default ``x`` and ``y``; give units where there are any.

    Returns: the axes.
    """
    if ax is None:
        _, ax = plt.subplots()
    for i, (name, run) in enumerate(runs.items()):
        for j, result in enumerate(run.results):
            xs, ys = list(result[x]), list(result[y])
            if len(xs) != len(ys):
                raise ValueError(
                    f"plot_seed_curves: {name!r}, seed {run.seeds[j]}: {len(xs)} {x} "
                    f"but {len(ys)} {y}"
                )
            n = len(run.seeds)
            label = f"{name} ({n} seed{'s' if n > 1 else ''})" if j == 0 else None
            ax.plot(xs, ys, color=f"C{i}", alpha=0.7, label=label)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    ax.legend()
    return ax

