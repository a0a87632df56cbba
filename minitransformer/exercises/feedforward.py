"""Checker for the position-wise feed-forward network.

Vaswani et al. (2017), section 3.3: FFN(x) = max(0, x W1ᵀ + b1) W2ᵀ + b2, with
the weights stored as ``nn.Linear`` stores them: ``w1`` ``(F, D)``, ``w2``
``(D, F)``. Reference: :class:`minitransformer.PositionwiseFeedForward`.

Shape letters: ``D`` model width, ``F`` inner width; ``...`` any leading axes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..feedforward import PositionwiseFeedForward
from ._harness import Case, Mistake, check, generator

__all__ = ["check_feed_forward"]


def _reference(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    ffn = PositionwiseFeedForward(w1.shape[1], w1.shape[0]).to(x.dtype).eval()
    with torch.no_grad():
        ffn.linear1.weight.copy_(w1)
        ffn.linear1.bias.copy_(b1)
        ffn.linear2.weight.copy_(w2)
        ffn.linear2.bias.copy_(b2)
        return ffn(x)


_HINTS = {
    "no_relu": (
        "there is no ReLU between the two layers, so they collapse into one linear map "
        "(W2 W1): apply torch.relu to the first layer's output."
    ),
    "relu_out": (
        "a ReLU is also applied after the second layer: the FFN ends with the linear "
        "layer, so its outputs can be negative."
    ),
    "gelu": "GELU is used; the paper's FFN (and this book's) uses ReLU.",
    "no_bias": "a bias is missing: both layers add their bias (b1 after W1, b2 after W2).",
}


def _cases() -> list[Case]:
    g = generator(5)

    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    def weights(d, f, dtype=torch.float32):
        return (r(f, d, dtype=dtype) / d**0.5, r(f, dtype=dtype), r(d, f, dtype=dtype) / f**0.5,
                r(d, dtype=dtype))

    return [
        Case("x (2, 3, 4), d_ff 8", (r(2, 3, 4), *weights(4, 8))),
        Case("d_model = d_ff: x (2, 5, 6), d_ff 6", (r(2, 5, 6), *weights(6, 6))),
        Case("one position: x (1, 1, 3), d_ff 5", (r(1, 1, 3), *weights(3, 5))),
        Case("no batch axis: x (7, 4), d_ff 16", (r(7, 4), *weights(4, 16))),
        Case("float64: x (2, 2, 4), d_ff 4", (r(2, 2, 4, dtype=torch.float64),
                                              *weights(4, 4, torch.float64))),
    ]


def _mistakes() -> list[Mistake]:
    h = _HINTS
    return [
        Mistake(h["no_relu"], lambda x, w1, b1, w2, b2: F.linear(F.linear(x, w1, b1), w2, b2)),
        Mistake(h["relu_out"], lambda x, w1, b1, w2, b2: torch.relu(
            F.linear(torch.relu(F.linear(x, w1, b1)), w2, b2))),
        Mistake(h["gelu"], lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1, b1)), w2,
                                                               b2)),
        Mistake(h["no_bias"], lambda x, w1, b1, w2, b2: F.linear(torch.relu(F.linear(x, w1)),
                                                                  w2, b2)),
        Mistake(h["no_bias"], lambda x, w1, b1, w2, b2: F.linear(
            torch.relu(F.linear(x, w1, b1)), w2)),
    ]


def _error(case: Case, exc: BaseException) -> str | None:
    text = str(exc)
    if isinstance(exc, TypeError) and "argument" in text:
        return "the function must have the signature fn(x, w1, b1, w2, b2)."
    if "shapes cannot be multiplied" in text or "size mismatch" in text:
        return ("a shape error in a matrix product: nn.Linear stores W1 as (d_ff, d_model), "
                "so multiply by its transpose: x @ w1.T + b1.")
    return None


def check_feed_forward(fn: Callable) -> bool:
    """Check ``fn(x, w1, b1, w2, b2) -> y``.

    Args:
        fn: the reader's feed-forward network: ``x`` ``(..., D)``, ``w1``
            ``(F, D)``, ``b1`` ``(F,)``, ``w2`` ``(D, F)``, ``b2`` ``(D,)`` (as
            ``nn.Linear`` stores them); returns ``relu(x w1ᵀ + b1) w2ᵀ + b2``,
            ``(..., D)``, in ``x``'s dtype.

    Tests: 2- and 3-axis inputs, a single position, float64. A missing
    transpose fails on shapes in the first case and gets its own hint.

    Returns:
        True if it matches :class:`minitransformer.PositionwiseFeedForward`.
    """
    return check(
        "feed_forward", fn, _cases(), _reference, _mistakes(), names=("y",),
        atol=1e-5, rtol=1e-4, on_error=_error,
        fallback="Compute torch.relu(x @ w1.T + b1) @ w2.T + b2.",
    )
