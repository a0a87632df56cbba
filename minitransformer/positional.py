"""Positional information added to token embeddings.

Vaswani et al. (2017), section 3.5: the sinusoidal encoding

    PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))

and learned absolute position embeddings (as in BERT and GPT-2), plus
:class:`NoPositionalEncoding` (dropout only) for a model without positions.
All three are :class:`PositionalEncoding`: ``forward(x, start=0)`` adds the
codes of positions ``start, start + 1, ...``, so incremental decoding feeds
position ``t`` alone with ``start=t`` (the offset of LLMs-from-scratch's
cached GPT) through the same call as a whole sequence.

Rotary position embeddings (Su et al., "RoFormer", 2021; Llama's positions)
add nothing to the embeddings: :func:`apply_rotary` turns each query and key
by an angle proportional to its position, inside attention, so that their
dot product depends on the offset between them only. A model built with
``positional="rope"`` has :class:`NoPositionalEncoding` on its embeddings
and rotary self-attention (:class:`~minitransformer.attention.MultiHeadAttention`
with ``rotary=True``).

Shape letters: ``B`` batch, ``L`` length, ``D`` model width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .checks import check_positions, check_rotary

__all__ = [
    "sinusoidal_table",
    "PositionalEncoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "NoPositionalEncoding",
    "rotary_angles",
    "apply_rotary",
]


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


class PositionalEncoding(nn.Module):
    """What every positional module of the package does: ``forward(x, start=0)``
    adds the code of positions ``start .. start + L - 1`` to ``x`` ``(B, L, D)``
    and applies dropout; ``reset_parameters`` (called by ``__init__``) sets
    its initial values. The model calls every kind the same way, with
    ``start`` > 0 when decoding one position at a time, and ``check=False``
    (it has checked the lengths against ``max_len`` itself)."""

    def forward(  # pragma: no cover - abstract
        self, x: Tensor, start: int = 0, check: bool = True
    ) -> Tensor:
        raise NotImplementedError

    def reset_parameters(self) -> None:
        """Set the module's initial values (nothing to set by default)."""


class SinusoidalPositionalEncoding(PositionalEncoding):
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
        self.register_buffer("pe", torch.empty(max_len, d_model))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Fill ``pe`` with :func:`sinusoidal_table`."""
        with torch.no_grad():
            self.pe.copy_(sinusoidal_table(self.max_len, self.d_model))

    def forward(self, x: Tensor, start: int = 0, check: bool = True) -> Tensor:
        """``(B, L, D)`` → ``(B, L, D)``: ``x + pe[start : start + L]``, then dropout."""
        if check:
            check_positions(x, start, self.max_len, self.d_model, type(self).__name__)
        return self.dropout(x + self.pe[start : start + x.shape[1]])


class LearnedPositionalEmbedding(PositionalEncoding):
    """Add a trained vector for each position, then apply dropout.

    Args:
        max_len: number of positions it has a vector for (no extrapolation
            beyond it).
        d_model: embedding width ``D``.
        dropout: dropout on the sum.

    The table is ``self.embedding.weight``, ``(max_len, D)``, initialised with
    N(0, 1/2) (:meth:`reset_parameters`): the same root-mean-square size
    (1/√2) as the sinusoidal codes.
    """

    def __init__(self, max_len: int, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the table from N(0, 1/2)."""
        nn.init.normal_(self.embedding.weight, std=1 / math.sqrt(2))

    def forward(self, x: Tensor, start: int = 0, check: bool = True) -> Tensor:
        """``(B, L, D)`` → ``(B, L, D)``: ``x + embedding[start .. start + L - 1]``,
        then dropout."""
        if check:
            check_positions(x, start, self.max_len, self.d_model, type(self).__name__)
        return self.dropout(x + self.embedding.weight[start : start + x.shape[1]])


class NoPositionalEncoding(PositionalEncoding):
    """No position information: only the dropout the other kinds apply.

    Args:
        dropout: dropout on ``x``.

    Without positions (and without relative attention), an encoder is
    permutation-equivariant: it cannot tell word orders apart.
    """

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, start: int = 0, check: bool = True) -> Tensor:
        """``(B, L, D)`` → ``(B, L, D)``: ``dropout(x)``; ``start`` and ``check``
        are ignored."""
        return self.dropout(x)


def rotary_angles(
    positions: Tensor, head_dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> Tensor:
    """The rotation angles ``pos · θ_i``, ``θ_i = base^(−2i / Dh)``, for the
    ``Dh / 2`` pairs of dimensions: integer ``positions`` ``(L,)`` →
    ``(L, Dh / 2)`` of ``dtype`` (pair 0 turns fastest, one radian a position)."""
    i = torch.arange(head_dim // 2, device=positions.device, dtype=dtype)
    theta = base ** (-2 * i / head_dim)  # (Dh/2,)
    return positions.to(dtype)[:, None] * theta  # (L, Dh/2)


def apply_rotary(
    x: Tensor, positions: Tensor, base: float = 10000.0, check: bool = True
) -> Tensor:
    """Rotate queries or keys by their positions (RoPE).

    Args:
        x: ``(B, H, L, Dh)`` (any leading dimensions), ``Dh`` even.
        positions: integer ``(L,)``, the position of each of the ``L`` rows.
        base: the 10000 of ``θ_i = base^(−2i / Dh)``.
        check: check the arguments first.

    Returns: ``(B, H, L, Dh)`` in ``x``'s dtype. Pairing convention: *halves*,
    as GPT-NeoX and Hugging Face's Llama (``rotate_half``): dimension ``i`` and
    ``i + Dh/2`` form pair ``i``, turned by the angle ``pos · θ_i``:

        (x_i, x_{i+Dh/2}) → (x_i cos − x_{i+Dh/2} sin, x_i sin + x_{i+Dh/2} cos)

    (RoFormer and Meta's original Llama pair neighbours ``2i, 2i+1``
    instead: the same rotation up to a fixed permutation of the dimensions,
    which the projections absorb.) A rotation keeps the norm, and the dot
    product of a query at ``m`` and a key at ``n`` depends on ``m − n`` only.
    """
    if check:
        check_rotary(x, positions, "apply_rotary")
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32  # angles at least fp32
    angle = rotary_angles(positions, x.shape[-1], base, wide)  # (L, Dh/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    first, second = x.chunk(2, dim=-1)  # (B, H, L, Dh/2) each: the pairs' two halves
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
