"""Checkers for scaled dot-product attention and the masked softmax.

Vaswani et al. (2017), section 3.2.1: Attention(Q, K, V) = softmax(QKᵀ/√d_k) V.
Reference: :func:`minitransformer.attention.scaled_dot_product_attention`.

Shape letters: ``B`` batch, ``H`` heads, ``Lq``/``Lk`` query/key lengths,
``d_k`` key width, ``d_v`` value width.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ._harness import Case, Mistake, check, close, generator

__all__ = ["check_scaled_dot_product_attention", "check_masked_softmax"]


# ---------------------------------------------------------------- helpers
def _dead_rows(mask: Tensor | None, shape: torch.Size) -> Tensor:
    """``(..., Lq, 1)`` bool, True where a query may attend to no key."""
    if mask is None:
        return torch.zeros(*shape[:-1], 1, dtype=torch.bool)
    return ~mask.expand(shape).any(dim=-1, keepdim=True)


def _softmax_masked(scores: Tensor, mask: Tensor | None, dead: str = "zero") -> Tensor:
    """Reference masked softmax over the last axis.

    ``dead``: what a fully masked row becomes: ``"zero"`` (the package),
    ``"uniform"`` (what a large finite fill such as -1e9 gives) or ``"nan"``
    (what filling with -inf alone gives).
    """
    if mask is None:
        return scores.softmax(dim=-1)
    mask = mask.expand(scores.shape)
    if dead == "uniform":
        filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        return filled.softmax(dim=-1)
    p = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    if dead == "zero":
        p = p.nan_to_num(nan=0.0)
    return p


def _attention(q, k, v, mask=None, *, scale=None, axis=-1, fill="-inf", when="before",
               invert=False, use_mask=True, post_scale=False, dead="nan"):
    """Attention with one knob turned: the family of wrong answers."""
    d_k = q.shape[-1]
    scale = math.sqrt(d_k) if scale is None else scale
    scores = q @ k.transpose(-2, -1)
    if not post_scale:
        scores = scores / scale
    if mask is not None and use_mask:
        mask = mask.expand(scores.shape)
        if invert:
            mask = ~mask
    else:
        mask = None
    if mask is not None and when == "before":
        if fill == "-inf":
            weights = _softmax_masked(scores, mask, dead=dead) if axis == -1 else (
                scores.masked_fill(~mask, float("-inf")).softmax(dim=axis))
        else:
            weights = scores.masked_fill(~mask, float(fill)).softmax(dim=axis)
    else:
        weights = scores.softmax(dim=axis)
        if mask is not None:  # applied after the softmax
            weights = weights.masked_fill(~mask, 0.0)
    if post_scale:
        weights = weights / scale
    return weights @ v, weights


def _sdpa_compare(atol: float, rtol: float):
    """Accept zeros (the package) or uniform weights (a -1e9 fill) in fully
    masked rows; everywhere else the reader must match the reference."""

    def compare(got, expected, case: Case, nan: str) -> bool:
        if nan != "none":
            return close(got, expected, atol, rtol, nan)
        if close(got, expected, atol, rtol):
            return True
        q, k, v = case.args[:3]
        mask = case.kwargs.get("mask")
        if mask is None:
            return False
        uniform = _attention(q, k, v, mask, dead="uniform")
        dead = _dead_rows(mask, (q @ k.transpose(-2, -1)).shape)  # (..., Lq, 1)
        out_g, w_g = got
        out_z, w_z = expected
        out_u, w_u = uniform
        if not (isinstance(out_g, Tensor) and isinstance(w_g, Tensor)):
            return False
        for g, z, u in ((out_g, out_z, out_u), (w_g, w_z, w_u)):
            d = dead.expand(g.shape)
            g, z, u = g.double(), z.double(), u.double()
            ok_z = torch.isclose(g, z, atol=atol, rtol=rtol)
            ok_u = torch.isclose(g, u, atol=atol, rtol=rtol)
            if not bool(torch.where(d, ok_z.all(-1, keepdim=True).expand_as(d)
                                    | ok_u.all(-1, keepdim=True).expand_as(d), ok_z).all()):
                return False
        return True

    return compare


# ---------------------------------------------------------------- attention
_SDPA_HINTS = {
    "swapped": "you returned (weights, output); return (output, weights) in that order.",
    "no_scale": (
        "the scores are not scaled: divide q @ kᵀ by √d_k = math.sqrt(q.shape[-1]) "
        "before the softmax. Without it the scores' variance grows with d_k and the "
        "softmax saturates."
    ),
    "scale_d": (
        "you divided the scores by d_k; divide by its square root √d_k. The variance of "
        "q·k is d_k, so its standard deviation, the size to undo, is √d_k."
    ),
    "scale_mul": "you multiplied the scores by √d_k; divide by it.",
    "scale_dv": (
        "you scaled by the square root of v's width; the scale is √d_k, with d_k the "
        "width of q and k (q.shape[-1])."
    ),
    "post_scale": (
        "you divided the weights by √d_k after the softmax; the scaling belongs to the "
        "scores, before the softmax (and afterwards the rows no longer sum to 1)."
    ),
    "axis": (
        "softmax over the wrong axis: each query's row of weights must sum to 1 over "
        "the keys, the last axis of the (..., Lq, Lk) scores: softmax(dim=-1)."
    ),
    "no_mask": "the mask is ignored: blocked keys still get weight. Apply it to the scores.",
    "inverted": (
        "the mask is inverted: in this book True means *may attend* (as in "
        "F.scaled_dot_product_attention), so fill the scores where the mask is False "
        "(scores.masked_fill(~mask, ...)). nn.MultiheadAttention uses the opposite "
        "convention."
    ),
    "after": (
        "the mask is applied after the softmax: zeroing weights afterwards leaves rows "
        "that no longer sum to 1. Fill the blocked scores with -inf (or a very negative "
        "number) before the softmax."
    ),
    "fill0": (
        "blocked scores are filled with 0, but exp(0) = 1: blocked keys still get weight. "
        "Fill them with -inf (or torch.finfo(scores.dtype).min) before the softmax."
    ),
    "nan": (
        "a query whose keys are all masked gets NaN: the softmax of a row of only -inf "
        "is 0/0. Fill with a large finite negative number (torch.finfo(dtype).min), or "
        "set such rows to zero after the softmax (as the package does)."
    ),
    "overflow": (
        "your softmax overflows on large scores: exp(1000) is inf in float32, and "
        "inf/inf is NaN. Subtract each row's maximum before exp (softmax is unchanged by "
        "it), or use torch.softmax, which does."
    ),
}


def _sdpa_cases() -> list[Case]:
    g = generator(1)

    def r(*shape, dtype=torch.float32, scale=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)

    pad = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 0]])
    dead = torch.tensor([[True, False, True, True], [False, False, False, False],
                         [True, True, False, False]])
    return [
        Case("q (2, 5, 8), k and v (2, 6, 8), no mask", (r(2, 5, 8), r(2, 6, 8), r(2, 6, 8))),
        Case("heads: q (2, 3, 4, 8), k (2, 3, 6, 8), v (2, 3, 6, 5), d_v != d_k, no mask",
             (r(2, 3, 4, 8), r(2, 3, 6, 8), r(2, 3, 6, 5))),
        Case("length 1: q, k, v of shape (3, 1, 4)", (r(3, 1, 4), r(3, 1, 4), r(3, 1, 4))),
        Case("causal mask (5, 5) broadcast over a batch of 2, d_k 4",
             (r(2, 5, 4), r(2, 5, 4), r(2, 5, 3)), {"mask": causal_mask(5)}),
        Case("padding mask (2, 1, 1, 6) broadcast over 2 heads and 3 queries",
             (r(2, 2, 3, 4), r(2, 2, 6, 4), r(2, 2, 6, 4)), {"mask": padding_mask(pad, 0)}),
        Case("a fully masked row: mask (3, 4) whose second row is all False",
             (r(3, 4), r(4, 4), r(4, 2)), {"mask": dead}),
        Case("float64 inputs (1, 4, 6)",
             (r(1, 4, 6, dtype=torch.float64), r(1, 4, 6, dtype=torch.float64),
              r(1, 4, 6, dtype=torch.float64))),
        Case("large scores: q, k entries of size ~30 (|q·k/√d_k| up to ~1000)",
             (r(2, 4, 8, scale=30.0), r(2, 4, 8, scale=30.0), r(2, 4, 8))),
    ]


def _sdpa_mistakes() -> list[Mistake]:
    h = _SDPA_HINTS

    def swapped(q, k, v, mask=None):
        out, w = scaled_dot_product_attention(q, k, v, mask)
        return w, out

    return [
        Mistake(h["swapped"], swapped),
        Mistake(h["no_scale"], lambda q, k, v, mask=None: _attention(q, k, v, mask, scale=1.0)),
        Mistake(h["scale_d"], lambda q, k, v, mask=None: _attention(q, k, v, mask,
                                                                     scale=q.shape[-1])),
        Mistake(h["scale_mul"], lambda q, k, v, mask=None: _attention(
            q, k, v, mask, scale=1 / math.sqrt(q.shape[-1]))),
        Mistake(h["scale_dv"], lambda q, k, v, mask=None: _attention(
            q, k, v, mask, scale=math.sqrt(v.shape[-1]))),
        Mistake(h["post_scale"], lambda q, k, v, mask=None: _attention(q, k, v, mask,
                                                                        post_scale=True)),
        Mistake(h["axis"], lambda q, k, v, mask=None: _attention(q, k, v, mask, axis=-2)),
        Mistake(h["no_mask"], lambda q, k, v, mask=None: _attention(q, k, v, mask,
                                                                     use_mask=False)),
        Mistake(h["inverted"], lambda q, k, v, mask=None: _attention(q, k, v, mask,
                                                                      invert=True)),
        Mistake(h["after"], lambda q, k, v, mask=None: _attention(q, k, v, mask,
                                                                   when="after")),
        Mistake(h["fill0"], lambda q, k, v, mask=None: _attention(q, k, v, mask, fill=0.0)),
        Mistake(h["nan"], lambda q, k, v, mask=None: _attention(q, k, v, mask), nan="match"),
        Mistake(h["overflow"], _naive_exp_attention),
    ]


def _naive_exp_attention(q, k, v, mask=None):
    """exp / sum without subtracting the maximum: NaN where exp overflows."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    e = scores.exp()
    if mask is not None:
        e = e * mask
    w = e / e.sum(-1, keepdim=True)
    dead = _dead_rows(mask, scores.shape)
    w = w.masked_fill(dead, 0.0)
    return w @ v, w


