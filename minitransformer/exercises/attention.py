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
from ._harness import Case, Mistake, check, close, generator, normal
from ._messages import t

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
               invert=False, use_mask=True, post_scale=False, dead="nan", hide_nan=False):
    """Attention with one knob turned: the family of wrong answers. ``axis``
    ``"implicit"`` is what ``F.softmax`` picks without ``dim=`` (the deprecated
    default: 0 for 0-, 1- and 3-axis inputs, else 1)."""
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
    if axis == "implicit":
        axis = 0 if scores.dim() in (0, 1, 3) else 1
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
    if hide_nan:  # NaN weights (a softmax over -inf only) set to 0, as nan_to_num does
        weights = weights.nan_to_num(0.0)
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
def _sdpa_cases() -> list[Case]:
    r = normal(generator(1))

    pad = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 0]])
    dead = torch.tensor([[True, False, True, True], [False, False, False, False],
                         [True, True, False, False]])
    return [
        Case("sdpa.case.plain", (r(2, 5, 8), r(2, 6, 8), r(2, 6, 8))),
        Case("sdpa.case.heads", (r(2, 3, 4, 8), r(2, 3, 6, 8), r(2, 3, 6, 5))),
        Case("sdpa.case.length1", (r(3, 1, 4), r(3, 1, 4), r(3, 1, 4))),
        Case("sdpa.case.causal", (r(2, 5, 4), r(2, 5, 4), r(2, 5, 3)), {"mask": causal_mask(5)}),
        Case("sdpa.case.padding", (r(2, 2, 3, 4), r(2, 2, 6, 4), r(2, 2, 6, 4)),
             {"mask": padding_mask(pad, 0)}),
        Case("sdpa.case.dead_row", (r(3, 4), r(4, 4), r(4, 2)), {"mask": dead}),
        Case("sdpa.case.float64", (r(1, 4, 6, dtype=torch.float64),
                                   r(1, 4, 6, dtype=torch.float64),
                                   r(1, 4, 6, dtype=torch.float64))),
        Case("sdpa.case.large", (r(2, 4, 8, scale=30.0), r(2, 4, 8, scale=30.0), r(2, 4, 8))),
    ]


def _sdpa_mistakes() -> list[Mistake]:
    def swapped(q, k, v, mask=None):
        out, w = scaled_dot_product_attention(q, k, v, mask)
        return w, out

    def knob(**kw):
        return lambda q, k, v, mask=None: _attention(q, k, v, mask, **kw)

    return [
        Mistake("sdpa.hint.swapped", swapped),
        Mistake("sdpa.hint.no_scale", knob(scale=1.0)),
        Mistake("sdpa.hint.scale_d", lambda q, k, v, mask=None: _attention(
            q, k, v, mask, scale=q.shape[-1])),
        Mistake("sdpa.hint.scale_mul", lambda q, k, v, mask=None: _attention(
            q, k, v, mask, scale=1 / math.sqrt(q.shape[-1]))),
        Mistake("sdpa.hint.scale_dv", lambda q, k, v, mask=None: _attention(
            q, k, v, mask, scale=math.sqrt(v.shape[-1]))),
        Mistake("sdpa.hint.post_scale", knob(post_scale=True)),
        Mistake("sdpa.hint.implicit_dim", knob(axis="implicit")),
        Mistake("sdpa.hint.axis", knob(axis=-2)),
        # a dim= written as a number: the implicit choice on some inputs, never on all
        *(Mistake("sdpa.hint.axis", knob(axis=axis, hide_nan=hide)) for axis in (0, 1, 2)
          for hide in (False, True)),
        Mistake("sdpa.hint.no_mask", knob(use_mask=False)),
        Mistake("sdpa.hint.inverted", knob(invert=True)),
        Mistake("sdpa.hint.after", knob(when="after")),
        Mistake("sdpa.hint.fill0", knob(fill=0.0)),
        Mistake("sdpa.hint.nan", knob(), nan="match"),
        Mistake("sdpa.hint.overflow", _naive_exp_attention),
        Mistake("sdpa.hint.overflow", lambda q, k, v, mask=None: _naive_exp_attention(
            q, k, v, mask, hide=True)),
    ]


