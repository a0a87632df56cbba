"""Checkers for splitting the model width into heads and merging them back.

Vaswani et al. (2017), section 3.2.2: head ``h`` works on the ``h``-th slice
of ``Dh = D / H`` consecutive features. The reference is written from that
definition (each head a contiguous slice) and equals what
:class:`minitransformer.MultiHeadAttention` does internally.

Shape letters: ``B`` batch, ``L`` length, ``H`` heads, ``Dh`` head width,
``D = H * Dh`` model width.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ._harness import Case, Mistake, check, generator

__all__ = ["check_split_heads", "check_merge_heads", "split_heads_reference",
           "merge_heads_reference"]


def split_heads_reference(x: Tensor, num_heads: int) -> Tensor:
    """``(B, L, D)`` → ``(B, H, L, Dh)``: head ``h`` holds features ``h*Dh .. (h+1)*Dh - 1``."""
    dh = x.shape[-1] // num_heads
    return torch.stack([x[..., h * dh:(h + 1) * dh] for h in range(num_heads)], dim=1)


def merge_heads_reference(x: Tensor) -> Tensor:
    """``(B, H, L, Dh)`` → ``(B, L, H*Dh)``: the heads' slices side by side again."""
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)


_SPLIT_HINTS = {
    "no_transpose": (
        "the heads axis is in the wrong place: you returned (B, L, H, Dh); move heads "
        "before the length with .transpose(1, 2), giving (B, H, L, Dh)."
    ),
    "direct": (
        "you reshaped (B, L, D) straight to (B, H, L, Dh): that cuts the *sequence* into "
        "pieces and mixes positions between heads. View as (B, L, H, Dh) first (split "
        "the feature axis), then .transpose(1, 2)."
    ),
    "strided": (
        "each head got every H-th feature (strided) instead of a contiguous slice of Dh "
        "features: view the last axis as (H, Dh), in that order, not (Dh, H)."
    ),
    "swapped": (
        "heads and head width are swapped: you made Dh heads of width H. The last axis "
        "splits as (num_heads, D // num_heads)."
    ),
}

_MERGE_HINTS = {
    "direct": (
        "you reshaped (B, H, L, Dh) straight to (B, L, D) without moving the heads axis "
        "back: that mixes positions. First .transpose(1, 2) to (B, L, H, Dh), then "
        ".reshape(B, L, H * Dh)."
    ),
    "strided": (
        "the heads' features are interleaved: merging must put each head's Dh features "
        "side by side, as (B, L, H, Dh) → (B, L, H*Dh), not (B, L, Dh, H)."
    ),
}


def _split_cases() -> list[Case]:
    g = generator(4)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    return [
        Case("x (2, 5, 12), 3 heads", (r(2, 5, 12), 3)),
        Case("length 1: x (2, 1, 6), 2 heads", (r(2, 1, 6), 2)),
        Case("one head: x (3, 4, 8), 1 head", (r(3, 4, 8), 1)),
        Case("head width 1: x (2, 3, 4), 4 heads", (r(2, 3, 4), 4)),
        Case("x (1, 7, 10), 5 heads, float64", (r(1, 7, 10).double(), 5)),
    ]


def _split_mistakes() -> list[Mistake]:
    h = _SPLIT_HINTS

    def shape(x, n):
        b, seq, d = x.shape
        return b, seq, d, n, d // n

    def no_transpose(x, n):
        b, seq, d, n, dh = shape(x, n)
        return x.reshape(b, seq, n, dh)

    def direct(x, n):
        b, seq, d, n, dh = shape(x, n)
        return x.reshape(b, n, seq, dh)

    def strided(x, n):
        b, seq, d, n, dh = shape(x, n)
        return x.reshape(b, seq, dh, n).permute(0, 3, 1, 2)

    def swapped(x, n):
        b, seq, d, n, dh = shape(x, n)
        return x.reshape(b, seq, dh, n).transpose(1, 2)

    return [Mistake(h["no_transpose"], no_transpose), Mistake(h["direct"], direct),
            Mistake(h["strided"], strided), Mistake(h["swapped"], swapped)]


def _view_error(case: Case, exc: BaseException) -> str | None:
    text = str(exc)
    if "view size is not compatible" in text or "contiguous" in text:
        return ("after a transpose the tensor is not contiguous, so .view() fails: use "
                ".reshape(...) or .contiguous().view(...).")
    if isinstance(exc, TypeError) and "argument" in text:
        return "check the signature: fn(x, num_heads) for split, fn(x) for merge."
    return None


def check_split_heads(fn: Callable) -> bool:
    """Check ``fn(x, num_heads) -> heads``.

    Args:
        fn: the reader's split: ``x`` ``(B, L, D)`` and ``num_heads`` H (dividing
            D); returns ``(B, H, L, D // H)``, head ``h`` holding features
            ``h*Dh`` to ``(h+1)*Dh - 1`` of every position.

    Tests: several head counts (1, and as many heads as features), length 1,
    float64.

    Returns:
        True on a pass.
    """
    return check(
        "split_heads", fn, _split_cases(), split_heads_reference, _split_mistakes(),
        names=("the heads",), atol=0.0, rtol=0.0, on_error=_view_error,
        fallback="x.view(B, L, H, D // H).transpose(1, 2) is one right answer.",
    )


def _merge_cases() -> list[Case]:
    g = generator(5)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    return [
        Case("heads (2, 3, 5, 4) → (2, 5, 12)", (r(2, 3, 5, 4),)),
        Case("length 1: heads (2, 2, 1, 3)", (r(2, 2, 1, 3),)),
        Case("one head: heads (3, 1, 4, 8)", (r(3, 1, 4, 8),)),
        Case("head width 1: heads (2, 4, 3, 1)", (r(2, 4, 3, 1),)),
        Case("heads (1, 5, 7, 2), float64", (r(1, 5, 7, 2).double(),)),
    ]


def _merge_mistakes() -> list[Mistake]:
    h = _MERGE_HINTS

    def direct(x):
        b, n, seq, dh = x.shape
        return x.reshape(b, seq, n * dh)

    def strided(x):
        b, n, seq, dh = x.shape
        return x.permute(0, 2, 3, 1).reshape(b, seq, n * dh)

    return [Mistake(h["direct"], direct), Mistake(h["strided"], strided)]


def check_merge_heads(fn: Callable) -> bool:
    """Check ``fn(heads) -> x``.

    Args:
        fn: the reader's merge, the inverse of the split: ``heads``
            ``(B, H, L, Dh)`` → ``(B, L, H * Dh)``, head ``h`` back in features
            ``h*Dh`` to ``(h+1)*Dh - 1``.

    Tests: as for :func:`check_split_heads`.

    Returns:
        True on a pass.
    """
    return check(
        "merge_heads", fn, _merge_cases(), merge_heads_reference, _merge_mistakes(),
        names=("the merged tensor",), atol=0.0, rtol=0.0, on_error=_view_error,
        fallback="heads.transpose(1, 2).reshape(B, L, H * Dh) is one right answer.",
    )
