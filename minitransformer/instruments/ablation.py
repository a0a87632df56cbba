"""Switch parts of a Transformer off, to see what each part is for.

Used by the book's ablations (chapter 5 trains the same model with and
without the position-wise feed-forward network of Vaswani et al. 2017,
section 3.3). The layer's Add & Norm stays: with the FFN removed, a layer's
second sub-layer is ``norm(x + 0)`` (post-LN) or ``x + 0`` (pre-LN).

Shape letters: ``B`` batch, ``L`` length, ``D`` model width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..feedforward import PositionwiseFeedForward

__all__ = ["NoFeedForward", "remove_feed_forward"]


class NoFeedForward(nn.Module):
    """Stands in for a :class:`PositionwiseFeedForward`: outputs zeros, has no parameters."""

    def forward(self, x: Tensor) -> Tensor:
        """``(B, L, D)`` → zeros ``(B, L, D)``, so the residual ``x + ffn(x)`` is ``x``."""
        return torch.zeros_like(x)


def remove_feed_forward(model: nn.Module) -> nn.Module:
    """Replace every ``ffn`` :class:`PositionwiseFeedForward` in ``model`` by
    :class:`NoFeedForward` (in place) and return ``model``. Raises ValueError
    if there is none."""
    removed = 0
    for module in list(model.modules()):
        if isinstance(getattr(module, "ffn", None), PositionwiseFeedForward):
            module.ffn = NoFeedForward()
            removed += 1
    if removed == 0:
        raise ValueError(
            f"remove_feed_forward: {type(model).__name__} has no PositionwiseFeedForward named ffn"
        )
    return model
