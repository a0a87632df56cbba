"""Layer normalisation, written out.

Ba, Kiros and Hinton, "Layer Normalization" (2016):

    y = (x − E[x]) / √(Var[x] + ε) · α + β

with the mean and the (biased) variance taken over the last, feature
dimension of each token separately, and α (``weight``), β (``bias``) learned
per feature. Unlike batch normalisation, no statistic is shared between
tokens or between the examples of a batch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["LayerNorm"]


class LayerNorm(nn.Module):
    """Normalise each token's features to zero mean and unit variance, then scale
    by ``weight`` (α) and shift by ``bias`` (β).

    Args:
        d_model: size ``D`` of the last dimension.
        eps: ε added to the variance so a constant vector does not divide by 0.

    Shape: ``(..., D)`` → ``(..., D)``. Matches ``nn.LayerNorm(d_model, eps)``
    (same parameter names), but the arithmetic is written out.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # α
        self.bias = nn.Parameter(torch.zeros(d_model))  # β

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"LayerNorm: expected last dimension {self.d_model}, got shape {tuple(x.shape)}"
            )
        mean = x.mean(dim=-1, keepdim=True)  # E[x], (..., 1)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # biased Var[x], (..., 1)
        x_hat = (x - mean) * torch.rsqrt(var + self.eps)
        return x_hat * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"
