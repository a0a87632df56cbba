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


_CAUSAL_HINTS = {
    "inverted": (
        "the mask is inverted: True must mean *may attend*, so it is True on and below "
        "the diagonal (query i sees keys j <= i). You returned True for the future, "
        "which is nn.Transformer's convention (True = blocked)."
    ),
    "strict": (
        "the diagonal is False: a position may attend to itself (j <= i, not j < i). "
        "Use torch.tril(..., diagonal=0)."
    ),
    "upper": (
        "you kept the upper triangle: rows are queries and columns keys, so query i may "
        "see columns 0..i, the lower triangle: torch.ones(L, L, dtype=torch.bool).tril()."
    ),
    "additive": (
        "you returned the additive float form (0 where allowed, -inf where blocked); this "
        "exercise asks for the bool mask, True = may attend. "
        "minitransformer.to_additive_mask converts one into the other."
    ),
    "float01": (
        "you returned a float 0/1 tensor; return a bool tensor (dtype=torch.bool), True "
        "= may attend. A float mask would be *added* to the scores by the attention."
    ),
}


def _causal_mistakes() -> list[Mistake]:
    h = _CAUSAL_HINTS

    def ones(n: int) -> Tensor:
        return torch.ones(n, n, dtype=torch.bool)

    return [
        Mistake(h["additive"], lambda n: torch.zeros(n, n).masked_fill(~causal_mask(n),
                                                                       float("-inf"))),
        Mistake(h["float01"], lambda n: causal_mask(n).float()),
        Mistake(h["inverted"], lambda n: ~causal_mask(n)),
        Mistake(h["strict"], lambda n: ones(n).tril(-1)),
        Mistake(h["upper"], lambda n: ones(n).triu()),
    ]


def _causal_compare(got, expected, case, nan):
    """Masks must be equal. When matching a mistake (``nan != "none"``), float
    forms are compared by value, so a float 0/1 or 0/-inf answer is named."""
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        return False
    if nan == "none":
        return got.dtype == torch.bool and bool(torch.equal(got, expected))
    if got.dtype.is_floating_point != expected.dtype.is_floating_point:
        return False
    return bool(torch.equal(got.double(), expected.double()))


def check_causal_mask(fn: Callable) -> bool:
    """Check ``fn(length) -> mask``.

    Args:
        fn: the reader's causal mask: given an int ``length`` L, a bool tensor
            ``(L, L)``, True where query ``i`` may attend to key ``j``, that is
            ``j <= i`` (on and below the diagonal).

    Tests: L = 5, 1, 2 and 8.

    Returns:
        True if it matches :func:`minitransformer.causal_mask`.
    """
    cases = [Case(f"length {n}", (n,)) for n in (5, 1, 2, 8)]
    return check(
        "causal_mask", fn, cases, causal_mask, _causal_mistakes(),
        names=("the mask",), compare=_causal_compare,
        fallback="Row i (a query) must be True in columns 0..i and False after.",
    )


# ---------------------------------------------------------------- padding
_PAD_HINTS = {
    "inverted": (
        "the mask is inverted: True must mean *may attend*, i.e. a real token "
        "(tokens != pad_id). True at padding is nn.MultiheadAttention's key_padding_mask "
        "convention, the opposite of this book's."
    ),
    "flat": (
        "the mask has shape (B, L); give it two singleton axes, (B, 1, 1, L), so that it "
        "broadcasts over the heads and the queries of the (B, H, Lq, L) scores: "
        "(tokens != pad_id)[:, None, None, :]."
    ),
    "three": (
        "the mask has shape (B, 1, L); it needs one more singleton axis, (B, 1, 1, L), to "
        "broadcast against (B, H, Lq, L) scores (heads and queries)."
    ),
    "keys_last": (
        "the length axis is in the wrong place: padding hides *keys*, and keys are the "
        "last axis of the scores, so the mask is (B, 1, 1, L), not (B, 1, L, 1)."
    ),
    "pad0": (
        "you compared with 0 instead of the pad_id argument: here pad_id is 5, and 0 is "
        "an ordinary token."
    ),
    "key_padding": (
        "you returned nn.MultiheadAttention's key_padding_mask, (B, L) with True at "
        "padding. This book's mask is the opposite, True = real token, and has shape "
        "(B, 1, 1, L): (tokens != pad_id)[:, None, None, :]."
    ),
}


def _padding_mistakes() -> list[Mistake]:
    h = _PAD_HINTS
    return [
        Mistake(h["key_padding"], lambda t, p: t == p),
        Mistake(h["flat"], lambda t, p: t != p),
        Mistake(h["three"], lambda t, p: (t != p)[:, None, :]),
        Mistake(h["keys_last"], lambda t, p: (t != p)[:, None, :, None]),
        Mistake(h["inverted"], lambda t, p: (t == p)[:, None, None, :]),
        Mistake(h["pad0"], lambda t, p: (t != 0)[:, None, None, :]),
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
    return [
        Case("tokens (3, 7) padded with pad_id 0 at the end", (tokens, 0)),
        Case("tokens (2, 6) with pad_id 5 (and some real tokens equal to 0)", (other, 5)),
        Case("length 1: tokens (2, 1) = [[7], [0]], pad_id 0",
             (torch.tensor([[7], [0]]), 0)),
        Case("a row that is all padding: tokens (2, 3), pad_id 1",
             (torch.tensor([[4, 9, 1], [1, 1, 1]]), 1)),
    ]


def check_padding_mask(fn: Callable) -> bool:
    """Check ``fn(tokens, pad_id) -> mask``.

    Args:
        fn: the reader's padding mask: ``tokens`` ``(B, L)`` int64 ids and an int
            ``pad_id``; returns a bool tensor ``(B, 1, 1, L)``, True where the
            token is *not* padding (may be attended to).

    Tests: padding at the end, a pad_id other than 0, length 1, a row of only
    padding.

    Returns:
        True if it matches :func:`minitransformer.padding_mask`.
    """
    return check(
        "padding_mask", fn, _padding_cases(), padding_mask, _padding_mistakes(),
        names=("the mask",),
        fallback="The mask is (tokens != pad_id)[:, None, None, :].",
    )
