"""Running an experiment over seeds and showing the spread (minitransformer.instruments.seeds)."""

from __future__ import annotations

import random
import statistics

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from minitransformer.instruments.seeds import (  # noqa: E402
    SeedRuns,
    plot_seed_curves,
    plot_seeds,
    run_seeds,
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_run_seeds_calls_once_per_seed_and_seeds_the_generators():
    seen = []

    def experiment(seed):
        seen.append(seed)
        return {"torch": torch.rand(()).item(), "python": random.random(), "seed": seed}

    runs = run_seeds(experiment, seeds=[3, 7, 11])
    assert seen == [3, 7, 11] and runs.seeds == [3, 7, 11]
    for seed, result in zip(runs.seeds, runs.results, strict=True):
        torch.manual_seed(seed)
        random.seed(seed)
        assert result == {"torch": torch.rand(()).item(), "python": random.random(), "seed": seed}
    # without set_seed the generators are left alone: two seeds draw different numbers
    torch.manual_seed(0)
    unseeded = run_seeds(lambda s: torch.rand(()).item(), seeds=[1, 1], set_seed=False)
    assert unseeded.values("value")[0] != unseeded.values("value")[1]


def test_summaries_match_statistics():
    values = [0.2, 0.9, 0.4, 0.5]
    runs = run_seeds(lambda s: {"acc": values[s], "t": torch.tensor(values[s])}, seeds=range(4))
    assert runs.values("acc") == values
    assert runs.mean("acc") == pytest.approx(statistics.mean(values))
    assert runs.min("acc") == 0.2 and runs.max("acc") == 0.9
    assert runs.values("t") == pytest.approx(values)  # one-element tensors become floats
    assert runs.describe("acc") == "0.500 (0.200 to 0.900, 4 seeds)"
    assert runs.describe("acc", ".0%") == "50% (20% to 90%, 4 seeds)"
    assert run_seeds(lambda s: 2.0, seeds=[5]).describe("value", ".1f") == "2.0 (1 seed)"


def test_errors_say_what_was_wrong():
    with pytest.raises(ValueError, match="seeds is empty"):
        run_seeds(lambda s: 1.0, seeds=[])
    with pytest.raises(ValueError, match="same names"):
        run_seeds(lambda s: {"a": 1.0} if s == 0 else {"b": 1.0}, seeds=[0, 1])
    runs = run_seeds(lambda s: {"acc": 1.0, "curve": [1.0, 2.0]}, seeds=[0, 1])
    with pytest.raises(KeyError, match="no metric 'loss'"):
        runs.values("loss")
    with pytest.raises(TypeError, match="'curve' is list, not a number"):
        runs.mean("curve")


def test_plot_seeds_shows_every_seed_and_the_mean():
    runs = {"one head": SeedRuns([0, 1, 2], [{"acc": 0.3}, {"acc": 0.35}, {"acc": 0.9}]),
            "four heads": SeedRuns([0, 1, 2], [{"acc": 1.0}, {"acc": 0.99}, {"acc": 0.98}])}
    ax = plot_seeds(runs, "acc", ylabel="validation accuracy")
    dots = [sorted(c.get_offsets()[:, 1].tolist()) for c in ax.collections
            if c.get_offsets().shape[0] == 3]
    assert dots == [[0.3, 0.35, 0.9], [0.98, 0.99, 1.0]]
    means = [seg[0][1] for c in ax.collections if hasattr(c, "get_segments")
             for seg in c.get_segments()]
    assert means == pytest.approx([(0.3 + 0.35 + 0.9) / 3, (1.0 + 0.99 + 0.98) / 3])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["one head", "four heads"]
    assert ax.get_ylabel() == "validation accuracy"


def test_plot_seed_curves_draws_one_line_per_seed():
    runs = {name: run_seeds(lambda s, k=k: {"step": [0, 10, 20], "loss": [k + s, k, k - s]},
                            seeds=range(3))
            for k, name in ((5, "a"), (9, "b"))}
    ax = plot_seed_curves(runs, "step", "loss", ylabel="loss (nats/token)")
    lines = ax.get_lines()
    assert len(lines) == 6
    assert [list(line.get_ydata()) for line in lines[:3]] == [[5, 5, 5], [6, 5, 4], [7, 5, 3]]
    assert lines[0].get_color() == lines[2].get_color() != lines[3].get_color()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a (3 seeds)", "b (3 seeds)"]
    bad = {"x": SeedRuns([0], [{"step": [0, 1], "loss": [1.0]}])}
    with pytest.raises(ValueError, match="2 step but 1 loss"):
        plot_seed_curves(bad, "step", "loss")
