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

from ._harness import Case, Mistake, check, generator, normal

__all__ = ["check_split_heads", "check_merge_heads", "split_heads_reference",
           "merge_heads_reference"]


def split_heads_reference(x: Tensor, num_heads: int) -> Tensor:
    """``(B, L, D)`` → ``(B, H, L, Dh)``: head ``h`` holds features ``h*Dh .. (h+1)*Dh - 1``."""
    dh = x.shape[-1] // num_heads
    return torch.stack([x[..., h * dh:(h + 1) * dh] for h in range(num_heads)], dim=1)


def merge_heads_reference(x: Tensor) -> Tensor:
    """``(B, H, L, Dh)`` → ``(B, L, H*Dh)``: the heads' slices side by side again."""
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)


def _split_cases() -> list[Case]:
    r = normal(generator(4), draw=torch.float32)

    return [
        Case("split.case.plain", (r(2, 5, 12), 3)),
        Case("split.case.length1", (r(2, 1, 6), 2)),
        Case("split.case.one_head", (r(3, 4, 8), 1)),
        Case("split.case.width1", (r(2, 3, 4), 4)),
        Case("split.case.float64", (r(1, 7, 10).double(), 5)),
    ]


def _split_mistakes() -> list[Mistake]:
    def shape(x, n):
        b, seq, d = x.shape
        return b, seq, n, d // n

    def no_transpose(x, n):
        b, seq, n, dh = shape(x, n)
        return x.reshape(b, seq, n, dh)

    def direct(x, n):
        b, seq, n, dh = shape(x, n)
        return x.reshape(b, n, seq, dh)

    def strided(x, n):
        b, seq, n, dh = shape(x, n)
        return x.reshape(b, seq, dh, n).permute(0, 3, 1, 2)

    def swapped(x, n):  # also torch.stack(x.split(n, dim=-1), 1): pieces of size n
        b, seq, n, dh = shape(x, n)
        return x.reshape(b, seq, dh, n).transpose(1, 2)

    def reversed_heads(x, n):
        return split_heads_reference(x, n).flip(1)

    def last_two(x, n):
        b, seq, n, dh = shape(x, n)
        return x.reshape(b, seq, n, dh).permute(0, 2, 3, 1)

    return [Mistake("split.hint.no_transpose", no_transpose),
            Mistake("split.hint.direct", direct),
            Mistake("split.hint.strided", strided),
            Mistake("split.hint.swapped", swapped),
            Mistake("split.hint.reversed", reversed_heads),
            Mistake("split.hint.last_two", last_two)]


def check_split_heads(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(x, num_heads) -> heads``.

    Args:
        fn: the reader's split: ``x`` ``(B, L, D)`` and ``num_heads`` H (dividing
            D); returns ``(B, H, L, D // H)``, head ``h`` holding features
            ``h*Dh`` to ``(h+1)*Dh - 1`` of every position.
        lang: language of the verdict; None for the current one.

    Tests: several head counts (1, and as many heads as features), length 1,
    float64.

    Returns:
        True on a pass.
    """
    return check(
        "split_heads", fn, _split_cases(), split_heads_reference, _split_mistakes(),
        signature="fn(x, num_heads)", names=("name.heads",), atol=0.0, rtol=0.0,
        fallback="split.fallback", lang=lang,
    )


def _merge_cases() -> list[Case]:
    r = normal(generator(5), draw=torch.float32)

    return [
        Case("merge.case.plain", (r(2, 3, 5, 4),)),
        Case("merge.case.length1", (r(2, 2, 1, 3),)),
        Case("merge.case.one_head", (r(3, 1, 4, 8),)),
        Case("merge.case.width1", (r(2, 4, 3, 1),)),
        Case("merge.case.float64", (r(1, 5, 7, 2).double(),)),
    ]


def _merge_mistakes() -> list[Mistake]:
    def direct(x):
        b, n, seq, dh = x.shape
        return x.reshape(b, seq, n * dh)

    def strided(x):
        b, n, seq, dh = x.shape
        return x.permute(0, 2, 3, 1).reshape(b, seq, n * dh)

    def reversed_heads(x):
        return merge_heads_reference(x.flip(1))

    def cat_length(x):
        return torch.cat(x.unbind(1), dim=1)  # (B, H*L, Dh)

    return [Mistake("merge.hint.direct", direct),
            Mistake("merge.hint.strided", strided),
            Mistake("merge.hint.reversed", reversed_heads),
            Mistake("merge.hint.no_reshape", lambda x: x.transpose(1, 2)),
            Mistake("merge.hint.cat_length", cat_length),
            Mistake("merge.hint.summed", lambda x: x.sum(1)),
            Mistake("merge.hint.summed", lambda x: x.mean(1))]


def check_merge_heads(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(heads) -> x``.

    Args:
        fn: the reader's merge, the inverse of the split: ``heads``
            ``(B, H, L, Dh)`` → ``(B, L, H * Dh)``, head ``h`` back in features
            ``h*Dh`` to ``(h+1)*Dh - 1``.
        lang: language of the verdict; None for the current one.

    Tests: as for :func:`check_split_heads`.

    Returns:
        True on a pass.
    """
    return check(
        "merge_heads", fn, _merge_cases(), merge_heads_reference, _merge_mistakes(),
        signature="fn(heads)", names=("name.merged",), atol=0.0, rtol=0.0,
        fallback="merge.fallback", lang=lang,
    )