def _sdpa_error(case: Case, exc: BaseException) -> str | None:
    text = str(exc)
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return ("the function must have the signature fn(q, k, v, mask=None): the mask is "
                "passed by keyword, and is optional.")
    if "mat1" in text or "size of tensor" in text or "must match" in text or "shape" in text:
        return ("a shape mismatch in a matrix product: scores = q @ k.transpose(-2, -1) "
                "(k.T reverses *all* axes of a batched tensor), then weights @ v.")
    return None


def _sdpa_note(results: list) -> str | None:
    # case 5 (index) has a fully masked row: say which convention the reader used
    for _out, w in results[5:6]:
        if bool((w[1] > 0).any()):
            return ("your fully masked row is uniform (1/Lk each), as a large finite "
                    "fill gives; the package returns zeros there. Both are accepted: "
                    "such a query has nothing to attend to, and padding queries are "
                    "ignored by the loss.")
    return None


def check_scaled_dot_product_attention(fn: Callable) -> bool:
    """Check ``fn(q, k, v, mask=None) -> (output, weights)``.

    Args:
        fn: the reader's attention, with q ``(..., Lq, d_k)``, k ``(..., Lk, d_k)``,
            v ``(..., Lk, d_v)`` and an optional bool mask broadcastable to
            ``(..., Lq, Lk)``, True = may attend. It returns the output
            ``(..., Lq, d_v)`` and the weights ``(..., Lq, Lk)`` (after the
            softmax), in the inputs' dtype.

    Tests: batched and per-head inputs, d_v != d_k, length 1, causal and
    padding masks that broadcast, a fully masked row (zeros or uniform weights
    are both accepted there; NaN is not), float64, and large scores.

    Returns:
        True if it matches :func:`minitransformer.scaled_dot_product_attention`.
    """
    return check(
        "scaled_dot_product_attention", fn, _sdpa_cases(),
        lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask),
        _sdpa_mistakes(), names=("output", "weights"),
        compare=_sdpa_compare(1e-5, 1e-4), on_error=_sdpa_error, on_pass=_sdpa_note,
        fallback="Compare with softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k)) @ v, "
                 "step by step.",
    )


