"""Positional information added to token embeddings.

Vaswani et al. (2017), section 3.5: the sinusoidal encoding

    PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))

and learned absolute position embeddings (as in BERT and GPT-2).

Shape letters: ``B`` batch, ``L`` length, ``D`` model width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["sinusoidal_table", "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding"]


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The ``(max_len, d_model)`` table of sinusoidal codes (float32).

    Even columns hold sines, odd columns cosines of the same frequency; the
    wavelength grows geometrically from 2π (column 0) to about 10000·2π.
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (L, ceil(D/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


def _check_length(x: Tensor, max_len: int, d_model: int, where: str) -> None:
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(
            f"{where}: expected input of shape (batch, len, d_model={d_model}), "
            f"got {tuple(x.shape)}"
        )
    if x.shape[1] > max_len:
        raise ValueError(
            f"{where}: sequence length {x.shape[1]} is longer than max_len={max_len}; "
            f"build the module with a larger max_len"
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Add the fixed sinusoidal code of each position, then apply dropout.

    Args:
        d_model: embedding width ``D``.
        max_len: longest sequence it accepts.
        dropout: dropout on the sum, as in the paper.

    The codes live in the buffer ``pe`` of shape ``(max_len, D)`` (saved in the
    ``state_dict``, not trained).
    """

    pe: Tensor

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model))

    def forward(self, x: Tensor) -> Tensor:
        """``(B, L, D)`` → ``(B, L, D)``: ``x + pe[:L]``, then dropout."""
        _check_length(x, self.max_len, self.d_model, type(self).__name__)
        return self.dropout(x + self.pe[: x.shape[1]])


class LearnedPositionalEmbedding(nn.Module):
    """Add a trained vector for each position, then apply dropout.

    Args:
        max_len: number of positions it has a vector for (no extrapolation
            beyond it).
        d_model: embedding width ``D``.
        dropout: dropout on the sum.

    The table is ``self.embedding.weight``, ``(max_len, D)``, initialised with
    N(0, 1/2): the same root-mean-square size (1/√2) as the sinusoidal codes.
    """

    def __init__(self, max_len: int, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=1 / math.sqrt(2))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, L, D)`` → ``(B, L, D)``: ``x + embedding[0..L-1]``, then dropout."""
        _check_length(x, self.max_len, self.d_model, type(self).__name__)
        return self.dropout(x + self.embedding.weight[: x.shape[1]])
