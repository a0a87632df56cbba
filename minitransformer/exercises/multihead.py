"""Checker for multi-head attention written from its four weight matrices.

Vaswani et al. (2017), section 3.2.2:

    MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W_O,
    head_h = Attention(Q W_Q_h, K W_K_h, V W_V_h),

with head ``h`` using the ``h``-th slice of ``Dh = D / H`` features of the
projected queries, keys and values. The weights are stored as ``nn.Linear``
stores them, ``(out, in)``, so a projection is ``x @ w.T``; there are no
biases. Reference: :class:`minitransformer.MultiHeadAttention` (``bias=False``)
with these weights copied in; the tests also compare it with
``torch.nn.MultiheadAttention``.

Shape letters: ``B`` batch, ``H`` heads, ``Lq``/``Lk`` query/key lengths,
``D`` model width, ``Dh = D / H`` head width.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..attention import MultiHeadAttention
from ..masks import causal_mask, padding_mask
from ._harness import Case, Mistake, check, generator, normal
from ._messages import t

__all__ = ["check_multi_head_attention", "multi_head_module", "random_weights"]


def multi_head_module(w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor,
                      num_heads: int) -> MultiHeadAttention:
    """A :class:`MultiHeadAttention` without biases, in eval mode, holding these
    ``(D, D)`` weights (built without touching the global random state)."""
    d = w_q.shape[0]
    with torch.random.fork_rng(devices=[]):
        mha = MultiHeadAttention(d, num_heads, bias=False).to(w_q.dtype).eval()
    with torch.no_grad():
        for layer, w in ((mha.w_q, w_q), (mha.w_k, w_k), (mha.w_v, w_v), (mha.w_o, w_o)):
            layer.weight.copy_(w)
    return mha


def _reference(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
    mha = multi_head_module(w_q, w_k, w_v, w_o, num_heads)
    with torch.no_grad():
        return mha(query, key, value, mask, need_weights=True)  # (B, Lq, D), (B, H, Lq, Lk)


def _mha(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None, *, scale="head",
         transpose_w=True, transpose_o=True, use_w_o=True, split="slices", merge="slices",
         average=False, invert=False, use_mask=True, mask_after=False, kv_from_query=False,
         swap_kv=False, axis=-1, return_scores=False):
    """Multi-head attention with one knob turned: the family of wrong answers.

    ``split``: "slices" (right), "direct" (reshaped straight to (B, H, L, Dh)),
    "strided" (every H-th feature), "swapped" (viewed as (B, L, Dh, H): Dh
    "heads" of width H). ``merge``: "slices" (right), "direct", "strided" (the
    inverse of the strided split); a "swapped" split is merged back the same way.
    """
    b, lq, d = query.shape
    dh = d // num_heads

    def project(x, w, transpose=transpose_w):
        return x @ w.T if transpose else x @ w

    def split_heads(x):  # (B, L, D) -> (B, H, L, Dh)
        n = x.shape[1]
        if split == "direct":  # reshaped straight to (B, H, L, Dh): positions mixed
            return x.reshape(b, num_heads, n, dh)
        if split == "strided":  # every H-th feature
            return x.reshape(b, n, dh, num_heads).permute(0, 3, 1, 2)
        if split == "swapped":  # (B, L, Dh, H) -> (B, Dh, L, H)
            return x.reshape(b, n, dh, num_heads).transpose(1, 2)
        return x.reshape(b, n, num_heads, dh).transpose(1, 2)

    source_k, source_v = (query, query) if kv_from_query else (key, value)
    wk, wv = (w_v, w_k) if swap_kv else (w_k, w_v)
    q = split_heads(project(query, w_q))
    k = split_heads(project(source_k, wk))
    v = split_heads(project(source_v, wv))
    s = {"head": math.sqrt(dh), "model": math.sqrt(d), "none": 1.0, "dh": dh}[scale]
    scores = q @ k.transpose(-2, -1) / s  # (B, H, Lq, Lk)
    if mask is not None and use_mask and not mask_after:
        m = mask.expand(scores.shape)
        scores = scores.masked_fill(m if invert else ~m, float("-inf"))
    weights = scores.softmax(dim=axis)  # NaN where a row is fully masked: "anything goes"
    if mask is not None and mask_after:  # the masked weights zeroed, the rest not renormalised
        weights = weights.masked_fill(~mask.expand(weights.shape), 0.0)
    heads = weights @ v  # (B, H, Lq, Dh)
    if merge == "direct":
        out = heads.reshape(b, lq, d)
    elif merge == "strided":  # feature j*H + h holds head h's j-th feature
        out = heads.permute(0, 2, 3, 1).reshape(b, lq, d)
    else:
        out = heads.transpose(1, 2).reshape(b, lq, d)
    if use_w_o:
        out = project(out, w_o, transpose_w and transpose_o)
    if return_scores:
        weights = scores
    if average:
        weights = weights.mean(dim=1)
    return out, weights


def _knob(**kw):
    def fn(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return _mha(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask, **kw)
    return fn


def _mistakes() -> list[Mistake]:
    return [
        Mistake("mha.hint.untransposed", _knob(transpose_w=False)),
        Mistake("mha.hint.kv_from_query", _knob(kv_from_query=True)),
        Mistake("mha.hint.swapped_kv", _knob(swap_kv=True)),
        Mistake("mha.hint.w_o_untransposed", _knob(transpose_o=False)),
        Mistake("mha.hint.scale_model", _knob(scale="model")),
        Mistake("mha.hint.no_scale", _knob(scale="none")),
        Mistake("mha.hint.scale_dh", _knob(scale="dh")),
        Mistake("mha.hint.split_direct", _knob(split="direct")),
        Mistake("mha.hint.split_strided", _knob(split="strided")),
        Mistake("mha.hint.split_strided", _knob(split="strided", merge="strided")),
        Mistake("mha.hint.split_swapped", _knob(split="swapped")),
        Mistake("mha.hint.merge_direct", _knob(merge="direct")),
        Mistake("mha.hint.merge_strided", _knob(merge="strided")),
        Mistake("mha.hint.no_w_o", _knob(use_w_o=False)),
        Mistake("mha.hint.averaged", _knob(average=True)),
        Mistake("mha.hint.scores", _knob(return_scores=True)),
        Mistake("mha.hint.axis", _knob(axis=-2)),
        Mistake("mha.hint.axis", _knob(axis=1)),
        Mistake("mha.hint.no_mask", _knob(use_mask=False)),
        Mistake("mha.hint.inverted", _knob(invert=True)),
        Mistake("mha.hint.mask_after", _knob(mask_after=True)),
    ]


def random_weights(r: Callable[..., Tensor], d: int, dtype: torch.dtype = torch.float32
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``w_q, w_k, w_v, w_o``, each ``(D, D)`` with entries of variance ``1/D``
    (so projections keep the inputs' scale), drawn with the sampler ``r``
    (:func:`~minitransformer.exercises._harness.normal`)."""
    return tuple(r(d, d, dtype=dtype) / math.sqrt(d) for _ in range(4))


