"""Scaled dot-product attention and multi-head attention.

Implements section 3.2 of Vaswani et al., "Attention Is All You Need" (2017):

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
    head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)

Masks are bool with **True = may attend** (see :mod:`minitransformer.masks`;
``nn.MultiheadAttention`` uses True = blocked) or float, added to the scores.
A query whose keys are all masked gets an output of zeros and weights of
zeros, never NaN.

Shape letters: ``B`` batch, ``H`` heads, ``Lq``/``Lk`` query/key lengths,
``D`` model width, ``Dh`` head width (``D / H``), ``d_k``/``d_v`` key/value
widths.

For decoding one token at a time, :class:`KVCache` holds a layer's keys and
values split into heads, :meth:`MultiHeadAttention.project_kv` computes them
and :meth:`MultiHeadAttention.attend_cached` attends to them (see
:mod:`minitransformer.decoding`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention", "KVCache"]


def _check_mask(mask: Tensor, target: tuple[int, ...], where: str) -> None:
    """Raise a clear error if ``mask`` is not bool/float or does not broadcast to ``target``."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{where}: mask must be a tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
        raise TypeError(
            f"{where}: mask must be bool (True = may attend) or float (added to the "
            f"scores), got dtype {mask.dtype}"
        )
    try:
        shape = torch.broadcast_shapes(mask.shape, target)
    except RuntimeError:
        shape = None
    if shape != torch.Size(target):
        raise ValueError(
            f"{where}: mask of shape {tuple(mask.shape)} does not broadcast to the "
            f"attention scores' shape {tuple(target)} (..., Lq, Lk)"
        )


def _fully_masked_rows(mask: Tensor) -> Tensor:
    """``(..., Lq, 1)`` bool: True for query rows in which every key is blocked."""
    if mask.dtype == torch.bool:
        return ~mask.any(dim=-1, keepdim=True)
    return torch.isneginf(mask).all(dim=-1, keepdim=True)


def _unblock_rows(mask: Tensor, dead: Tensor) -> Tensor:
    """Let fully masked rows attend everywhere (their output is zeroed afterwards),
    so that softmax sees no row of only ``-inf`` and produces no NaN."""
    if mask.dtype == torch.bool:
        return mask | dead
    return mask.masked_fill(dead, 0.0)


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """softmax(q kᵀ / √d_k) v, written out step by step.

    Args:
        q: queries ``(..., Lq, d_k)``.
        k: keys ``(..., Lk, d_k)``.
        v: values ``(..., Lk, d_v)``.
        mask: optional, broadcastable to ``(..., Lq, Lk)``. Bool: True = may
            attend (as in ``F.scaled_dot_product_attention``; the opposite of
            ``nn.MultiheadAttention``). Float: added to the scores.
        dropout_p: dropout probability applied to the weights (use 0 in eval).

    Returns:
        ``(output, weights)``: output ``(..., Lq, d_v)``; weights
        ``(..., Lq, Lk)``, the softmax probabilities before dropout. Each row
        sums to 1, except rows whose keys are all masked, which are all zero
        (and so is their output).
    """
    where = "scaled_dot_product_attention"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{where}: {name} must be a tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(
                f"{where}: {name} must have at least 2 dims (..., len, dim), "
                f"got shape {tuple(t.shape)}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"{where}: q and k must share their last dimension d_k, got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"{where}: k and v must have the same length Lk (dim -2), got k "
            f"{tuple(k.shape)} and v {tuple(v.shape)}"
        )

    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)
    dead = None
    if mask is not None:
        _check_mask(mask, tuple(scores.shape), where)
        dead = _fully_masked_rows(mask)  # (..., Lq, 1)
        mask = _unblock_rows(mask, dead)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    weights = scores.softmax(dim=-1)  # (..., Lq, Lk)
    if dead is not None:
        weights = weights.masked_fill(dead, 0.0)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., Lq, d_v), (..., Lq, Lk)