# ---------------------------------------------------------------- masked softmax
_MS_HINTS = {
    "fill0": _SDPA_HINTS["fill0"],
    "after": (
        "the mask is applied after the softmax: the kept entries of a row no longer sum "
        "to 1. Fill the masked scores with -inf before the softmax."
    ),
    "inverted": (
        "the mask is inverted: True means *keep* (may attend); fill where the mask is "
        "False: scores.masked_fill(~mask, float('-inf'))."
    ),
    "no_mask": "the mask is ignored: masked entries still get probability.",
    "axis": "softmax over the wrong axis: normalise over the last axis (dim=-1).",
    "weak_fill": (
        "your fill value is not negative enough: here the scores reach about ±20000, so "
        "entries filled with -10000 still win probability. Use float('-inf') or "
        "torch.finfo(scores.dtype).min, which no score can beat."
    ),
    "nan": (
        "a fully masked row comes out as NaN: the softmax of only -inf is 0/0. Set such "
        "rows to zero, e.g. probs.nan_to_num(0.0) or masked_fill on the rows where "
        "~mask.any(-1)."
    ),
    "uniform": (
        "a fully masked row must be all zeros; yours spreads 1/L over masked entries "
        "(what a finite fill such as -1e9 gives when every entry ties). Zero the rows "
        "where no entry is kept."
    ),
}