def _cases() -> list[Case]:
    r = normal(generator(11))

    def weights(d, dtype=torch.float32):
        return random_weights(r, d, dtype)

    x5 = r(2, 5, 8)
    x6 = r(2, 6, 8)
    pad = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 0]])
    pad5 = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    combined = padding_mask(pad5, 0) & causal_mask(5)  # (B, 1, L, L)
    x64 = r(2, 4, 6, dtype=torch.float64)
    return [
        Case("mha.case.self", (x5, x5, x5, *weights(8), 2)),
        Case("mha.case.cross", (r(2, 3, 12), r(2, 6, 12), r(2, 6, 12), *weights(12), 3)),
        Case("mha.case.causal", (x5, x5, x5, *weights(8), 4), {"mask": causal_mask(5)}),
        Case("mha.case.padding", (r(2, 3, 8), x6, x6, *weights(8), 2),
             {"mask": padding_mask(pad, 0)}),
        Case("mha.case.combined", (x5, x5, x5, *weights(8), 2), {"mask": combined}),
        Case("mha.case.one_head", (r(1, 4, 6), r(1, 4, 6), r(1, 4, 6), *weights(6), 1)),
        Case("mha.case.width1", (r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), *weights(4), 4)),
        Case("mha.case.float64", (x64, x64, x64, *weights(6, torch.float64), 3)),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    shape_error = any(s in text for s in ("size of tensor", "must match", "shape",
                                          "cannot be multiplied", "invalid for input of size"))
    if shape_error and "mask" in line and case.kwargs.get("mask") is not None:
        return t("mha.err.mask_shape", mask=tuple(case.kwargs["mask"].shape))
    if shape_error and ("view" in line or "reshape" in line):
        return t("mha.err.reshape")
    if shape_error:
        return t("mha.err.matmul")
    return None


def check_multi_head_attention(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None)
    -> (output, weights)``.

    Args:
        fn: the reader's multi-head attention: ``query`` ``(B, Lq, D)``,
            ``key`` and ``value`` ``(B, Lk, D)``; ``w_q``, ``w_k``, ``w_v``,
            ``w_o`` ``(D, D)`` stored as ``nn.Linear`` stores them (a
            projection is ``x @ w.T``, no biases); ``num_heads`` H dividing D;
            an optional bool ``mask`` broadcastable to ``(B, H, Lq, Lk)``,
            True = may attend. Returns the output ``(B, Lq, D)`` (after
            ``w_o``) and the per-head weights ``(B, H, Lq, Lk)``, in the
            inputs' dtype. Head ``h`` uses features ``h*Dh .. (h+1)*Dh - 1``.
        lang: language of the verdict; None for the current one.

    Tests: self- and cross-attention (Lq != Lk), causal, padding and combined
    masks, one head, head width 1, float64. No query has all its keys masked.

    Returns:
        True if it matches :class:`minitransformer.MultiHeadAttention`.
    """
    return check(
        "multi_head_attention", fn, _cases(), _reference, _mistakes(),
        signature="fn(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None)",
        names=("name.output", "name.weights"), atol=1e-5, rtol=1e-4, on_error=_error,
        fallback="mha.fallback", lang=lang,
    )
