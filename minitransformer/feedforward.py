"""The position-wise feed-forward network of each Transformer layer.

Vaswani et al. (2017), section 3.3: FFN(x) = max(0, x W1 + b1) W2 + b2,
applied to every position separately and identically (equivalently, two
convolutions of kernel size 1). The same network with GELU in place of the
ReLU is BERT's and GPT's (Hendrycks and Gimpel 2016).

Shazeer, "GLU Variants Improve Transformer" (2020): SwiGLU, the network of
PaLM and Llama, multiplies a SiLU-gated projection by a second one:

    SwiGLU(x) = (SiLU(x W_gate) ⊙ x W_up) W_down

Three matrices instead of two, so its hidden width is 2/3 of the ReLU
network's (:func:`swiglu_hidden`) to keep the parameter count.

Shape letters: ``B`` batch, ``L`` length, ``D`` model width, ``F`` inner width.
"""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["PositionwiseFeedForward", "SwiGLUFeedForward", "swiglu_hidden"]

#: The activations :class:`PositionwiseFeedForward` takes (GELU exact, with erf,
#: as ``nn.TransformerEncoderLayer(activation="gelu")``).
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class PositionwiseFeedForward(nn.Module):
    """Two linear layers with a ReLU (or GELU) between them, applied at every position.

    Args:
        d_model: input and output width ``D``.
        d_ff: inner width ``F`` (2048 for ``D`` = 512 in the paper).
        dropout: dropout after the activation, during training (as in
            ``nn.TransformerEncoderLayer``).
        bias: whether both linear layers have biases.
        activation: ``"relu"`` (the paper) or ``"gelu"`` (exact, erf-based).

    The weights are named as in ``nn.TransformerEncoderLayer``: ``linear1``
    ``(F, D)`` and ``linear2`` ``(D, F)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = True,
                 activation: Literal["relu", "gelu"] = "relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"PositionwiseFeedForward: activation must be one of "
                             f"{', '.join(map(repr, ACTIVATIONS))}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        """``(B, L, D)`` → ``(B, L, D)``; the same function at every position."""
        hidden = ACTIVATIONS[self.activation](self.linear1(x))  # (B, L, F)
        return self.linear2(self.dropout(hidden))  # (B, L, D)

    def extra_repr(self) -> str:
        return f"activation={self.activation}"


def swiglu_hidden(d_ff: int) -> int:
    """The hidden width of the SwiGLU network that replaces a ReLU network of
    inner width ``d_ff``: ``round(2 · d_ff / 3)``, at least 1.

    The ReLU network has ``2 · D · d_ff`` weights, SwiGLU ``3 · D · H``: with
    ``H`` the nearest integer to ``2 · d_ff / 3`` they differ by at most
    ``D`` weights (``|3H − 2·d_ff| ≤ 1``); biases, when there are any, add
    ``d_ff + D`` to one and ``2H + D`` to the other. (Llama rounds ``H`` up to
    a multiple of 256 instead, for fast kernels; at this book's sizes that
    would change the count by far more.)
    """
    return max(1, round(2 * d_ff / 3))


class SwiGLUFeedForward(nn.Module):
    """SwiGLU: ``down(dropout(SiLU(gate(x)) ⊙ up(x)))`` at every position.

    Args:
        d_model: input and output width ``D``.
        d_ff: the inner width of the ReLU network it replaces; the hidden
            width is ``H = swiglu_hidden(d_ff)`` (2/3 of it, rounded to the
            nearest integer), so both hold about as many parameters.
        dropout: dropout on the gated product, during training.
        bias: whether the three linear layers have biases (Llama's have none).

    Weights: ``gate`` and ``up`` ``(H, D)``, ``down`` ``(D, H)`` (Llama's
    ``w1``, ``w3``, ``w2``).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        hidden = swiglu_hidden(d_ff)
        self.gate = nn.Linear(d_model, hidden, bias=bias)
        self.up = nn.Linear(d_model, hidden, bias=bias)
        self.down = nn.Linear(hidden, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, L, D)`` → ``(B, L, D)``; the same function at every position."""
        hidden = F.silu(self.gate(x)) * self.up(x)  # (B, L, H)
        return self.down(self.dropout(hidden))  # (B, L, D)
