"""The position-wise feed-forward network of each Transformer layer.

Vaswani et al. (2017), section 3.3: FFN(x) = max(0, x W1 + b1) W2 + b2,
applied to every position separately and identically (equivalently, two
convolutions of kernel size 1).

Shape letters: ``B`` batch, ``L`` length, ``D`` model width, ``F`` inner width.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["PositionwiseFeedForward"]


class PositionwiseFeedForward(nn.Module):
    """Two linear layers with a ReLU between them, applied at every position.

    Args:
        d_model: input and output width ``D``.
        d_ff: inner width ``F`` (2048 for ``D`` = 512 in the paper).
        dropout: dropout after the ReLU, during training (as in
            ``nn.TransformerEncoderLayer``).

    The weights are named as in ``nn.TransformerEncoderLayer``: ``linear1``
    ``(F, D)`` and ``linear2`` ``(D, F)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, L, D)`` → ``(B, L, D)``; the same function at every position."""
        return self.linear2(self.dropout(F.relu(self.linear1(x))))  # (B, L, F) → (B, L, D)
