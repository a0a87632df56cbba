"""Checkers for the causal (look-ahead) mask and the padding mask.

Vaswani et al. (2017), section 3.2.3: the decoder's self-attention may not
look at later positions. Reference: :mod:`minitransformer.masks`, whose bool
masks mean True = may attend.

Shape letters: ``B`` batch, ``L`` length.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..masks import causal_mask, padding_mask
from ._harness import Case, Mistake, check, generator

__all__ = ["check_causal_mask", "check_padding_mask"]


def _ones(n: int) -> Tensor:
    return torch.ones(n, n, dtype=torch.bool)


def _causal_mistakes() -> list[Mistake]:
    return [
        Mistake("causal.hint.additive", lambda n: torch.zeros(n, n).masked_fill(
            ~causal_mask(n), float("-inf"))),
        Mistake("causal.hint.additive", lambda n: torch.zeros(n, n).masked_fill(
            ~causal_mask(n), -1e9)),
        Mistake("causal.hint.numbers", lambda n: causal_mask(n).float()),
        Mistake("causal.hint.numbers", lambda n: causal_mask(n).long()),
        Mistake("causal.hint.numbers", lambda n: causal_mask(n).to(torch.uint8)),
        Mistake("causal.hint.inverted", lambda n: ~causal_mask(n)),
        Mistake("causal.hint.strict", lambda n: _ones(n).tril(-1)),
        Mistake("causal.hint.future", lambda n: _ones(n).tril(1)),
        Mistake("causal.hint.upper", lambda n: _ones(n).triu()),
        Mistake("causal.hint.nothing", _ones),
        Mistake("causal.hint.batched", lambda n: causal_mask(n)[None]),
    ]


def _mask_compare(got, expected, case, nan):
    """Masks must be equal. When matching a mistake (``nan != "none"``), number
    forms are compared by value, so a float 0/1 or 0/-inf answer is named."""
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        return False
    if nan == "none":
        return got.dtype == torch.bool and bool(torch.equal(got, expected))
    if (got.dtype == torch.bool) != (expected.dtype == torch.bool):
        return False
    if got.dtype.is_floating_point != expected.dtype.is_floating_point:
        return False
    return bool(torch.equal(got.double(), expected.double()))


def check_causal_mask(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(length) -> mask``.

    Args:
        fn: the reader's causal mask: given an int ``length`` L, a bool tensor
            ``(L, L)``, True where query ``i`` may attend to key ``j``, that is
            ``j <= i`` (on and below the diagonal).
        lang: language of the verdict; None for the current one.

    Tests: L = 5, 1, 2 and 8.

    Returns:
        True if it matches :func:`minitransformer.causal_mask`.
    """
    cases = [Case("causal.case.length", (n,), fields={"n": n}) for n in (5, 1, 2, 8)]
    return check(
        "causal_mask", fn, cases, causal_mask, _causal_mistakes(), signature="fn(length)",
        names=("name.mask",), compare=_mask_compare, fallback="causal.fallback", lang=lang,
    )


# ---------------------------------------------------------------- padding
def _padding_mistakes() -> list[Mistake]:
    return [
        Mistake("padding.hint.key_padding", lambda t, p: t == p),
        Mistake("padding.hint.flat", lambda t, p: t != p),
        Mistake("padding.hint.three", lambda t, p: (t != p)[:, None, :]),
        Mistake("padding.hint.keys_last", lambda t, p: (t != p)[:, None, :, None]),
        Mistake("padding.hint.keys_last", lambda t, p: (t != p)[:, :, None, None]),
        Mistake("padding.hint.square", lambda t, p: (t != p)[:, None, :, None]
                & (t != p)[:, None, None, :]),
        Mistake("padding.hint.inverted", lambda t, p: (t == p)[:, None, None, :]),
        Mistake("padding.hint.pad0", lambda t, p: (t != 0)[:, None, None, :]),
        Mistake("padding.hint.pad0", lambda t, p: (t > 0)[:, None, None, :]),
        Mistake("padding.hint.greater", lambda t, p: (t > p)[:, None, None, :]),
        Mistake("padding.hint.numbers", lambda t, p: (t != p)[:, None, None, :].float()),
        Mistake("padding.hint.numbers", lambda t, p: (t != p)[:, None, None, :].long()),
    ]


def _padding_cases() -> list[Case]:
    g = generator(3)
    tokens = torch.randint(6, 20, (3, 7), generator=g)
    tokens[0, 5:] = 0
    tokens[1, 2:] = 0
    other = torch.randint(0, 20, (2, 6), generator=g)
    other[other == 5] = 6
    other[0, 4:] = 5
    other[:, 0] = torch.tensor([0, 0])  # token 0 is real here
    other[1, 1] = 3  # and so is a token below pad_id
    return [
        Case("padding.case.end", (tokens, 0)),
        Case("padding.case.pad5", (other, 5)),
        Case("padding.case.length1", (torch.tensor([[7], [0]]), 0)),
        Case("padding.case.all_pad", (torch.tensor([[4, 9, 1], [1, 1, 1]]), 1)),
    ]


def check_padding_mask(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(tokens, pad_id) -> mask``.

    Args:
        fn: the reader's padding mask: ``tokens`` ``(B, L)`` int64 ids and an int
            ``pad_id``; returns a bool tensor ``(B, 1, 1, L)``, True where the
            token is *not* padding (may be attended to).
        lang: language of the verdict; None for the current one.

    Tests: padding at the end, a pad_id other than 0 (with real tokens 0 and
    below pad_id), length 1, a row of only padding.

    Returns:
        True if it matches :func:`minitransformer.padding_mask`.
    """
    return check(
        "padding_mask", fn, _padding_cases(), padding_mask, _padding_mistakes(),
        signature="fn(tokens, pad_id)", names=("name.mask",), compare=_mask_compare,
        fallback="padding.fallback", lang=lang,
    )
