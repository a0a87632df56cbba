"""A drawing of the encoder-decoder Transformer (the paper's Figure 1),
labelled with a :class:`TransformerConfig`'s sizes and the tensor shapes."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ..model import TransformerConfig

__all__ = ["draw_architecture"]

# Okabe-Ito colours, as in the book's style
_ATTN, _FFN, _NORM, _EMB, _OUT = "#56B4E9", "#E69F00", "#F0E442", "#CC79A7", "#009E73"


def _box(ax: Axes, x: float, y: float, w: float, h: float, text: str, color: str) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=color,
            edgecolor="black",
            linewidth=0.8,
            alpha=0.9,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=8)


def _inputs_and_frame(ax: Axes, c: TransformerConfig, x: float, ids: str, length: str,
                      height: float, w: float = 3.4, h: float = 0.55) -> None:
    """A stack's input boxes (ids, embedding, positions) and the dashed frame
    of ``height`` around its layers, from y = 3.1 up."""
    _box(ax, x, 0.6, w, h, ids, "white")
    _box(ax, x, 1.5, w, h, f"embedding ·√{c.d_model}  (B, {length}, {c.d_model})", _EMB)
    _box(ax, x, 2.4, w, h, f"+ {c.positional} positions", _EMB)
    ax.add_patch(FancyBboxPatch((x - w / 2 - 0.25, 3.1), w + 0.5, height,
                                boxstyle="round,pad=0.05", facecolor="none",
                                edgecolor="grey", linestyle="--"))


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], **kw) -> None:
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=8,
            linewidth=0.9,
            color="black",
            shrinkA=0,
            shrinkB=0,
            **kw,
        )
    )


def draw_architecture(config: TransformerConfig | None = None, ax: Axes | None = None) -> Axes:
    """Draw the architecture as the package builds it.

    Args:
        config: sizes to print on the figure (default: the paper's base model
            with 37,000-token vocabularies).
        ax: axes to draw on; a new figure if None.

    Returns: the axes.
    """
    c = config or TransformerConfig(37000, 37000)
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 7.2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 11.6)
    ax.axis("off")
    w, h = 3.4, 0.55
    norm = "Add & Norm" + (" (pre-LN)" if c.norm_first else "")

    # encoder (left)
    ex = 2.5
    _inputs_and_frame(ax, c, ex, "source ids (B, S)", "S", 3.7)
    ax.text(
        ex - w / 2 - 0.35, 4.95, f"{c.num_encoder_layers}×", ha="right", va="center", fontsize=11
    )
    enc = [
        (f"self-attention, {c.num_heads} heads", _ATTN),
        (norm, _NORM),
        (f"feed-forward {c.d_model}→{c.d_ff}→{c.d_model}", _FFN),
        (norm, _NORM),
    ]
    for i, (text, color) in enumerate(enc):
        _box(ax, ex, 3.6 + 0.9 * i, w, h, text, color)
    for y0, y1 in [(0.6, 1.5), (1.5, 2.4), (2.4, 3.6), (3.6, 4.5), (4.5, 5.4), (5.4, 6.3)]:
        _arrow(ax, (ex, y0 + h / 2), (ex, y1 - h / 2))
    _arrow(ax, (ex, 6.3 + h / 2), (ex, 7.05))
    ax.text(ex, 7.15, f"memory (B, S, {c.d_model})", ha="center", fontsize=8)

    # decoder (right)
    dx = 7.5
    _inputs_and_frame(ax, c, dx, "target ids, shifted right (B, T)", "T", 5.5)
    ax.text(
        dx + w / 2 + 0.35, 5.85, f"×{c.num_decoder_layers}", ha="left", va="center", fontsize=11
    )
    dec = [
        (f"causal self-attention, {c.num_heads} heads", _ATTN),
        (norm, _NORM),
        ("cross-attention (K, V = memory)", _ATTN),
        (norm, _NORM),
        (f"feed-forward {c.d_model}→{c.d_ff}→{c.d_model}", _FFN),
        (norm, _NORM),
    ]
    for i, (text, color) in enumerate(dec):
        _box(ax, dx, 3.6 + 0.9 * i, w, h, text, color)
    ys = [0.6, 1.5, 2.4] + [3.6 + 0.9 * i for i in range(6)] + [9.6]
    for y0, y1 in zip(ys, ys[1:]):
        _arrow(ax, (dx, y0 + h / 2), (dx, y1 - h / 2))
    _box(ax, dx, 9.6, w, h, f"linear {c.d_model}→{c.tgt_vocab_size:,} (generator)", _OUT)
    _box(ax, dx, 10.5, w, h, "softmax", _OUT)
    _arrow(ax, (dx, 9.6 + h / 2), (dx, 10.5 - h / 2))
    ax.text(
        dx, 11.25, f"next-token probabilities (B, T, {c.tgt_vocab_size:,})", ha="center", fontsize=8
    )
    # memory → every decoder layer's cross-attention
    _arrow(ax, (ex, 7.0), (dx - w / 2, 3.6 + 0.9 * 2), connectionstyle="arc3,rad=-0.25")
    ax.set_title("The encoder-decoder Transformer as minitransformer builds it", fontsize=10)
    return ax
