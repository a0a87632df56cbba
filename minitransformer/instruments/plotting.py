"""The book's figure style and a few plots every chapter uses.

    from minitransformer.instruments.plotting import use_book_style, plot_attention
    use_book_style()
    plot_attention(weights, src_tokens, tgt_tokens)

The style (``book.mplstyle``) draws figures 6.4 in wide at 110 dpi, about
700 px: the width of the book's text column at a 1280 px wide window, so
10 pt labels stay 10 pt on the page. In a notebook the PNGs are drawn at
twice that resolution and shown at that size (``retina``), sharp on HiDPI
screens. Multi-panel figures should stay at most
about 7 in wide (wider ones are shrunk and their labels become small).
Colours are the Okabe-Ito palette and heatmaps use viridis, both readable
with the common colour-vision deficiencies and in greyscale.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from torch import Tensor

__all__ = ["STYLE_FILE", "HEATMAP_CMAP", "use_book_style", "plot_attention", "position_ticks"]

#: The matplotlib style file every chapter uses.
STYLE_FILE = Path(__file__).with_name("book.mplstyle")
#: Perceptually uniform, colour-blind-safe colormap for heatmaps.
HEATMAP_CMAP = "viridis"
#: At most this many position ticks on an unlabelled heatmap axis.
MAX_POSITION_TICKS = 12


#: How a notebook shows its figures: "retina" PNGs are drawn at twice the style's dpi and
#: shown at the style's size, so they stay sharp on HiDPI screens and phones.
INLINE_FORMAT = "retina"


def use_book_style() -> None:
    """Apply the book's matplotlib style (sizes, grid, Okabe-Ito colours); in a notebook,
    also show figures as :data:`INLINE_FORMAT` PNGs."""
    plt.style.use(STYLE_FILE)
    sharp_inline_figures()


def sharp_inline_figures() -> bool:
    """In a Jupyter kernel, have inline figures drawn as :data:`INLINE_FORMAT`; True if it
    did. Elsewhere (a script, the tests) nothing changes and it returns False."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats(INLINE_FORMAT)
    return True


def position_ticks(n: int, max_ticks: int = MAX_POSITION_TICKS) -> list[int]:
    """Tick positions for an axis of ``n`` cells indexed 0..n-1: every index
    if there are at most ``max_ticks``, else every 2nd, 5th, 10th, 20th, ...
    (a step of 1, 2 or 5 times a power of ten), starting at 0.

    Example:
        >>> position_ticks(4), position_ticks(30)
        ([0, 1, 2, 3], [0, 5, 10, 15, 20, 25])
    """
    if max_ticks < 1:
        raise ValueError(f"position_ticks: max_ticks must be at least 1, got {max_ticks}")
    k, step = 0, 1
    while n > 0 and (n - 1) // step + 1 > max_ticks:  # ticks at 0, step, 2 step, ... < n
        k += 1
        step = (1, 2, 5)[k % 3] * 10 ** (k // 3)
    return list(range(0, n, step))


def plot_attention(
    weights: Tensor | np.ndarray,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    xlabel: str = "key position",
    ylabel: str = "query position",
    colorbar: bool = True,
    colorbar_label: str = "attention weight",
) -> Axes:
    """Heatmap of one attention matrix, on a fixed 0..1 colour scale.

    Args:
        weights: ``(Lq, Lk)`` attention weights (rows sum to 1); a tensor or an array.
        keys: optional ``Lk`` labels for the x axis (e.g. source tokens);
            without them the axis shows integer positions (:func:`position_ticks`),
            never the cell edges or fractions matplotlib would choose.
        queries: optional ``Lq`` labels for the y axis (e.g. target tokens);
            without them integer positions, as for ``keys``.
        ax: axes to draw on; a new figure sized to the matrix if None.
        title, xlabel, ylabel: texts; give units where there are any.
        colorbar: draw a colour bar labelled ``colorbar_label``.

    Returns: the axes.
    """
    if isinstance(weights, Tensor):
        w = weights.detach().float().cpu()
    else:
        w = torch.as_tensor(np.asarray(weights, dtype=np.float32))
    if w.dim() != 2:
        raise ValueError(f"plot_attention: expected (Lq, Lk) weights, got shape {tuple(w.shape)}")
    for name, labels, size in (("keys", keys, w.shape[1]), ("queries", queries, w.shape[0])):
        if labels is not None and len(labels) != size:
            raise ValueError(
                f"plot_attention: {len(labels)} {name} labels for {size} "
                f"{'columns' if name == 'keys' else 'rows'} of weights {tuple(w.shape)}"
            )
    if ax is None:
        width = min(0.3 * w.shape[1] + 2.5, 6.8)  # no wider than the book's text column
        _, ax = plt.subplots(figsize=(width, min(0.3 * w.shape[0] + 1.5, 6.0)))
    im = ax.imshow(w.numpy(), cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0, aspect="auto",
                   interpolation="nearest")
    ax.grid(False)
    if keys is not None:
        ax.set_xticks(range(len(keys)), list(keys), rotation=60, ha="right")
    else:
        ax.set_xticks(position_ticks(w.shape[1]))
    if queries is not None:
        ax.set_yticks(range(len(queries)), list(queries))
    else:
        ax.set_yticks(position_ticks(w.shape[0]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=colorbar_label)
    return ax
