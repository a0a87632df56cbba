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

Root-mean-square normalisation (Zhang and Sennrich, "Root Mean Square Layer
Normalization", 2019), the norm of Llama and most models since:

    y = x / √(mean(x²) + ε) · g

keeps only the rescaling: no mean is subtracted and there is no shift β.
:func:`rms_norm` writes it out; :class:`RMSNorm` runs ``F.rms_norm`` by
default (tested equal to :func:`rms_norm` and to ``torch.nn.RMSNorm``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["layer_norm", "LayerNorm", "rms_norm", "RMSNorm"]


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


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-5) -> Tensor:
    """x / √(mean(x²) + ε) · weight over the last dimension.

    Args:
        x: ``(..., D)``.
        weight: g, ``(D,)``.
        eps: ε, added to the mean square.

    Returns: ``(..., D)``, in ``x``'s dtype (computed in it).
    """
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # mean(x²), (..., 1)
    return x * torch.rsqrt(mean_square + eps) * weight


class RMSNorm(nn.Module):
    """Divide each token's features by their root mean square, then scale by
    ``weight`` (g): LayerNorm without the mean and without the shift.

    Args:
        d_model: size ``D`` of the last dimension.
        eps: ε added to the mean square (default 1e-5, LayerNorm's and
            Llama 2's; ``torch.nn.RMSNorm``'s own default is the dtype's
            machine epsilon, so build it with ``eps=1e-5`` to compare).
        fused: compute with ``F.rms_norm`` instead of the written-out
            :func:`rms_norm` (same result).

    Shape: ``(..., D)`` → ``(..., D)``. Matches ``nn.RMSNorm(d_model, eps)``,
    with the same parameter name (``weight``, ones at first).
    """

    def __init__(self, d_model: int, eps: float = 1e-5, fused: bool = True):
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.fused = fused
        self.weight = nn.Parameter(torch.ones(d_model))  # g

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"RMSNorm: expected last dimension {self.d_model}, got shape {tuple(x.shape)}"
            )
        if self.fused:
            return F.rms_norm(x, (self.d_model,), self.weight, self.eps)
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, fused={self.fused}"
