"""Checker for grouped-query attention's key/value heads, expanded to the query heads.

Ainslie et al., "GQA" (2023): ``H`` query heads share ``Hkv`` key/value
heads (``Hkv`` divides ``H``; ``Hkv = 1`` is Shazeer's multi-query
attention). Each key/value head serves a group of ``g = H / Hkv``
*consecutive* query heads: query head ``h`` reads key/value head ``h // g``,
as ``F.scaled_dot_product_attention(..., enable_gqa=True)`` groups them.
Expanding the keys and values to ``H`` heads repeats each head ``g`` times
in place, ``kv.repeat_interleave(g, dim=1)``. Reference:
:meth:`minitransformer.MultiHeadAttention.expand_kv` (the tests check that
attention over its result equals ``enable_gqa=True``'s).

Shape letters: ``B`` batch, ``Hkv`` key/value heads, ``H`` query heads,
``L`` length, ``Dh`` head width.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import torch
from torch import Tensor

from ..attention import MultiHeadAttention
from ._harness import Case, Mistake, check, generator, normal
from ._messages import t

__all__ = ["check_expand_kv_heads"]


def _reference(kv: Tensor, num_heads: int) -> Tensor:
    layer = SimpleNamespace(num_heads=num_heads, num_kv_heads=kv.shape[1])
    return MultiHeadAttention.expand_kv(layer, kv)


def _tiled(kv, num_heads):  # kv.repeat(1, g, 1, 1), torch.cat([kv] * g, dim=1)
    return kv.repeat(1, num_heads // kv.shape[1], 1, 1)


def _along(dim: int):
    return lambda kv, num_heads: kv.repeat_interleave(num_heads // kv.shape[1], dim=dim)


def _by(count: str):
    def fn(kv, num_heads):
        n = {"heads": num_heads, "kv_heads": kv.shape[1]}[count]
        return kv.repeat_interleave(n, dim=1)
    return fn


def _reshape_mixed(kv, num_heads):
    """The new axis after the length: the reshape mixes positions into heads."""
    b, hkv, n, dh = kv.shape
    g = num_heads // hkv
    return kv[:, :, :, None].expand(b, hkv, n, g, dh).reshape(b, num_heads, n, dh)


def _divided_by_kv_heads(kv, num_heads):
    """Query head h reads key/value head h // Hkv (instead of h // g)."""
    return kv[:, torch.arange(num_heads) // kv.shape[1]]


def _averaged(kv, num_heads):
    """One key/value head, the mean of all, for every query head."""
    b, _, n, dh = kv.shape
    return kv.mean(dim=1, keepdim=True).expand(b, num_heads, n, dh)


def _first_only(kv, num_heads):
    """Every query head reads key/value head 0."""
    b, _, n, dh = kv.shape
    return kv[:, :1].expand(b, num_heads, n, dh)


def _cases() -> list[Case]:
    r = normal(generator(14))
    return [
        Case("gqa.case.plain", (r(1, 3, 4, 2), 6), fields={"hkv": 3, "h": 6, "g": 2}),
        Case("gqa.case.plain", (r(2, 2, 5, 4), 6), fields={"hkv": 2, "h": 6, "g": 3}),
        Case("gqa.case.multi_query", (r(2, 1, 3, 4), 4)),
        Case("gqa.case.same", (r(2, 3, 4, 2), 3)),
        Case("gqa.case.plain", (r(1, 4, 2, 3), 8), fields={"hkv": 4, "h": 8, "g": 2}),
        Case("gqa.case.float64", (r(1, 2, 3, 4, dtype=torch.float64), 8)),
    ]


def _mistakes() -> list[Mistake]:
    return [
        Mistake("gqa.hint.tiled", _tiled),
        Mistake("gqa.hint.reshape_mixed", _reshape_mixed),
        Mistake("gqa.hint.axis", _along(2)),
        Mistake("gqa.hint.axis", _along(0)),
        Mistake("gqa.hint.axis", _along(-1)),
        Mistake("gqa.hint.times_heads", _by("heads")),
        Mistake("gqa.hint.times_kv_heads", _by("kv_heads")),
        Mistake("gqa.hint.divide_by_kv_heads", _divided_by_kv_heads),
        Mistake("gqa.hint.averaged", _averaged),
        Mistake("gqa.hint.first_only", _first_only),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "float" in text and ("repeat" in text or "expand" in text or "Tensor" in text):
        return t("gqa.err.float_group")
    return None


def check_expand_kv_heads(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(kv, num_heads) -> expanded``.

    Args:
        fn: the reader's expansion of grouped-query attention's keys (or
            values): ``kv`` ``(B, Hkv, L, Dh)``, ``num_heads`` the number
            ``H`` of query heads (a multiple of ``Hkv``). Returns
            ``(B, H, L, Dh)`` in ``kv``'s dtype whose head ``h`` is ``kv``'s
            head ``h // (H / Hkv)``: each key/value head serves ``H / Hkv``
            consecutive query heads (``F.scaled_dot_product_attention``'s
            ``enable_gqa`` grouping).
        lang: language of the verdict; None for the current one.

    Tests: groups of 3, 2 and 2 (Hkv = 2, 3, 4), multi-query (Hkv = 1),
    no grouping (Hkv = H), float64.

    Returns:
        True if it matches :meth:`minitransformer.MultiHeadAttention.expand_kv`.
    """
    return check(
        "expand_kv_heads", fn, _cases(), _reference, _mistakes(),
        signature="fn(kv, num_heads)", names=("name.expanded",),
        atol=1e-6, rtol=1e-6, on_error=_error, fallback="gqa.fallback", lang=lang,
    )
