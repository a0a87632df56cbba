"""The book's figure style and plot_attention (minitransformer/plotting.py)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from minitransformer.instruments.plotting import (  # noqa: E402
    HEATMAP_CMAP,
    STYLE_FILE,
    plot_attention,
    sharp_inline_figures,
    use_book_style,
)

# Okabe & Ito (2008), "Color Universal Design": distinguishable with the
# common colour-vision deficiencies.
OKABE_ITO = {"#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#f0e442",
             "#000000"}
# Perceptually uniform colormaps designed to stay readable for colour-blind readers.
CB_SAFE_CMAPS = {"viridis", "cividis", "magma", "inferno", "plasma"}
#: The book's text column at a 1280 px window (measured in Chromium: 752 px).
BOOK_COLUMN_PX = 752


@pytest.fixture(autouse=True)
def _clean_style():
    with plt.rc_context():
        plt.rcdefaults()
        yield
    plt.close("all")


def test_style_file_ships_with_the_package():
    assert STYLE_FILE.is_file() and STYLE_FILE.suffix == ".mplstyle"


def test_use_book_style_sets_colour_blind_safe_colours_and_cmap():
    use_book_style()
    cycle = [to_hex(c["color"]) for c in plt.rcParams["axes.prop_cycle"]]
    assert set(cycle) == OKABE_ITO
    assert plt.rcParams["image.cmap"] in CB_SAFE_CMAPS
    assert HEATMAP_CMAP in CB_SAFE_CMAPS


def test_default_figure_fits_the_book_column():
    use_book_style()
    width_in, _ = plt.rcParams["figure.figsize"]
    px = width_in * plt.rcParams["savefig.dpi"]
    assert 0.8 * BOOK_COLUMN_PX <= px <= BOOK_COLUMN_PX, px
    assert plt.rcParams["font.size"] >= 9
    assert to_hex(plt.rcParams["savefig.facecolor"]) == "#ffffff"


def test_plot_attention_draws_the_weights_with_labels():
    use_book_style()
    w = torch.softmax(torch.randn(3, 5), dim=-1)
    ax = plot_attention(w, keys=list("abcde"), queries=list("xyz"), title="t")
    image = ax.get_images()[0]
    np.testing.assert_allclose(image.get_array(), w.numpy(), rtol=0, atol=1e-7)
    assert image.get_cmap().name == HEATMAP_CMAP
    assert image.get_clim() == (0.0, 1.0)  # the same scale in every figure
    assert ax.get_xlabel() and ax.get_ylabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcde")
    assert [t.get_text() for t in ax.get_yticklabels()] == list("xyz")
    colorbars = [a for a in ax.figure.axes if a is not ax]
    assert len(colorbars) == 1 and colorbars[0].get_ylabel() == "attention weight"


def test_plot_attention_accepts_arrays_and_caps_the_width():
    ax = plot_attention(np.full((100, 100), 0.01), colorbar=False)
    assert ax.figure.get_size_inches()[0] <= 6.8
    assert len(ax.figure.axes) == 1


def test_plot_attention_rejects_bad_shapes_and_labels():
    with pytest.raises(ValueError, match=r"expected \(Lq, Lk\)"):
        plot_attention(torch.rand(2, 3, 4))
    with pytest.raises(ValueError, match="2 keys labels for 4 columns"):
        plot_attention(torch.rand(3, 4), keys=["a", "b"])
    with pytest.raises(ValueError, match="1 queries labels for 3 rows"):
        plot_attention(torch.rand(3, 4), queries=["a"])


@pytest.mark.parametrize("shape", [(1, 6), (4, 6), (3, 1), (24, 24), (7, 130)])
def test_plot_attention_without_labels_ticks_integer_positions(shape):
    # Regression: matplotlib's own ticks on a small heatmap fall on cell
    # edges and fractions (-0.5, 0.0, 0.5), which name no position.
    ax = plot_attention(np.full(shape, 0.5), colorbar=False)
    ax.figure.canvas.draw()
    for ticks, n in ((ax.get_xticks(), shape[1]), (ax.get_yticks(), shape[0])):
        assert len(ticks) >= 1 and ticks[0] == 0
        assert all(float(t).is_integer() and 0 <= t < n for t in ticks), ticks
        assert len(ticks) == n or len(ticks) <= 12  # every position, or a readable subset
        steps = set(np.diff(ticks).tolist())
        assert len(steps) <= 1 and steps <= {1, 2, 5, 10, 20, 50}  # evenly spaced
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [str(int(t)) for t in ax.get_xticks()]  # drawn as 0, 1, 2, not 0.0


def test_position_ticks_cover_every_position_or_an_even_subset():
    from minitransformer.instruments.plotting import position_ticks

    assert position_ticks(0) == []
    assert position_ticks(1) == [0]
    assert position_ticks(12) == list(range(12))
    for n in range(13, 400):
        ticks = position_ticks(n)
        step = ticks[1] - ticks[0]
        assert ticks == list(range(0, n, step)) and len(ticks) <= 12
        # The step is the smallest of 1, 2, 5, 10, 20, ... that fits in 12 ticks.
        smaller = [s for s in (1, 2, 5, 10, 20, 50) if s < step]
        assert all(len(range(0, n, s)) > 12 for s in smaller)
    with pytest.raises(ValueError, match="max_ticks"):
        position_ticks(5, max_ticks=0)


def test_sharp_inline_figures_only_in_a_kernel(monkeypatch):
    """In a kernel the inline figures become 2x PNGs; in plain Python nothing is set."""
    import IPython
    import matplotlib_inline.backend_inline as inline

    calls = []
    monkeypatch.setattr(inline, "set_matplotlib_formats", lambda *f: calls.append(f))
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert sharp_inline_figures() is False and calls == []

    class Shell:  # what a Jupyter kernel's shell has and a terminal IPython lacks
        kernel = object()

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    use_book_style()
    assert calls == [("retina",)]
