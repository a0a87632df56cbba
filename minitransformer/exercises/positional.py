"""Checker for the sinusoidal positional encoding.

Vaswani et al. (2017), section 3.5:

    PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))

Reference: :func:`minitransformer.sinusoidal_table`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..positional import sinusoidal_table
from ._harness import Case, Mistake, check

__all__ = ["check_sinusoidal_encoding"]


def _table(max_len: int, d_model: int, *, layout: str = "interleaved", exponent: str = "2i",
           start: int = 0, divide: bool = True) -> Tensor:
    """A sinusoidal table with one knob turned: the family of wrong answers."""
    pos = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]
    n_sin = (d_model + 1) // 2
    col = torch.arange(d_model, dtype=torch.float64)
    two_i = torch.div(col, 2, rounding_mode="floor") * 2  # 2i for columns 2i and 2i+1
    if exponent == "2i":  # the right one: columns 2i and 2i+1 share frequency i
        pair = two_i
    elif exponent == "j":  # each column its own frequency, 10000^(j/d)
        pair = col
    else:  # "4i": the even column's index doubled again, 10000^(2·2i/d)
        pair = 2 * two_i
    if layout == "halves":  # sin in the first half, cos in the second, same frequencies
        i = torch.cat([torch.arange(n_sin), torch.arange(d_model - n_sin)]).double()
        pair = 2 * i
    freq = torch.pow(10000.0, pair / d_model)
    angle = pos / freq if divide else pos * freq
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    if layout == "interleaved":
        pe[:, 0::2] = torch.sin(angle[:, 0::2])
        pe[:, 1::2] = torch.cos(angle[:, 1::2])
    elif layout == "swapped":
        pe[:, 0::2] = torch.cos(angle[:, 0::2])
        pe[:, 1::2] = torch.sin(angle[:, 1::2])
    else:  # halves
        pe[:, :n_sin] = torch.sin(angle[:, :n_sin])
        pe[:, n_sin:] = torch.cos(angle[:, n_sin:])
    return pe.float()


_HINTS = {
    "transposed": (
        "the table is transposed: rows are positions and columns features, shape "
        "(max_len, d_model)."
    ),
    "halves": (
        "sines and cosines are in two halves (sin in the first d_model/2 columns, cos in "
        "the second). The paper interleaves them: even columns 2i hold sin, odd columns "
        "2i+1 hold cos of the same frequency: pe[:, 0::2] = sin, pe[:, 1::2] = cos."
    ),
    "swapped": (
        "sine and cosine are swapped: even columns (0, 2, ...) hold sin, odd columns hold "
        "cos. Row 0 must read 0, 1, 0, 1, ..."
    ),
    "exp_j": (
        "each column has its own frequency: the exponent must use the pair index, "
        "10000^(2i/d_model) for both columns 2i and 2i+1, not 10000^(j/d_model) with j "
        "the column."
    ),
    "exp_2j": (
        "the exponent is doubled: for column pair (2i, 2i+1) it is 2i/d_model, where 2i "
        "is the even column's index (torch.arange(0, d_model, 2)), not 2 × that index."
    ),
    "start1": (
        "positions start at 1; they start at 0, so row 0 is sin 0 = 0 and cos 0 = 1."
    ),
    "multiply": (
        "you multiplied the position by 10000^(2i/d_model); divide: the angle is "
        "pos / 10000^(2i/d_model), so wavelengths grow from 2π to about 10000·2π."
    ),
}


def _mistakes() -> list[Mistake]:
    h = _HINTS
    return [
        Mistake(h["transposed"], lambda n, d: sinusoidal_table(n, d).T),
        Mistake(h["halves"], lambda n, d: _table(n, d, layout="halves")),
        Mistake(h["swapped"], lambda n, d: _table(n, d, layout="swapped")),
        Mistake(h["exp_j"], lambda n, d: _table(n, d, exponent="j")),
        Mistake(h["exp_2j"], lambda n, d: _table(n, d, exponent="4i")),
        Mistake(h["start1"], lambda n, d: _table(n, d, start=1)),
        Mistake(h["multiply"], lambda n, d: _table(n, d, divide=False)),
    ]


def _error(case: Case, exc: BaseException) -> str | None:
    n, d = case.args
    if d % 2 == 1 and ("shape" in str(exc) or "size" in str(exc) or "match" in str(exc)):
        return (f"odd d_model ({d}) fails: there are ceil(d/2) = {(d + 1) // 2} sine "
                f"columns but only floor(d/2) = {d // 2} cosine columns, so use "
                "angle[:, : d_model // 2] for the cosines.")
    if isinstance(exc, TypeError) and "argument" in str(exc):
        return "the function must have the signature fn(max_len, d_model)."
    return None


def check_sinusoidal_encoding(fn: Callable) -> bool:
    """Check ``fn(max_len, d_model) -> table``.

    Args:
        fn: the reader's encoding: two ints; returns a float tensor
            ``(max_len, d_model)`` with ``sin(pos / 10000^(2i/d_model))`` in
            column ``2i`` and ``cos`` of the same angle in column ``2i+1``,
            positions from 0. Any floating dtype is accepted.

    Tests: (50, 16), length 1, (30, 6), an odd width (20, 7) and a long table
    (200, 64).

    Returns:
        True if it matches :func:`minitransformer.sinusoidal_table`.
    """
    cases = [Case("max_len 50, d_model 16", (50, 16)),
             Case("length 1: max_len 1, d_model 8", (1, 8)),
             Case("max_len 30, d_model 6", (30, 6)),
             Case("odd width: max_len 20, d_model 7", (20, 7)),
             Case("a long table: max_len 200, d_model 64", (200, 64))]
    return check(
        "sinusoidal_encoding", fn, cases, sinusoidal_table, _mistakes(),
        names=("the table",), atol=1e-4, rtol=1e-4, strict_dtype=False, on_error=_error,
        fallback="Column 2i is sin(pos / 10000**(2i / d_model)), column 2i+1 the cos of "
                 "the same angle.",
    )
