"""Checker for one step of incremental decoding with a key/value cache.

When a decoder generates token by token, the keys and values of the earlier
positions do not change, so each self-attention layer keeps them (the *KV
cache*) and a step only projects the new position: it appends the new key
and value to the cache and lets the new query attend to every cached
position and to itself. No causal mask is needed (nothing later exists yet),
and the result equals the last row of causal self-attention recomputed over
the whole prefix.

Weights as in :mod:`minitransformer.exercises.multihead`: ``(D, D)`` in
``nn.Linear``'s ``(out, in)`` layout, no biases. The cache holds keys and
values already projected and split into heads, ``(B, H, t, Dh)``, as
:class:`minitransformer.KVCache` does. Reference:
:class:`minitransformer.MultiHeadAttention` called with a ``KVCache``
(``mha(x, x, x, cache=cache)`` appends the new keys and values in place and
attends to all of them); the tests also compare it with
``torch.nn.MultiheadAttention`` over the whole prefix.

Shape letters: ``B`` batch, ``H`` heads, ``t`` cached positions, ``D`` model
width, ``Dh = D / H`` head width.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import torch
from torch import Tensor

from ..attention import KVCache
from ._harness import Case, Mistake, check, generator, normal
from ._messages import t
from .multihead import multi_head_module, random_weights

__all__ = ["check_kv_cache_step"]


def _reference(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads):
    mha = multi_head_module(w_q, w_k, w_v, w_o, num_heads)
    with torch.no_grad():
        cache = KVCache(cache_k, cache_v)
        out, _ = mha(x, x, x, cache=cache)  # appends x's keys/values: (B, H, t + 1, Dh)
        return out, cache.k, cache.v


def _split(x: Tensor, num_heads: int, strided: bool = False) -> Tensor:
    b, n, d = x.shape
    if strided:
        return x.reshape(b, n, d // num_heads, num_heads).permute(0, 3, 1, 2)
    return x.reshape(b, n, num_heads, d // num_heads).transpose(1, 2)  # (B, H, n, Dh)


def _merge(x: Tensor, strided: bool = False) -> Tensor:
    b, h, n, dh = x.shape
    if strided:  # the inverse of the strided split
        return x.permute(0, 2, 3, 1).reshape(b, n, h * dh)
    return x.transpose(1, 2).reshape(b, n, h * dh)  # (B, n, D)


def _step(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads, *, attend="all", store="append",
          scale="head", transpose_w=True, use_w_o=True, swap_kv=False, raw=False,
          strided=False, merge_strided=None, order="kv", first_only=False, axis=-1,
          full_mask=False, reproject=False):
    """One cached step with one knob turned: the family of wrong answers.

    ``attend``: "all" (cache and new), "cache" (the cache only), "new" (the
    new position only). ``store``: "append", "prepend" or "old" (the cache
    returned unchanged). ``strided``: the new position split into heads of
    every H-th feature, merged back the same way unless ``merge_strided`` says
    otherwise. ``full_mask``: the whole (t + 1, t + 1) causal mask applied to
    the one query's scores, which broadcasts them to t + 1 rows.
    ``reproject``: the cached keys and values projected again.
    """
    b, _, d = x.shape
    merge_strided = strided if merge_strided is None else merge_strided

    def project(inp, w):
        return inp @ w.T if transpose_w else inp @ w

    wk, wv = (w_v, w_k) if swap_kv else (w_k, w_v)
    if reproject:  # the cache merged, projected again and split
        cache_k = _split(project(_merge(cache_k), wk), num_heads)
        cache_v = _split(project(_merge(cache_v), wv), num_heads)
    if raw:  # the input itself cached, not its key and value
        k_new = v_new = _split(x, num_heads, strided)
    else:
        k_new = _split(project(x, wk), num_heads, strided)  # (B, H, 1, Dh)
        v_new = _split(project(x, wv), num_heads, strided)
    q = _split(project(x, w_q), num_heads, strided)
    k_all = torch.cat([cache_k, k_new], dim=2)  # (B, H, t + 1, Dh)
    v_all = torch.cat([cache_v, v_new], dim=2)
    keys, values = {"all": (k_all, v_all), "cache": (cache_k, cache_v),
                    "new": (k_new, v_new)}[attend]
    dh = d // num_heads
    s = {"head": math.sqrt(dh), "model": math.sqrt(d), "none": 1.0}[scale]
    scores = q @ keys.transpose(-2, -1) / s  # (B, H, 1, L)
    n = scores.shape[-1]
    if first_only:  # the first row of a causal mask: only position 0 is visible
        scores = scores.masked_fill(torch.arange(n) > 0, float("-inf"))
    if full_mask:  # (B, H, 1, L) filled with an (L, L) mask: (B, H, L, L)
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    out = scores.softmax(axis).nan_to_num(0.0) @ values  # (B, H, 1, Dh)
    out = _merge(out, merge_strided)  # (B, 1, D), or (B, L, D) with the full mask
    if use_w_o:
        out = project(out, w_o)
    new_k, new_v = {"append": (k_all, v_all), "old": (cache_k, cache_v),
                    "prepend": (torch.cat([k_new, cache_k], 2),
                                torch.cat([v_new, cache_v], 2))}[store]
    return (out, new_k, new_v) if order == "kv" else (out, new_v, new_k)


def _knob(**kw):
    def fn(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads):
        return _step(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads, **kw)
    return fn


def _mistakes() -> list[Mistake]:
    return [
        Mistake("kv.hint.order", _knob(order="vk")),
        Mistake("kv.hint.no_append", _knob(attend="cache", store="old")),
        Mistake("kv.hint.not_returned", _knob(store="old")),
        Mistake("kv.hint.before_append", _knob(attend="cache")),
        Mistake("kv.hint.only_new", _knob(attend="new")),
        Mistake("kv.hint.prepend", _knob(store="prepend")),
        Mistake("kv.hint.mask_first", _knob(first_only=True)),
        Mistake("kv.hint.raw_x", _knob(raw=True)),
        Mistake("kv.hint.swapped_kv", _knob(swap_kv=True)),
        Mistake("kv.hint.untransposed", _knob(transpose_w=False)),
        Mistake("kv.hint.scale_model", _knob(scale="model")),
        Mistake("kv.hint.no_scale", _knob(scale="none")),
        Mistake("kv.hint.split_strided", _knob(strided=True)),
        Mistake("kv.hint.split_strided", _knob(strided=True, merge_strided=False)),
        Mistake("kv.hint.no_w_o", _knob(use_w_o=False)),
        Mistake("kv.hint.axis", _knob(axis=-2)),
        Mistake("kv.hint.axis", _knob(axis=1)),
        Mistake("kv.hint.full_mask", _knob(full_mask=True)),
        Mistake("kv.hint.reproject", _knob(reproject=True)),
    ]


def _cases() -> list[Case]:
    r = normal(generator(12))

    def case(label, b, cached, d, heads, dtype=torch.float32):
        """A step after ``cached`` earlier positions of a random sequence: the
        cache holds their keys and values, as earlier steps would have left it."""
        w_q, w_k, w_v, w_o = random_weights(r, d, dtype)
        prefix = r(b, cached, d, dtype=dtype)
        cache_k, cache_v = _split(prefix @ w_k.T, heads), _split(prefix @ w_v.T, heads)
        return Case(label, (r(b, 1, d, dtype=dtype), cache_k, cache_v, w_q, w_k, w_v, w_o, heads))

    return [
        case("kv.case.plain", 2, 4, 8, 2),
        case("kv.case.first", 2, 0, 8, 2),
        case("kv.case.one_cached", 3, 1, 6, 3),
        case("kv.case.one_head", 2, 3, 4, 1),
        case("kv.case.width1", 1, 5, 4, 4),
        case("kv.case.long", 1, 9, 12, 3),
        case("kv.case.float64", 2, 2, 6, 2, torch.float64),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    x, cache_k = case.args[:2]
    b, _, d = x.shape
    heads, t_cached, dh = cache_k.shape[1:]
    if "cat" in line and "except in dimension 2" in text:
        return t("kv.err.split_shape")  # joined on the length axis, but split unlike the cache
    if "cat" in line and ("Sizes of tensors must match" in text or "dimension" in text):
        return t("kv.err.cat_dim")
    # q (B, H, 1, Dh) @ k (B, H, t+1, Dh): batched matmul wants Dh rows, finds t + 1
    batched = re.search(r"batch2 tensor to be: \[(\d+), (\d+)\] but got: \[(\d+), (\d+)\]", text)
    if batched and int(batched.group(2)) == dh and int(batched.group(4)) == t_cached + 1:
        return t("kv.err.key_transpose")
    plain = re.search(r"mat1 and mat2 shapes cannot be multiplied \(1x(\d+) and (\d+)x(\d+)\)",
                      text)
    if plain and int(plain.group(2)) == t_cached + 1 and int(plain.group(3)) == dh:
        return t("kv.err.key_transpose")
    size = re.search(r"invalid for input of size (\d+)", text)
    if size and t_cached > 0 and int(size.group(1)) == b * (t_cached + 1) * d:
        return t("kv.hint.full_mask")  # the (t+1, t+1) mask made t + 1 query rows
    if any(s in text for s in ("size of tensor", "must match", "cannot be multiplied")):
        return t("kv.err.shapes")
    return None


def check_kv_cache_step(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads)
    -> (output, cache_k, cache_v)``.

    Args:
        fn: the reader's decoding step of self-attention with a cache: ``x``
            ``(B, 1, D)`` the new position's input; ``cache_k``, ``cache_v``
            ``(B, H, t, Dh)`` the keys and values of the ``t`` earlier
            positions, already projected and split into heads (``t`` may be
            0); ``w_q``, ``w_k``, ``w_v``, ``w_o`` ``(D, D)`` as ``nn.Linear``
            stores them, no biases; ``num_heads`` H. Returns the output
            ``(B, 1, D)`` (after ``w_o``) and the caches ``(B, H, t + 1, Dh)``
            with the new key and value appended at the end, in the inputs'
            dtype: the output equals the last position of causal
            self-attention recomputed over all ``t + 1`` positions.
        lang: language of the verdict; None for the current one.

    Tests: an empty cache (the first step), one and nine cached positions,
    one head, head width 1, float64.

    Returns:
        True if it matches :class:`minitransformer.MultiHeadAttention`'s cached path.
    """
    return check(
        "kv_cache_step", fn, _cases(), _reference, _mistakes(),
        signature="fn(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads)",
        names=("name.output", "name.cache_k", "name.cache_v"), atol=1e-5, rtol=1e-4,
        on_error=_error, fallback="kv.fallback", lang=lang,
    )
