"""Checker for the position-wise feed-forward network.

Vaswani et al. (2017), section 3.3: FFN(x) = max(0, x W1ᵀ + b1) W2ᵀ + b2, with
the weights stored as ``nn.Linear`` stores them: ``w1`` ``(F, D)``, ``w2``
``(D, F)``. Reference: :class:`minitransformer.PositionwiseFeedForward`.

Shape letters: ``D`` model width, ``F`` inner width; ``...`` any leading axes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..feedforward import PositionwiseFeedForward
from ._harness import Case, Mistake, check, generator, normal
from ._messages import t

__all__ = ["check_feed_forward"]


def _reference(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    with torch.random.fork_rng(devices=[]):  # its initialisation must not move the seed
        ffn = PositionwiseFeedForward(w1.shape[1], w1.shape[0]).to(x.dtype).eval()
    with torch.no_grad():
        ffn.linear1.weight.copy_(w1)
        ffn.linear1.bias.copy_(b1)
        ffn.linear2.weight.copy_(w2)
        ffn.linear2.bias.copy_(b2)
        return ffn(x)


def _cases() -> list[Case]:
    r = normal(generator(5))

    def weights(d, f, dtype=torch.float32):
        return (r(f, d, dtype=dtype) / d**0.5, r(f, dtype=dtype), r(d, f, dtype=dtype) / f**0.5,
                r(d, dtype=dtype))

    return [
        Case("ffn.case.plain", (r(2, 3, 4), *weights(4, 8))),
        Case("ffn.case.square", (r(2, 5, 6), *weights(6, 6))),
        Case("ffn.case.one", (r(1, 1, 3), *weights(3, 5))),
        Case("ffn.case.no_batch", (r(7, 4), *weights(4, 16))),
        Case("ffn.case.float64", (r(2, 2, 4, dtype=torch.float64),
                                  *weights(4, 4, torch.float64))),
    ]


def _mistakes() -> list[Mistake]:
    def ffn(act=torch.relu, bias1=True, bias2=True, relu_in=False, bias_after=False,
            relu_out=False):
        def fn(x, w1, b1, w2, b2):
            h = F.linear(torch.relu(x) if relu_in else x, w1, b1 if bias1 and not bias_after
                         else None)
            h = act(h) if not relu_in else h
            if bias_after:
                h = h + b1
            y = F.linear(h, w2, b2 if bias2 else None)
            return torch.relu(y) if relu_out else y
        return fn

    return [
        Mistake("ffn.hint.no_relu", ffn(act=lambda h: h)),
        Mistake("ffn.hint.relu_out", ffn(relu_out=True)),
        Mistake("ffn.hint.relu_in", ffn(relu_in=True)),
        Mistake("ffn.hint.bias_after", ffn(bias_after=True)),
        Mistake("ffn.hint.gelu", ffn(act=F.gelu)),
        Mistake("ffn.hint.other_act", ffn(act=torch.tanh)),
        Mistake("ffn.hint.other_act", ffn(act=torch.sigmoid)),
        Mistake("ffn.hint.no_bias", ffn(bias1=False)),
        Mistake("ffn.hint.no_bias", ffn(bias2=False)),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "shapes cannot be multiplied" in text or "size mismatch" in text:
        if "linear" in line:
            return t("ffn.err.linear_transposed")
        return t("ffn.err.transpose_w2" if _failing_layer(case, text) == "w2"
                 else "ffn.err.transpose")
    return None


def _failing_layer(case: Case, text: str) -> str | None:
    """"w1" or "w2": which product failed, read from the width of its left
    operand in PyTorch's message ("mat1 and mat2 shapes cannot be multiplied
    (6x8 and 4x8)": 8 columns is d_ff, so the second layer); None if unclear."""
    found = re.search(r"\((\d+)x(\d+) and (\d+)x(\d+)\)", text)
    x, w1 = case.args[:2]
    d_model, d_ff = x.shape[-1], w1.shape[0]
    if found is None or d_model == d_ff:
        return None
    width = int(found.group(2))
    return {d_model: "w1", d_ff: "w2"}.get(width)


def check_feed_forward(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(x, w1, b1, w2, b2) -> y``.

    Args:
        fn: the reader's feed-forward network: ``x`` ``(..., D)``, ``w1``
            ``(F, D)``, ``b1`` ``(F,)``, ``w2`` ``(D, F)``, ``b2`` ``(D,)`` (as
            ``nn.Linear`` stores them); returns ``relu(x w1ᵀ + b1) w2ᵀ + b2``,
            ``(..., D)``, in ``x``'s dtype.
        lang: language of the verdict; None for the current one.

    Tests: 2- and 3-axis inputs, a single position, d_ff = d_model, float64.
    A missing transpose fails on shapes in the first case and gets its own
    hint (and so does a transpose too many inside ``F.linear``).

    Returns:
        True if it matches :class:`minitransformer.PositionwiseFeedForward`.
    """
    return check(
        "feed_forward", fn, _cases(), _reference, _mistakes(),
        signature="fn(x, w1, b1, w2, b2)", names=("name.y",), atol=1e-5, rtol=1e-4,
        on_error=_error, fallback="ffn.fallback", lang=lang,
    )