def _ms_reference(scores: Tensor, mask: Tensor) -> Tensor:
    if scores.dtype == torch.float16:
        return _softmax_masked(scores.float(), mask).half()
    return _softmax_masked(scores, mask)


def _ms_cases() -> list[Case]:
    g = generator(2)

    def r(*shape, scale=1.0):
        return torch.randn(*shape, generator=g) * scale

    def m(*shape, p=0.6):
        keep = torch.rand(*shape, generator=g) < p
        keep[..., 0] = True  # at least one kept entry per row
        return keep

    dead = torch.tensor([[True, True, False], [False, False, False]])
    pad = torch.tensor([[4, 5, 6, 0], [4, 0, 0, 0]])
    return [
        Case("scores (3, 5), random mask (3, 5)", (r(3, 5), m(3, 5))),
        Case("scores (2, 2, 4, 4) with a padding mask (2, 1, 1, 4)",
             (r(2, 2, 4, 4), padding_mask(pad, 0))),
        Case("causal mask (6, 6) on scores (2, 6, 6)", (r(2, 6, 6), causal_mask(6))),
        Case("length 1: scores (4, 1), mask all True", (r(4, 1), torch.ones(4, 1, dtype=bool))),
        Case("large scores (about ±20000), mask (3, 6)", (r(3, 6, scale=20000.0), m(3, 6))),
        Case("a fully masked row: mask (2, 3) whose second row is all False",
             (r(2, 3), dead)),
        Case("float16 scores (2, 5)", (r(2, 5).half(), m(2, 5))),
    ]


def _ms_mistakes() -> list[Mistake]:
    h = _MS_HINTS

    def after(s, m):
        return s.softmax(-1).masked_fill(~m.expand(s.shape), 0.0)

    return [
        Mistake(h["fill0"], lambda s, m: s.masked_fill(~m, 0.0).softmax(-1)),
        Mistake(h["after"], after),
        Mistake(h["inverted"], lambda s, m: s.masked_fill(m, float("-inf")).softmax(-1)),
        Mistake(h["no_mask"], lambda s, m: s.softmax(-1)),
        Mistake(h["axis"], lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-2)),
        Mistake(h["weak_fill"], lambda s, m: s.masked_fill(~m, -10000.0).softmax(-1)),
        Mistake(h["nan"], lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-1),
                nan="match"),
        Mistake(h["uniform"], lambda s, m: _softmax_masked(s, m, dead="uniform")),
    ]


def _ms_error(case: Case, exc: BaseException) -> str | None:
    text = str(exc)
    if "overflow" in text or "Half" in text:
        return ("your fill value does not fit in float16 (largest magnitude 65504): -1e9 "
                "overflows. Use float('-inf') or torch.finfo(scores.dtype).min.")
    if isinstance(exc, TypeError) and "argument" in text:
        return "the function must have the signature fn(scores, mask)."
    return None


def check_masked_softmax(fn: Callable) -> bool:
    """Check ``fn(scores, mask) -> probabilities``.

    Args:
        fn: the reader's masked softmax. ``scores`` ``(..., L)`` float; ``mask``
            bool, broadcastable to ``scores``, True = keep (may attend). Returns
            the softmax over the last axis of ``scores`` with masked entries
            at exactly 0, same shape and dtype as ``scores``. A row whose
            every entry is masked must come out as zeros (not NaN).

    Tests: random masks, broadcast padding and causal masks, length 1, scores
    of size ±20000 (a -10000 fill is not enough), a fully masked row and
    float16 scores (-1e9 does not fit in float16).

    Returns:
        True on a pass.
    """
    def compare(got, expected, case, nan):
        tol = 2e-3 if expected.dtype == torch.float16 else 1e-5
        return close(got, expected, tol, tol, nan)

    return check(
        "masked_softmax", fn, _ms_cases(), _ms_reference, _ms_mistakes(),
        names=("the probabilities",), compare=compare, on_error=_ms_error,
        fallback="Fill the scores where mask is False with -inf, softmax over dim=-1, "
                 "then zero the fully masked rows.",
    )
