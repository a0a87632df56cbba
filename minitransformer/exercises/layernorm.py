"""Checker for layer normalisation.

Ba, Kiros and Hinton (2016): y = (x − E[x]) / √(Var[x] + ε) · α + β over the
last (feature) axis of each token, with the *biased* variance. Reference:
:class:`minitransformer.LayerNorm` (equal to ``torch.nn.LayerNorm``).

Shape letters: ``D`` features; ``...`` any leading axes (batch, length).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..layernorm import LayerNorm
from ._harness import Case, Mistake, check, generator

__all__ = ["check_layer_norm"]


def _reference(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    norm = LayerNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        return norm(x)


def _ln(x, w, b, eps=1e-5, *, unbiased=False, eps_outside=False, dims=(-1,),
        swap=False, affine=True, naive_var=False):
    """Layer norm with one knob turned: the family of wrong answers."""
    mean = x.mean(dim=dims, keepdim=True)
    if naive_var:
        var = (x * x).mean(dim=dims, keepdim=True) - mean * mean
    elif unbiased and x.shape[-1] == 1:  # D − 1 = 0: what torch.var gives, without its warning
        var = torch.full_like(mean, float("nan"))
    else:
        var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    y = (x - mean) / (var.sqrt() + eps) if eps_outside else (x - mean) / (var + eps).sqrt()
    if not affine:
        return y
    return y * b + w if swap else y * w + b


_HINTS = {
    "unbiased": (
        "you used the unbiased variance (dividing by D − 1), which torch.var and "
        "Tensor.std use by default. LayerNorm uses the biased one, dividing by D: "
        "x.var(dim=-1, keepdim=True, unbiased=False) (or correction=0)."
    ),
    "eps_outside": (
        "ε is added outside the square root: the formula is (x − mean) / √(Var + ε), "
        "not (x − mean) / (√Var + ε)."
    ),
    "no_eps": (
        "a constant row (all features equal) gives NaN: its variance is 0, so add eps "
        "inside the square root: √(Var + ε)."
    ),
    "eps_fixed": (
        "the eps argument is ignored: this test passes eps=0.5. Use the argument, not a "
        "hard-coded 1e-5."
    ),
    "axis_all": (
        "the statistics are taken over the whole tensor; LayerNorm normalises each token "
        "separately, over its last (feature) axis: mean(dim=-1, keepdim=True)."
    ),
    "axis_len": (
        "the statistics are taken over the wrong axis (the sequence, dim=-2, or the "
        "batch, dim=0); LayerNorm uses each token's own features, dim=-1."
    ),
    "swap": "weight and bias are swapped: y = x̂ · weight + bias (α scales, β shifts).",
    "no_affine": "weight and bias are not applied: finish with x̂ * weight + bias.",
    "naive_var": (
        "the variance computed as E[x²] − E[x]² loses precision when the mean is large "
        "(here every feature is about 3000): subtract the mean first, mean((x − mean)²), "
        "or use x.var(dim=-1, unbiased=False)."
    ),
}


def _cases() -> list[Case]:
    g = generator(6)

    def r(*shape, scale=1.0, shift=0.0, dtype=torch.float32):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift).to(dtype)

    def wb(d, dtype=torch.float32):
        return 1.0 + 0.5 * r(d, dtype=dtype), r(d, dtype=dtype)

    const = r(3, 6)
    const[1] = 2.5  # one token whose features are all equal
    return [
        Case("x (2, 3, 8), random weight and bias", (r(2, 3, 8), *wb(8))),
        Case("odd width: x (4, 7)", (r(4, 7, scale=3.0, shift=1.0), *wb(7))),
        Case("four axes: x (2, 2, 3, 6)", (r(2, 2, 3, 6), *wb(6))),
        Case("a constant row: x (3, 6) whose second row is all 2.5", (const, *wb(6))),
        Case("eps=0.5 with small features (x of size ~0.3)", (r(2, 5, scale=0.3), *wb(5)),
             {"eps": 0.5}),
        Case("width 1: x (3, 1)", (r(3, 1), *wb(1))),
        Case("a large mean: x (2, 4, 8) = 3000 + noise", (r(2, 4, 8, shift=3000.0), *wb(8))),
        Case("float64: x (2, 5)", (r(2, 5, dtype=torch.float64), *wb(5, torch.float64))),
    ]


def _mistakes() -> list[Mistake]:
    h = _HINTS

    return [
        Mistake(h["unbiased"], lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, unbiased=True)),
        Mistake(h["eps_outside"], lambda x, w, b, eps=1e-5: _ln(x, w, b, eps,
                                                                 eps_outside=True)),
        Mistake(h["no_eps"], lambda x, w, b, eps=1e-5: _ln(x, w, b, 0.0), nan="match"),
        Mistake(h["eps_fixed"], lambda x, w, b, eps=1e-5: _ln(x, w, b, 1e-5)),
        Mistake(h["swap"], lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, swap=True)),
        Mistake(h["no_affine"], lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, affine=False)),
        Mistake(h["axis_all"], lambda x, w, b, eps=1e-5: _ln(x, w, b, eps,
                                                              dims=tuple(range(x.dim())))),
        Mistake(h["axis_len"], lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, dims=(-2,))),
        Mistake(h["axis_len"], lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, dims=(0,))),
        Mistake(h["naive_var"], lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, naive_var=True)),
    ]


def _error(case: Case, exc: BaseException) -> str | None:
    text = str(exc)
    if isinstance(exc, TypeError) and "argument" in text:
        return "the function must have the signature fn(x, weight, bias, eps=1e-5)."
    if "size of tensor" in text or "must match" in text:
        return ("a broadcasting error: keep the reduced axis with keepdim=True, so the mean "
                "and variance have shape (..., 1) and subtract from (..., D).")
    return None


def check_layer_norm(fn: Callable) -> bool:
    """Check ``fn(x, weight, bias, eps=1e-5) -> y``.

    Args:
        fn: the reader's layer norm: ``x`` ``(..., D)``, ``weight`` (α) and
            ``bias`` (β) ``(D,)``, ``eps`` a float; returns ``(..., D)``,
            ``(x − mean) / √(var + eps) · weight + bias`` with mean and the
            *biased* variance over the last axis, in ``x``'s dtype.

    Tests: 2-, 3- and 4-axis inputs, an odd width and width 1, a constant row,
    eps=0.5, features around 3000 (cancellation), float64.

    Returns:
        True if it matches :class:`minitransformer.LayerNorm` (= ``nn.LayerNorm``).
    """
    return check(
        "layer_norm", fn, _cases(), _reference, _mistakes(), names=("y",),
        atol=1e-3, rtol=1e-3, on_error=_error,
        fallback="Compute mean and biased variance over dim=-1 (keepdim=True), then "
                 "(x - mean) / torch.sqrt(var + eps) * weight + bias.",
    )
