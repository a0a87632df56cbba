"""Checker for rotary positions (RoPE): rotating queries or keys by their positions.

Su et al., "RoFormer" (2021): the ``Dh`` features of a head form ``Dh / 2``
pairs, and pair ``i`` of the row at position ``pos`` is turned by the angle
``pos · θ_i``, ``θ_i = base^(−2i / Dh)``. The pairing convention here is the
package's (*halves*, as GPT-NeoX and Hugging Face's Llama): feature ``i`` and
feature ``i + Dh/2`` form pair ``i``,

    (x_i, x_{i+Dh/2}) → (x_i cos − x_{i+Dh/2} sin, x_i sin + x_{i+Dh/2} cos).

Reference: :func:`minitransformer.apply_rotary`.

Shape letters: ``B`` batch, ``H`` heads, ``L`` length, ``Dh`` head width (even).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..positional import apply_rotary
from ._harness import Case, Mistake, check, generator, normal
from ._messages import t

__all__ = ["check_rope"]


def _reference(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    return apply_rotary(x, positions, base)


def _rotate(x, positions, base=10000.0, *, pairing="halves", sign=1.0, exponent="-2i",
            pos="given", unit="radians", part="both", swap=False, axis=-2, base_used=None):
    """Rotary positions with one knob turned: the family of wrong answers.

    ``pairing``: "halves" (i with i + Dh/2, right) or "interleaved" (2i with
    2i + 1). ``sign``: −1 turns the other way. ``exponent``: θ_i =
    base^(−2i/Dh) ("-2i", right), base^(+2i/Dh) ("+2i"), base^(−i/Dh) ("-i"),
    base^(−4i/Dh) ("-4i"). ``pos``: "given", "arange" (0..L−1 whatever the
    positions), "plus1". ``unit``: "degrees" reads the angle as degrees.
    ``part``: "both", "first" (only the first member of each pair changes).
    ``swap``: cos and sin exchanged. ``axis``: the axis the positions run
    along (−2 right, −3 the heads).
    """
    wide = torch.float64
    dh = x.shape[-1]
    n = x.shape[axis]
    p = {"given": positions.to(wide), "arange": torch.arange(n, dtype=wide),
         "plus1": positions.to(wide) + 1}[pos]
    i = torch.arange(dh // 2, dtype=wide)
    b = base if base_used is None else base_used
    theta = {"-2i": b ** (-2 * i / dh), "+2i": b ** (2 * i / dh), "-i": b ** (-i / dh),
             "-4i": b ** (-4 * i / dh)}[exponent]
    angle = p[:, None] * theta  # (L, Dh/2)
    if unit == "degrees":
        angle = angle * math.pi / 180
    cos, sin = angle.cos(), sign * angle.sin()
    if swap:
        cos, sin = sin, cos
    if axis == -3:  # (L, 1, Dh/2): along the heads
        cos, sin = cos[:, None], sin[:, None]
    xw = x.to(wide)
    if pairing == "halves":
        a, c = xw[..., : dh // 2], xw[..., dh // 2:]
    else:
        a, c = xw[..., 0::2], xw[..., 1::2]
    new_a = a * cos - c * sin
    new_c = a * sin + c * cos if part == "both" else c
    if pairing == "halves":
        out = torch.cat([new_a, new_c], dim=-1)
    else:
        out = torch.stack([new_a, new_c], dim=-1).flatten(-2)
    return out.to(x.dtype)


def _cases() -> list[Case]:
    r = normal(generator(13))

    def ints(*values):
        return torch.tensor(values, dtype=torch.long)

    return [
        Case("rope.case.plain", (r(2, 4, 4, 8), torch.arange(4))),
        Case("rope.case.offset", (r(1, 2, 5, 8), torch.arange(7, 12))),
        Case("rope.case.unordered", (r(2, 3, 4, 6), ints(5, 0, 2, 9))),
        Case("rope.case.one_pair", (r(2, 2, 3, 2), ints(1, 2, 3))),
        Case("rope.case.base", (r(1, 3, 6, 12), torch.arange(10, 16)), {"base": 100.0}),
        Case("rope.case.far", (r(1, 1, 4, 16), ints(30, 47, 61, 80))),
        Case("rope.case.float64", (r(2, 2, 3, 4, dtype=torch.float64), ints(0, 4, 8))),
    ]


def _mistakes() -> list[Mistake]:
    def knob(**kw):
        return lambda x, positions, base=10000.0: _rotate(x, positions, base, **kw)

    return [
        Mistake("rope.hint.interleaved", knob(pairing="interleaved")),
        Mistake("rope.hint.direction", knob(sign=-1.0)),
        Mistake("rope.hint.not_inverted", knob(exponent="+2i")),
        Mistake("rope.hint.exp_i", knob(exponent="-i")),
        Mistake("rope.hint.exp_4i", knob(exponent="-4i")),
        Mistake("rope.hint.positions_ignored", knob(pos="arange")),
        Mistake("rope.hint.start1", knob(pos="plus1")),
        Mistake("rope.hint.degrees", knob(unit="degrees")),
        Mistake("rope.hint.one_half", knob(part="first")),
        Mistake("rope.hint.swapped", knob(swap=True)),
        Mistake("rope.hint.head_axis", knob(axis=-3)),
        Mistake("rope.hint.base_fixed", knob(base_used=10000.0)),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "must match the size" in text or "size of tensor" in text:
        return t("rope.err.broadcast")
    return None


def check_rope(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(x, positions, base=10000.0) -> rotated``.

    Args:
        fn: the reader's rotary positions: ``x`` ``(B, H, L, Dh)`` queries or
            keys (``Dh`` even), ``positions`` ``(L,)`` int64, the position of
            each row, ``base`` a float. Returns ``(B, H, L, Dh)`` in ``x``'s
            dtype: for each ``i < Dh/2``, features ``i`` and ``i + Dh/2`` (the
            *halves* pairing) turned by the angle ``positions[l] · θ_i``, in
            radians, with ``θ_i = base^(−2i / Dh)``:
            ``(a, b) → (a cos − b sin, a sin + b cos)``.
        lang: language of the verdict; None for the current one.

    Tests: positions 0..L−1 with as many heads as positions, positions from
    7 (a cache), unordered positions, one pair (Dh = 2), base=100, positions
    up to 80, float64.

    Returns:
        True if it matches :func:`minitransformer.apply_rotary`.
    """
    return check(
        "rope", fn, _cases(), _reference, _mistakes(),
        signature="fn(x, positions, base=10000.0)", names=("name.rotated",),
        atol=1e-4, rtol=1e-3, on_error=_error, fallback="rope.fallback", lang=lang,
    )
