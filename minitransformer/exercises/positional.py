"""Checker for the sinusoidal positional encoding.

Vaswani et al. (2017), section 3.5:

    PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))

Reference: :func:`minitransformer.sinusoidal_table`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..positional import sinusoidal_table
from ._harness import Case, Mistake, check
from ._messages import t

__all__ = ["check_sinusoidal_encoding"]


#: Angles above this are left out ("anything goes") when matching a wrong table:
#: float32 resolves them only to about 1e-5 rad, so two correct float32
#: computations of one wrong formula may differ there by more than the tolerance.
_RESOLVED_ANGLE = 100.0


def _table(max_len: int, d_model: int, *, layout: str = "interleaved", exponent: str = "2i",
           start: int = 0, divide: bool = True, denominator: str = "d_model",
           base: str = "10000") -> Tensor:
    """A sinusoidal table with one knob turned: the family of wrong answers.

    ``base``: "10000" (right), "e4" (the exp form with log10 for ln,
    exp(2i · log10(10000) / d) = e^(4 · 2i / d)), "10^ln" (10 ** (2i · ln(10000) / d)).
    Entries whose angle exceeds :data:`_RESOLVED_ANGLE` are NaN (not compared),
    so the table matches a float32 computation as well as a float64 one.
    """
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
    if base == "e4":
        freq = torch.exp(pair * math.log10(10000.0) / d_model)
    elif base == "10^ln":
        freq = torch.pow(10.0, pair * math.log(10000.0) / d_model)
    elif denominator == "d_model":
        freq = torch.pow(10000.0, pair / d_model)
    elif denominator == "max_len":
        freq = torch.pow(10000.0, pair / max_len)
    else:  # none: 10000^(2i): every angle after the first pair is about 0
        freq = torch.pow(10000.0, pair)
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
    return pe.masked_fill(angle.abs() > _RESOLVED_ANGLE, float("nan")).float()


def _mistakes() -> list[Mistake]:
    return [
        Mistake("pe.hint.transposed", lambda n, d: sinusoidal_table(n, d).T),
        Mistake("pe.hint.halves", lambda n, d: _table(n, d, layout="halves")),
        Mistake("pe.hint.swapped", lambda n, d: _table(n, d, layout="swapped")),
        Mistake("pe.hint.exp_j", lambda n, d: _table(n, d, exponent="j")),
        Mistake("pe.hint.exp_2j", lambda n, d: _table(n, d, exponent="4i")),
        Mistake("pe.hint.no_d", lambda n, d: _table(n, d, denominator="none")),
        Mistake("pe.hint.max_len", lambda n, d: _table(n, d, denominator="max_len")),
        Mistake("pe.hint.start1", lambda n, d: _table(n, d, start=1)),
        Mistake("pe.hint.multiply", lambda n, d: _table(n, d, divide=False)),
        Mistake("pe.hint.log10", lambda n, d: _table(n, d, base="e4")),
        Mistake("pe.hint.log10", lambda n, d: _table(n, d, base="10^ln")),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    n, d = case.args
    text = str(exc)
    if d % 2 == 1 and ("shape" in text or "size" in text or "match" in text):
        return t("pe.err.odd", d=d, n_sin=(d + 1) // 2, n_cos=d // 2)
    return None


def check_sinusoidal_encoding(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(max_len, d_model) -> table``.

    Args:
        fn: the reader's encoding: two ints; returns a float tensor
            ``(max_len, d_model)`` with ``sin(pos / 10000^(2i/d_model))`` in
            column ``2i`` and ``cos`` of the same angle in column ``2i+1``,
            positions from 0. Any floating dtype is accepted.
        lang: language of the verdict; None for the current one.

    Tests: (50, 16), length 1, (30, 6), an odd width (20, 7) and a long table
    (200, 64).

    Returns:
        True if it matches :func:`minitransformer.sinusoidal_table`.
    """
    cases = [Case("pe.case.sizes", (50, 16), fields={"n": 50, "d": 16}),
             Case("pe.case.length1", (1, 8)),
             Case("pe.case.sizes", (30, 6), fields={"n": 30, "d": 6}),
             Case("pe.case.odd", (20, 7)),
             Case("pe.case.long", (200, 64))]
    return check(
        "sinusoidal_encoding", fn, cases, sinusoidal_table, _mistakes(),
        signature="fn(max_len, d_model)", names=("name.table",), atol=1e-4, rtol=1e-4,
        strict_dtype=False, on_error=_error, fallback="pe.fallback", lang=lang,
    )
