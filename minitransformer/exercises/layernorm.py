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
from ._harness import Case, Mistake, check, generator, normal
from ._messages import t

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


def _cases() -> list[Case]:
    r = normal(generator(6))

    def wb(d, dtype=torch.float32):
        return 1.0 + 0.5 * r(d, dtype=dtype), r(d, dtype=dtype)

    const = r(3, 6)
    const[1] = 2.5  # one token whose features are all equal
    return [
        Case("ln.case.plain", (r(2, 3, 8), *wb(8))),
        Case("ln.case.odd", (r(4, 7, scale=3.0, shift=1.0), *wb(7))),
        Case("ln.case.four_axes", (r(2, 2, 3, 6), *wb(6))),
        Case("ln.case.constant", (const, *wb(6))),
        Case("ln.case.eps", (r(2, 5, scale=0.3), *wb(5)), {"eps": 0.5}),
        Case("ln.case.width1", (r(3, 1), *wb(1))),
        Case("ln.case.large_mean", (r(2, 4, 8, shift=3000.0), *wb(8))),
        Case("ln.case.float64", (r(2, 5, dtype=torch.float64), *wb(5, torch.float64))),
    ]


def _mistakes() -> list[Mistake]:
    def knob(**kw):
        return lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, **kw)

    return [
        Mistake("ln.hint.unbiased", knob(unbiased=True)),
        Mistake("ln.hint.eps_outside", knob(eps_outside=True)),
        Mistake("ln.hint.no_eps", lambda x, w, b, eps=1e-5: _ln(x, w, b, 0.0), nan="match"),
        Mistake("ln.hint.eps_fixed", lambda x, w, b, eps=1e-5: _ln(x, w, b, 1e-5)),
        Mistake("ln.hint.swap", knob(swap=True)),
        Mistake("ln.hint.no_affine", knob(affine=False)),
        Mistake("ln.hint.axis_all", lambda x, w, b, eps=1e-5: _ln(x, w, b, eps,
                                                                   dims=tuple(range(x.dim())))),
        Mistake("ln.hint.axis_len", knob(dims=(-2,))),
        Mistake("ln.hint.axis_len", knob(dims=(0,))),
        Mistake("ln.hint.naive_var", knob(naive_var=True)),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "size of tensor" in text or "must match" in text:
        return t("ln.err.keepdim")
    return None


def check_layer_norm(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(x, weight, bias, eps=1e-5) -> y``.

    Args:
        fn: the reader's layer norm: ``x`` ``(..., D)``, ``weight`` (α) and
            ``bias`` (β) ``(D,)``, ``eps`` a float; returns ``(..., D)``,
            ``(x − mean) / √(var + eps) · weight + bias`` with mean and the
            *biased* variance over the last axis, in ``x``'s dtype.
        lang: language of the verdict; None for the current one.

    Tests: 2-, 3- and 4-axis inputs, an odd width and width 1, a constant row,
    eps=0.5, features around 3000 (cancellation), float64.

    Returns:
        True if it matches :class:`minitransformer.LayerNorm` (= ``nn.LayerNorm``).
    """
    return check(
        "layer_norm", fn, _cases(), _reference, _mistakes(),
        signature="fn(x, weight, bias, eps=1e-5)", names=("name.y",),
        atol=1e-3, rtol=1e-3, on_error=_error, fallback="ln.fallback", lang=lang,
    )