def _naive_exp_attention(q, k, v, mask=None, hide=False):
    """exp / sum without subtracting the maximum: NaN where exp overflows
    (``hide``: the NaN weights set to 0, as ``nan_to_num`` does)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    e = scores.exp()
    if mask is not None:
        e = e * mask
    w = e / e.sum(-1, keepdim=True)
    dead = _dead_rows(mask, scores.shape)
    w = w.masked_fill(dead, 0.0)
    if hide:
        w = w.nan_to_num(0.0)
    return w @ v, w


def _shape_error(text: str) -> bool:
    return any(s in text for s in ("mat1", "size of tensor", "must match", "shape",
                                   "cannot be multiplied"))


def _sdpa_error(case: Case, exc: BaseException, line: str) -> str | None:
    if not _shape_error(str(exc)):
        return None
    q, k = case.args[:2]
    mask = case.kwargs.get("mask")
    if mask is not None and "mask" in line:
        scores = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
        return t("sdpa.err.mask_shape", mask=tuple(mask.shape), scores=scores)
    return t("sdpa.err.matmul")


def _sdpa_note(results: list) -> str | None:
    # case 5 (index) has a fully masked row: say which convention the reader used
    for _out, w in results[5:6]:
        if bool((w[1] > 0).any()):
            return "sdpa.note.uniform"
    return None


def check_scaled_dot_product_attention(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(q, k, v, mask=None) -> (output, weights)``.

    Args:
        fn: the reader's attention, with q ``(..., Lq, d_k)``, k ``(..., Lk, d_k)``,
            v ``(..., Lk, d_v)`` and an optional bool mask broadcastable to
            ``(..., Lq, Lk)``, True = may attend. It returns the output
            ``(..., Lq, d_v)`` and the weights ``(..., Lq, Lk)`` (after the
            softmax), in the inputs' dtype.
        lang: language of the verdict (see :func:`set_language`); None for
            the current one.

    Tests: batched and per-head inputs, d_v != d_k, length 1, causal and
    padding masks that broadcast, a fully masked row (zeros or uniform weights
    are both accepted there; NaN is not), float64, and large scores.

    Returns:
        True if it matches :func:`minitransformer.scaled_dot_product_attention`.
    """
    return check(
        "scaled_dot_product_attention", fn, _sdpa_cases(),
        lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask),
        _sdpa_mistakes(), signature="fn(q, k, v, mask=None)",
        names=("name.output", "name.weights"),
        compare=_sdpa_compare(1e-5, 1e-4), on_error=_sdpa_error, on_pass=_sdpa_note,
        fallback="sdpa.fallback", lang=lang,
    )


# ---------------------------------------------------------------- masked softmax
def _ms_reference(scores: Tensor, mask: Tensor) -> Tensor:
    if scores.dtype == torch.float16:
        return _softmax_masked(scores.float(), mask).half()
    return _softmax_masked(scores, mask)


def _ms_cases() -> list[Case]:
    g = generator(2)
    r = normal(g, draw=torch.float32)

    def m(*shape, p=0.6):
        keep = torch.rand(*shape, generator=g) < p
        keep[..., 0] = True  # at least one kept entry per row
        return keep

    dead = torch.tensor([[True, True, False], [False, False, False]])
    pad = torch.tensor([[4, 5, 6, 0], [4, 0, 0, 0]])
    # large scores: row 0's largest score is masked; row 1's kept scores are all below
    # -10000; row 2's kept scores overflow exp
    large = torch.tensor([[20000.0, 100.0, -300.0, 5000.0, -20000.0, 50.0],
                          [-15000.0, -18000.0, -16000.0, 3000.0, 8000.0, -14000.0],
                          [15000.0, 9000.0, -2000.0, 12000.0, 100.0, -7000.0]])
    large_mask = torch.tensor([[False, True, True, False, True, True],
                               [True, True, True, False, False, True],
                               [True, False, True, True, True, False]])
    return [
        Case("ms.case.random", (r(3, 5), m(3, 5))),
        Case("ms.case.padding", (r(2, 2, 4, 4), padding_mask(pad, 0))),
        Case("ms.case.causal", (r(2, 6, 6), causal_mask(6))),
        Case("ms.case.length1", (r(4, 1), torch.ones(4, 1, dtype=torch.bool))),
        Case("ms.case.large", (large, large_mask)),
        Case("ms.case.dead_row", (r(2, 3), dead)),
        Case("ms.case.float16", (r(2, 5).half(), m(2, 5))),
    ]