@dataclass
class KVCache:
    """Keys and values of one attention layer, kept between decoding steps.

    ``k`` and ``v`` are ``(B, H, L, Dh)``: already projected and split into
    heads, so a step only projects its new positions. Self-attention caches
    grow by one position per step (:meth:`append`); the cross-attention cache
    of the encoder's memory is computed once per sentence.
    """

    k: Tensor
    v: Tensor

    def append(self, new: KVCache) -> KVCache:
        """The cache with ``new``'s positions added after its own (dim 2)."""
        return KVCache(torch.cat([self.k, new.k], dim=2), torch.cat([self.v, new.v], dim=2))

    def index_select(self, index: Tensor) -> KVCache:
        """Rows ``index`` ``(N',)`` of the batch (beam search reorders them)."""
        return KVCache(self.k.index_select(0, index), self.v.index_select(0, index))


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate ``w_q``, ``w_k``, ``w_v``, ``w_o`` projections.

    Args:
        d_model: model width ``D``.
        num_heads: number of heads ``H``; must divide ``d_model``.
        dropout: dropout on the attention weights during training.
        bias: whether the four projections have biases.

    Differences from ``nn.MultiheadAttention``: batch-first always; a bool
    mask means True = *may attend* (there: True = blocked); there is one mask
    argument (combine padding and causal masks with ``&``); the returned
    weights are per head ``(B, H, Lq, Lk)``, not averaged. Weights map one to
    one (``in_proj_weight`` is ``w_q``, ``w_k``, ``w_v`` stacked): see
    :mod:`minitransformer.instruments.interop`.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(
                f"MultiHeadAttention: d_model ({d_model}) must be divisible by "
                f"num_heads ({num_heads})"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        #: When True (see :func:`minitransformer.instruments.probe.record_attention`), every
        #: forward takes the readable path and keeps its weights in ``last_weights``.
        self.record_weights = False
        self.last_weights: Tensor | None = None

    def _split(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, Dh)

    def _project_qkv(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        if query is key and key is value:
            # Self-attention: one matmul with the three weights stacked (as
            # nn.MultiheadAttention's in_proj does) is faster than three.
            weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])
            bias = None
            if self.w_q.bias is not None:
                bias = torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
            return F.linear(query, weight, bias).chunk(3, dim=-1)
        if key is value:
            weight = torch.cat([self.w_k.weight, self.w_v.weight])
            bias = None if self.w_k.bias is None else torch.cat([self.w_k.bias, self.w_v.bias])
            return (self.w_q(query), *F.linear(key, weight, bias).chunk(2, dim=-1))
        return self.w_q(query), self.w_k(key), self.w_v(value)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(B, Lq, D)``.
            key: ``(B, Lk, D)``.
            value: ``(B, Lk, D)``.
            mask: optional bool (True = may attend) or float (added), broadcastable
                to ``(B, H, Lq, Lk)``; a 3-d mask ``(B, Lq, Lk)`` is applied to
                every head.
            need_weights: also return the attention weights (takes the readable
                path; otherwise the fused ``F.scaled_dot_product_attention``).

        Returns:
            ``(output, weights)``: output ``(B, Lq, D)``; weights
            ``(B, H, Lq, Lk)`` if ``need_weights`` else None.
        """
        where = type(self).__name__
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError(f"{where}: {name} must be a tensor, got {type(t).__name__}")
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{where}: {name} must have shape (batch, len, d_model={self.d_model}), "
                    f"got {tuple(t.shape)}"
                )
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"{where}: key and value must have the same batch and length, got key "
                f"{tuple(key.shape)} and value {tuple(value.shape)}"
            )
        if query.shape[0] != key.shape[0]:
            raise ValueError(
                f"{where}: query and key must have the same batch size, got "
                f"{query.shape[0]} and {key.shape[0]}"
            )
        b, lq, _ = query.shape
        lk = key.shape[1]
        if mask is not None:
            if isinstance(mask, Tensor) and mask.dim() == 3:
                mask = mask.unsqueeze(1)  # (B, 1, Lq, Lk): same for every head
            _check_mask(mask, (b, self.num_heads, lq, lk), where)

        q, k, v = self._project_qkv(query, key, value)
        q, k, v = self._split(q), self._split(k), self._split(v)  # (B, H, L, Dh)
        out, weights = self._attend(q, k, v, mask, need_weights)
        return out, (weights if need_weights else None)

    def _attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Heads ``(B, H, L, Dh)`` → output ``(B, Lq, D)`` after ``w_o``, and the
        weights ``(B, H, Lq, Lk)`` when they were computed."""
        b, _, lq, _ = q.shape
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights or self.record_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=p)
            if self.record_weights:
                self.last_weights = weights.detach()
        else:
            dead = None
            if mask is not None:
                if mask.dtype == torch.bool and bool(mask.all()):
                    mask = None  # nothing blocked (a batch without padding): faster kernel
                else:
                    dead = _fully_masked_rows(mask)
                    if bool(dead.any()):
                        mask = _unblock_rows(mask, dead)
                    else:
                        dead = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            if dead is not None:
                out = out.masked_fill(dead, 0.0)
        out = out.transpose(1, 2).reshape(b, lq, self.d_model)  # (B, Lq, D)
        return self.w_o(out), weights

    def project_kv(self, x: Tensor) -> KVCache:
        """Keys and values of ``x`` ``(B, L, D)``, split into heads: a
        :class:`KVCache` of ``(B, H, L, Dh)`` tensors."""
        weight = torch.cat([self.w_k.weight, self.w_v.weight])
        bias = None if self.w_k.bias is None else torch.cat([self.w_k.bias, self.w_v.bias])
        k, v = F.linear(x, weight, bias).chunk(2, dim=-1)
        # contiguous (B, H, L, Dh) copies: attention over them at every step is faster
        return KVCache(self._split(k).contiguous(), self._split(v).contiguous())

    def attend_cached(self, query: Tensor, cache: KVCache, mask: Tensor | None = None) -> Tensor:
        """Attend from ``query`` ``(B, Lq, D)`` to keys and values already in
        ``cache`` (from :meth:`project_kv`). Same result as ``forward`` with the
        keys/values the cache was made from; ``mask`` broadcastable to
        ``(B, H, Lq, Lk)``. Returns ``(B, Lq, D)``."""
        q = self._split(self.w_q(query))  # (B, H, Lq, Dh)
        return self._attend(q, cache.k, cache.v, mask, need_weights=False)[0]
