"""Checker for root-mean-square normalisation (RMSNorm).

Zhang and Sennrich (2019): y = x / √(mean(x²) + ε) · g over the last
(feature) axis of each token: LayerNorm without the mean (nothing is
subtracted) and without the shift β. Reference:
:class:`minitransformer.RMSNorm` (``F.rms_norm``, equal to
``torch.nn.RMSNorm``).

Shape letters: ``D`` features; ``...`` any leading axes (batch, length).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..layernorm import RMSNorm
from ._harness import Case, Mistake, check, generator, normal
from ._messages import t

__all__ = ["check_rms_norm"]


def _reference(x: Tensor, weight: Tensor, eps: float = 1e-5) -> Tensor:
    norm = RMSNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        return norm(x)


def _rms(x, w, eps=1e-5, *, center=False, denominator="ms", eps_outside=False, dims=(-1,),
         weight="after"):
    """RMSNorm with one knob turned: the family of wrong answers.

    ``center``: subtract the mean first (LayerNorm without β). ``denominator``:
    what is divided by, before the square root: "ms" mean(x²) (right), "sum"
    Σx², "var" the biased variance, "unbiased" the unbiased one,
    "mean_squared" mean(x)², or "ms_no_sqrt" mean(x²) with no square root.
    ``weight``: "after" (right), "none", "one_plus" (x̂ · (1 + g)),
    "before" (normalise x · g).
    """
    if weight == "before":
        x = x * w
    if center:
        x = x - x.mean(dim=dims, keepdim=True)
    if denominator in ("ms", "ms_no_sqrt"):
        d = (x * x).mean(dim=dims, keepdim=True)
    elif denominator == "sum":
        d = (x * x).sum(dim=dims, keepdim=True)
    elif denominator == "mean_squared":
        d = x.mean(dim=dims, keepdim=True) ** 2
    elif denominator == "unbiased" and x.shape[-1] == 1:  # D − 1 = 0, without torch's warning
        d = torch.full_like(x[..., :1], float("nan"))
    else:
        d = x.var(dim=dims, keepdim=True, unbiased=denominator == "unbiased")
    if denominator == "ms_no_sqrt":
        y = x / (d + eps)
    else:
        y = x / (d.sqrt() + eps) if eps_outside else x / (d + eps).sqrt()
    if weight == "after":
        return y * w
    if weight == "one_plus":
        return y * (1 + w)
    return y


def _cases() -> list[Case]:
    r = normal(generator(12))

    def w(d, dtype=torch.float32):
        return 1.0 + 0.5 * r(d, dtype=dtype)

    zero = r(3, 6, shift=1.0)
    zero[1] = 0.0  # a token whose features are all 0
    scaled = r(4, 8) * torch.tensor([0.1, 1.0, 10.0, 100.0])[:, None]  # tokens of many sizes
    return [
        Case("rms.case.plain", (r(2, 3, 8, shift=0.5), w(8))),
        Case("rms.case.odd", (r(4, 7, scale=3.0, shift=1.0), w(7))),
        Case("rms.case.four_axes", (r(2, 2, 3, 6, shift=-0.5), w(6))),
        Case("rms.case.scales", (scaled, w(8))),
        Case("rms.case.zero", (zero, w(6))),
        Case("rms.case.eps", (r(2, 5, scale=0.3), w(5)), {"eps": 0.5}),
        Case("rms.case.width1", (r(3, 1, shift=0.5), w(1))),
        Case("rms.case.float64", (r(2, 5, dtype=torch.float64), w(5, torch.float64))),
    ]


def _mistakes() -> list[Mistake]:
    def knob(**kw):
        return lambda x, w, eps=1e-5: _rms(x, w, eps, **kw)

    return [
        Mistake("rms.hint.centered", knob(center=True)),
        Mistake("rms.hint.std", knob(denominator="var")),
        Mistake("rms.hint.std", knob(denominator="unbiased")),
        Mistake("rms.hint.std", knob(denominator="unbiased", eps_outside=True)),
        Mistake("rms.hint.eps_outside", knob(eps_outside=True)),
        Mistake("rms.hint.no_sqrt", knob(denominator="ms_no_sqrt")),
        Mistake("rms.hint.sum", knob(denominator="sum")),
        Mistake("rms.hint.sum", knob(denominator="sum", eps_outside=True)),
        Mistake("rms.hint.mean_squared", knob(denominator="mean_squared")),
        Mistake("rms.hint.no_eps", lambda x, w, eps=1e-5: _rms(x, w, 0.0), nan="match"),
        Mistake("rms.hint.eps_fixed", lambda x, w, eps=1e-5: _rms(x, w, 1e-5)),
        Mistake("rms.hint.eps_fixed", lambda x, w, eps=1e-5: _rms(x, w, 1e-6)),
        Mistake("rms.hint.no_weight", knob(weight="none")),
        Mistake("rms.hint.one_plus", knob(weight="one_plus")),
        Mistake("rms.hint.weight_before", knob(weight="before")),
        Mistake("rms.hint.axis_all", lambda x, w, eps=1e-5: _rms(x, w, eps,
                                                                  dims=tuple(range(x.dim())))),
        Mistake("rms.hint.axis_len", knob(dims=(-2,))),
        Mistake("rms.hint.axis_len", knob(dims=(0,))),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "size of tensor" in text or "must match" in text:
        return t("rms.err.keepdim")
    return None


def check_rms_norm(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(x, weight, eps=1e-5) -> y``.

    Args:
        fn: the reader's RMSNorm: ``x`` ``(..., D)``, ``weight`` (g) ``(D,)``,
            ``eps`` a float; returns ``(..., D)``,
            ``x / √(mean(x²) + eps) · weight`` with the mean over the last
            axis (no mean subtracted, no bias), in ``x``'s dtype.
        lang: language of the verdict; None for the current one.

    Tests: 2-, 3- and 4-axis inputs with a non-zero mean, an odd width and
    width 1, tokens of sizes 0.1 to 100, an all-zero token, eps=0.5, float64.

    Returns:
        True if it matches :class:`minitransformer.RMSNorm` (= ``nn.RMSNorm``).
    """
    return check(
        "rms_norm", fn, _cases(), _reference, _mistakes(),
        signature="fn(x, weight, eps=1e-5)", names=("name.y",),
        atol=1e-4, rtol=1e-3, on_error=_error, fallback="rms.fallback", lang=lang,
    )
