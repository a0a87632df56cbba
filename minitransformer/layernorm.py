"""Layer normalisation, written out.

Ba, Kiros and Hinton, "Layer Normalization" (2016):

    y = (x − E[x]) / √(Var[x] + ε) · α + β

with the mean and the (biased) variance taken over the last, feature
dimension of each token separately, and α (``weight``), β (``bias``) learned
per feature. Unlike batch normalisation, no statistic is shared between
tokens or between the examples of a batch.

:func:`layer_norm` is the formula written out. :class:`LayerNorm` runs it
through PyTorch's fused kernel by default (``fused=True``, much faster on a
CPU, forward and backward: ``benchmarks/README.md``), which is tested equal to
:func:`layer_norm`; build it with ``fused=False`` to run the written-out
formula instead.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["layer_norm", "LayerNorm"]


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """(x − E[x]) / √(Var[x] + ε) · weight + bias over the last dimension.

    Args:
        x: ``(..., D)``.
        weight: α, ``(D,)``.
        bias: β, ``(D,)``.
        eps: ε, added to the variance.

    Returns: ``(..., D)``. The variance is the biased one (divide by ``D``).
    """
    mean = x.mean(dim=-1, keepdim=True)  # E[x], (..., 1)
    var = x.var(dim=-1, keepdim=True, unbiased=False)  # biased Var[x], (..., 1)
    x_hat = (x - mean) * torch.rsqrt(var + eps)  # zero mean, unit variance
    return x_hat * weight + bias


class LayerNorm(nn.Module):
    """Normalise each token's features to zero mean and unit variance, then scale
    by ``weight`` (α) and shift by ``bias`` (β).

    Args:
        d_model: size ``D`` of the last dimension.
        eps: ε added to the variance so a constant vector does not divide by 0.
        fused: compute with PyTorch's fused kernel (fast) instead of the
            written-out :func:`layer_norm` (same result).

    Shape: ``(..., D)`` → ``(..., D)``. Matches ``nn.LayerNorm(d_model, eps)``,
    with the same parameter names.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, fused: bool = True):
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.fused = fused
        self.weight = nn.Parameter(torch.ones(d_model))  # α
        self.bias = nn.Parameter(torch.zeros(d_model))  # β

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"LayerNorm: expected last dimension {self.d_model}, got shape {tuple(x.shape)}"
            )
        if self.fused:
            return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, fused={self.fused}"