def _ms_naive_exp(s, m, hide=False):
    """exp(s) · mask / sum: overflows for large scores, 0/0 in a fully masked row
    (``hide``: NaN set to 0, as ``nan_to_num`` does)."""
    e = s.float().exp() * m
    p = e / e.sum(-1, keepdim=True)
    return (p.nan_to_num(0.0) if hide else p).to(s.dtype)


def _ms_renormalise(s, m, hide=False):
    """softmax, zero the masked entries, divide by what is left."""
    p = s.float().softmax(-1) * m
    p = p / p.sum(-1, keepdim=True)
    return (p.nan_to_num(0.0) if hide else p).to(s.dtype)


def _ms_over(axis: int):
    """The masked softmax over a numbered axis (``dim=1`` written for the last)."""
    return lambda s, m: s.masked_fill(~m, float("-inf")).softmax(axis)


def _ms_mistakes() -> list[Mistake]:
    def after(s, m):
        return s.softmax(-1).masked_fill(~m.expand(s.shape), 0.0)

    def implicit(s, m):
        dim = 0 if s.dim() in (0, 1, 3) else 1
        return _softmax_masked(s.transpose(dim, -1), m.expand(s.shape).transpose(dim, -1)
                               ).transpose(dim, -1)

    return [
        Mistake("ms.hint.fill0", lambda s, m: s.masked_fill(~m, 0.0).softmax(-1)),
        Mistake("ms.hint.after", after),
        Mistake("ms.hint.inverted", lambda s, m: s.masked_fill(m, float("-inf")).softmax(-1)),
        Mistake("ms.hint.no_mask", lambda s, m: s.softmax(-1)),
        Mistake("ms.hint.implicit_dim", implicit),
        Mistake("ms.hint.axis", lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-2)),
        *(Mistake("ms.hint.axis", _ms_over(axis)) for axis in (0, 1)),
        Mistake("ms.hint.weak_fill", lambda s, m: s.masked_fill(~m, -10000.0).softmax(-1)),
        Mistake("ms.hint.nan", lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-1),
                nan="match"),
        # NaN must be where these put it (or hidden as 0), else they explain too much
        Mistake("ms.hint.overflow", _ms_naive_exp, nan="match"),
        Mistake("ms.hint.overflow", lambda s, m: _ms_naive_exp(s, m, hide=True)),
        Mistake("ms.hint.renormalise", _ms_renormalise, nan="match"),
        Mistake("ms.hint.renormalise", lambda s, m: _ms_renormalise(s, m, hide=True)),
        Mistake("ms.hint.uniform", lambda s, m: _softmax_masked(s, m, dead="uniform")),
    ]


def _ms_error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "overflow" in text or "Half" in text:
        return t("ms.err.half_fill")
    if _shape_error(text) and "mask" in line:
        return t("ms.err.mask_shape")
    return None


def check_masked_softmax(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(scores, mask) -> probabilities``.

    Args:
        fn: the reader's masked softmax. ``scores`` ``(..., L)`` float; ``mask``
            bool, broadcastable to ``scores``, True = keep (may attend). Returns
            the softmax over the last axis of ``scores`` with masked entries
            at exactly 0, same shape and dtype as ``scores``. A row whose
            every entry is masked must come out as zeros (not NaN).
        lang: language of the verdict; None for the current one.

    Tests: random masks, broadcast padding and causal masks, length 1, scores
    of size ±20000 (a -10000 fill is not enough; a row's largest score is
    masked), a fully masked row and float16 scores (-1e9 does not fit in
    float16).

    Returns:
        True on a pass.
    """
    def compare(got, expected, case, nan):
        tol = 2e-3 if expected.dtype == torch.float16 else 1e-5
        return close(got, expected, tol, tol, nan)

    return check(
        "masked_softmax", fn, _ms_cases(), _ms_reference, _ms_mistakes(),
        signature="fn(scores, mask)", names=("name.probabilities",), compare=compare,
        on_error=_ms_error, fallback="ms.fallback", lang=lang,
    )
