"""The book's figure style and a few plots every chapter uses.

    from minitransformer.plotting import use_book_style, plot_attention
    use_book_style()
    plot_attention(weights, src_tokens, tgt_tokens)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from torch import Tensor

__all__ = ["STYLE_FILE", "HEATMAP_CMAP", "use_book_style", "plot_attention"]

#: The matplotlib style file every chapter uses.
STYLE_FILE = Path(__file__).with_name("book.mplstyle")
#: Perceptually uniform, colour-blind-safe colormap for heatmaps.
HEATMAP_CMAP = "viridis"


def use_book_style() -> None:
    """Apply the book's matplotlib style (sizes, grid, Okabe-Ito colours)."""
    plt.style.use(STYLE_FILE)


def plot_attention(
    weights: Tensor,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    xlabel: str = "key position",
    ylabel: str = "query position",
    colorbar: bool = True,
) -> Axes:
    """Heatmap of one attention matrix.

    Args:
        weights: ``(Lq, Lk)`` attention weights (rows sum to 1).
        keys: optional ``Lk`` labels for the x axis (e.g. source tokens).
        queries: optional ``Lq`` labels for the y axis (e.g. target tokens).
        ax: axes to draw on; a new figure if None.

    Returns: the axes.
    """
    w = weights.detach().float().cpu()
    if w.dim() != 2:
        raise ValueError(f"plot_attention: expected (Lq, Lk) weights, got shape {tuple(w.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.3 * w.shape[1] + 2.5, 0.3 * w.shape[0] + 1.5))
    im = ax.imshow(w.numpy(), cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0, aspect="auto")
    ax.grid(False)
    if keys is not None:
        ax.set_xticks(range(len(keys)), list(keys), rotation=60, ha="right")
    if queries is not None:
        ax.set_yticks(range(len(queries)), list(queries))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    return ax
