"""Attention by blocks of keys with the online softmax: FlashAttention's idea.

Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with
IO-Awareness" (NeurIPS 2022), after Milakov and Gimelshein's online softmax
(2018). Instead of the ``(Lq, Lk)`` matrix of scores, each query row keeps
three running quantities while it walks over the keys block by block:

- ``m``, the largest score seen so far;
- ``s``, the sum of ``exp(score − m)`` over the keys seen so far;
- ``acc``, the sum of ``exp(score − m) · v`` over the same keys.

When a block brings a larger maximum ``m'``, the old sums are rescaled by
``exp(m − m')`` before the block's terms are added; at the end
``acc / s`` is exactly ``softmax(q kᵀ / √d_k) v``. Only a ``(Lq, block)``
slice of scores exists at any time, so memory grows with the length, not
with its square. (The real kernel also tiles the queries and keeps the
blocks in a GPU's on-chip memory; the saving in time comes from there, and
this loop in Python shows the arithmetic, not the speed.)

Shape letters: ``Lq``/``Lk`` query/key lengths, ``d_k``/``d_v`` key/value widths.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..checks import check_positive_int, check_qkv

__all__ = ["flash_attention"]


def flash_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, block_size: int = 64
) -> Tensor:
    """softmax(q kᵀ / √d_k) v, computed over blocks of ``block_size`` keys.

    Args:
        q: queries ``(..., Lq, d_k)``.
        k: keys ``(..., Lk, d_k)``.
        v: values ``(..., Lk, d_v)``.
        mask: optional, broadcastable to ``(..., Lq, Lk)``. Bool: True = may
            attend. Float: added to the scores (``-inf`` blocks a key).
        block_size: keys per block (the last block may be shorter).

    Returns: ``(..., Lq, d_v)``, equal (up to rounding) to
    :func:`~minitransformer.attention.scaled_dot_product_attention`'s
    output. A query whose keys are all blocked gets zeros, never NaN: the
    package's :func:`~minitransformer.attention.masked_softmax` convention
    (its ``s`` stays 0, and ``acc / s`` is taken as 0 there).
    """
    check_qkv(q, k, v, mask, "flash_attention")
    check_positive_int(block_size, "block_size", "flash_attention")
    lq, lk = q.shape[-2], k.shape[-2]
    if mask is not None:  # a view of the full shape, so that it can be sliced by keys
        mask = mask.expand(torch.broadcast_shapes(mask.shape, (*q.shape[:-1], lk)))
    scale = 1 / math.sqrt(q.shape[-1])
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    m = q.new_full((*batch, lq, 1), float("-inf"))  # running max
    s = q.new_zeros((*batch, lq, 1))  # running sum of exp(score - m)
    acc = q.new_zeros((*batch, lq, v.shape[-1]))  # running sum of exp(score - m) v
    for start in range(0, lk, block_size):
        block = slice(start, start + block_size)
        scores = q @ k[..., block, :].transpose(-2, -1) * scale  # (..., Lq, block)
        if mask is not None:
            keep = mask[..., block]
            scores = scores.masked_fill(~keep, float("-inf")) if keep.dtype == torch.bool \
                else scores + keep
        new_m = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (..., Lq, 1)
        shift = new_m.masked_fill(torch.isneginf(new_m), 0.0)  # all blocked so far: exp(-inf) = 0
        p = torch.exp(scores - shift)  # (..., Lq, block), blocked keys 0
        rescale = torch.exp(m - shift)  # the old terms, brought to the new max
        s = s * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v[..., block, :]
        m = new_m
    return acc / s.masked_fill(s == 0, 1.0)  # (..., Lq, d_v); a row with no key: 0 / 1
