"""Scaled dot-product attention and multi-head attention.

Implements section 3.2 of Vaswani et al., "Attention Is All You Need" (2017):

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
    head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)

Masks are bool with **True = may attend** (see :mod:`minitransformer.masks`;
``nn.MultiheadAttention`` uses True = blocked) or float, added to the scores.
A query whose keys are all masked gets an output of zeros and weights of
zeros, never NaN: :func:`masked_softmax` is the one kernel that applies a
mask, used by :func:`scaled_dot_product_attention`, by
:class:`MultiHeadAttention`'s readable path, by the relative attention of
:mod:`minitransformer.variants.relative` and by the RNN attention scorers.
The fused path, ``F.scaled_dot_product_attention``, follows the same rule
(zeros for a fully masked row, tested equal), so no path branches on the
mask's values: nothing in a forward pass waits for the host.

Shape letters: ``B`` batch, ``H`` heads, ``Lq``/``Lk`` query/key lengths,
``D`` model width, ``Dh`` head width (``D / H``), ``d_k``/``d_v`` key/value
widths.

For decoding one token at a time, a :class:`KVCache` holds a layer's keys
and values split into heads: ``forward(..., cache=cache)`` appends the new
positions' keys and values to it and attends to all of them (see
:mod:`minitransformer.decoding`).

Two switches of later models (both off by default): grouped-query attention
(Ainslie et al., "GQA", 2023; ``num_kv_heads=1`` is Shazeer's multi-query
attention, 2019), in which ``w_k`` and ``w_v`` project to fewer heads than
``w_q`` and each key/value head serves a group of query heads, so the cache
holds ``num_kv_heads`` heads; and rotary positions (``rotary=True``,
:func:`~minitransformer.positional.apply_rotary`), which turn queries and
keys by their positions before the scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .checks import check_attention_inputs, check_heads, check_kv_heads, check_qkv
from .positional import apply_rotary

__all__ = [
    "masked_softmax",
    "scaled_dot_product_attention",
    "fused_attention",
    "short_attention",
    "SHORT_ON_CPU",
    "stacked_linear",
    "MultiHeadAttention",
    "KVCache",
]


def masked_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last axis in which blocked keys get exactly zero weight.

    Args:
        scores: ``(..., Lk)`` float.
        mask: optional, broadcastable to ``scores``. Bool: True = may attend.
            Float: added to the scores (``-inf`` blocks a key).

    Returns:
        weights of the shape of ``scores``; each row sums to 1, except rows
        in which every key is blocked (every score ``-inf``): those are all
        zero, never NaN, and pass back zero gradients.
    """
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    dead = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (..., 1): no key to attend to
    # A row of only -inf would give 0/0 = NaN: softmax a row of zeros instead, then zero it.
    weights = scores.masked_fill(dead, 0.0).softmax(dim=-1)
    return weights.masked_fill(dead, 0.0)


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
    check_qkv(q, k, v, mask, "scaled_dot_product_attention")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Lq, Lk)
    weights = masked_softmax(scores, mask)  # (..., Lq, Lk)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., Lq, d_v), (..., Lq, Lk)


#: On a CPU, in training (autograd recording), attention of at most this many
#: queries over at most this many keys is computed by :func:`short_attention`:
#: PyTorch's CPU flash kernel took 1.3x (64 positions) to 2.4x (16) as long for
#: a forward and backward pass of a training batch, and was faster from 256 on.
#: Without gradients (decoding, evaluation) PyTorch's kernel is kept: one query
#: of one sequence took it 0.02 ms against 0.05 (``benchmarks/README.md``).
SHORT_ON_CPU = 64

def fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0,
    enable_gqa: bool = False,
) -> Tensor:
    """Attention without its weights, by the fastest kernel for the inputs:
    ``F.scaled_dot_product_attention`` (bool mask: True = may attend), or on a
    CPU, in training (gradients recorded), for at most :data:`SHORT_ON_CPU`
    queries and keys with a bool mask (or none), :func:`short_attention`; the
    same function either way (tested equal). ``enable_gqa``: ``k`` and ``v``
    have fewer heads than ``q``, each serving a group of consecutive query
    heads (grouped-query attention).

    On a CPU, bf16 inputs (bf16 autocast's projections) are computed in
    float32, output in bf16: PyTorch's CPU attention kernel is slower in bf16
    than in float32 in the backward pass (measured: ``benchmarks/README.md``).
    Shapes as in :func:`scaled_dot_product_attention` (``(B, H, L, Dh)``
    inputs); every test reads metadata only.
    """
    if q.device.type == "cpu":
        if q.dtype == torch.bfloat16:
            with torch.autocast("cpu", enabled=False):
                out = fused_attention(q.float(), k.float(), v.float(), mask, dropout_p,
                                      enable_gqa)
            return out.to(q.dtype)
        short = max(q.shape[-2], k.shape[-2]) <= SHORT_ON_CPU
        training = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad
                                                 or v.requires_grad)
        if short and training and q.dtype in (torch.float32, torch.float64) and (
                mask is None or mask.dtype == torch.bool):
            return short_attention(q, k, v, mask, dropout_p, enable_gqa)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, enable_gqa=enable_gqa
    )


def short_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(q kᵀ / √d_k) v as two batched matrix products, without the weights.

    What :func:`scaled_dot_product_attention` computes, in fewer operations:
    the mask becomes the dtype's most negative finite number added inside the
    first product (``torch.baddbmm``), so a blocked key's weight is exactly 0
    however large the scores, and a row of only blocked keys stays finite; a
    query whose keys are all masked gets an output of zeros (as in the other
    paths), with zero gradients. For short
    sequences on a CPU this beats PyTorch's flash kernel (:data:`SHORT_ON_CPU`).

    Args:
        q: ``(B, H, Lq, Dh)`` float32 or float64.
        k, v: ``(B, H, Lk, Dh)``; with ``enable_gqa`` ``(B, Hkv, Lk, Dh)``,
            key/value head ``j`` serving query heads ``j·H/Hkv .. (j + 1)·H/Hkv − 1``.
        mask: bool, True = may attend, broadcastable to ``(B, H, Lq, Lk)``; or None.
        dropout_p: dropout on the weights.

    Returns: ``(B, H, Lq, Dh)``.
    """
    b, h, lq, dh = q.shape
    if enable_gqa and k.shape[1] != h:
        k = k.repeat_interleave(h // k.shape[1], dim=1)  # (B, H, Lk, Dh)
        v = v.repeat_interleave(h // v.shape[1], dim=1)
    lk = k.shape[-2]
    q3 = q.reshape(b * h, lq, dh)
    kt = k.reshape(b * h, lk, dh).transpose(1, 2)  # (B·H, Dh, Lk)
    scale = 1 / math.sqrt(dh)
    if mask is None:
        scores = torch.bmm(q3, kt).mul_(scale)  # (B·H, Lq, Lk)
    else:
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(
            ~mask, torch.finfo(q.dtype).min)
        bias = bias.expand(b, h, lq, lk).reshape(b * h, lq, lk)
        scores = torch.baddbmm(bias, q3, kt, alpha=scale)
    weights = scores.softmax(dim=-1)
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p)
    out = torch.bmm(weights, v.reshape(b * h, lk, dh)).view(b, h, lq, dh)
    if mask is not None:  # a query with no key to attend to: zeros
        out = out * mask.any(dim=-1, keepdim=True)
    return out


def stacked_linear(x: Tensor, *layers: nn.Linear) -> tuple[Tensor, ...]:
    """``layer(x)`` for each of ``layers`` (same input width), computed with
    one matmul of their stacked weights, as ``nn.MultiheadAttention``'s
    ``in_proj`` does: ``(B, L, D)`` → one ``(B, L, D_i)`` tensor per layer."""
    weight = torch.cat([layer.weight for layer in layers])  # (ΣD_i, D)
    bias = None if layers[0].bias is None else torch.cat([layer.bias for layer in layers])
    return F.linear(x, weight, bias).split([layer.out_features for layer in layers], dim=-1)


@dataclass
class KVCache:
    """Keys and values of one attention layer, kept between decoding steps.

    ``k`` and ``v`` are ``(B, H, L, Dh)``: already projected and split into
    heads (``H`` is the layer's ``num_kv_heads``, fewer than its query heads
    in grouped-query attention; keys already rotated with rotary positions),
    so a step only projects its new positions. A self-attention cache
    grows by the new positions at every call (:meth:`update`, in place); the
    cross-attention cache of the encoder's memory is computed once per
    sentence (:meth:`MultiHeadAttention.project_kv`) and read as it is.
    """

    k: Tensor
    v: Tensor

    def update(self, k: Tensor | None, v: Tensor | None) -> tuple[Tensor, Tensor]:
        """Append the new positions' keys and values ``(B, H, L', Dh)`` after
        the cached ones (None: append nothing) and return all of them
        ``(B, H, L + L', Dh)``."""
        if k is not None:
            self.k = torch.cat([self.k, k], dim=2)
            self.v = torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def index_select(self, index: Tensor) -> KVCache:
        """A new cache of rows ``index`` ``(N',)`` of the batch (beam search reorders them)."""
        return KVCache(self.k.index_select(0, index), self.v.index_select(0, index))


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate ``w_q``, ``w_k``, ``w_v``, ``w_o`` projections.

    Args:
        d_model: model width ``D``.
        num_heads: number of heads ``H``; must divide ``d_model``.
        dropout: dropout on the attention weights during training.
        bias: whether the four projections have biases.
        num_kv_heads: key/value heads ``Hkv`` (None: ``H``; 1: multi-query
            attention); must divide ``H``. ``w_k`` and ``w_v`` then map
            ``D → Hkv·Dh``, query head ``h`` uses key/value head
            ``h // (H / Hkv)`` (``F.scaled_dot_product_attention``'s
            ``enable_gqa`` grouping), and a cache holds ``Hkv`` heads.
        rotary: rotate queries and keys by their positions
            (:func:`~minitransformer.positional.apply_rotary`, ``Dh`` even)
            before the scores. Keys ``0 .. Lk − 1`` (after the cached ones),
            queries at the *last* ``Lq`` of those positions (in
            self-attention, the same positions as the keys; with a cache the
            offset is the number of cached keys, so cached decoding gives
            what a full pass gives). For self-attention only.

    Two paths compute the same function (tested equal): the readable one,
    ``combine(masked_softmax(score(q, k)), v)``, which can
    return the weights; and the fused ``F.scaled_dot_product_attention``,
    taken when no weights are asked for. A variant changes how scores and
    outputs are formed by overriding :meth:`score` and :meth:`combine` and
    setting ``fused = False`` (see
    :class:`~minitransformer.variants.relative.RelativeMultiHeadAttention`).

    Differences from ``nn.MultiheadAttention``: batch-first always; a bool
    mask means True = *may attend* (there: True = blocked); there is one mask
    argument (combine padding and causal masks with ``&``); the returned
    weights are per head ``(B, H, Lq, Lk)``, not averaged. Weights map one to
    one (``in_proj_weight`` is ``w_q``, ``w_k``, ``w_v`` stacked): see
    :mod:`minitransformer.instruments.interop`.
    """

    #: Whether ``forward`` may use ``F.scaled_dot_product_attention`` when no
    #: weights are asked for (False in variants that override ``score``/``combine``).
    fused: bool = True

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 num_kv_heads: int | None = None, rotary: bool = False):
        super().__init__()
        where = type(self).__name__
        check_heads(d_model, num_heads, where)
        check_kv_heads(num_heads, num_kv_heads, where)
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.head_dim = d_model // num_heads
        if rotary and self.head_dim % 2:
            raise ValueError(f"{where}: rotary positions need an even head width, got "
                             f"d_model / num_heads = {self.head_dim}")
        self.rotary = rotary
        self.dropout = dropout
        kv_width = self.num_kv_heads * self.head_dim
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, kv_width, bias=bias)
        self.w_v = nn.Linear(d_model, kv_width, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        #: When True (see :func:`minitransformer.instruments.probe.record_attention`), every
        #: forward takes the readable path and keeps its weights in ``last_weights``.
        self.record_weights = False
        self.last_weights: Tensor | None = None

    def forward(
        self,
        query: Tensor,
        key: Tensor | None,
        value: Tensor | None,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        check: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(B, Lq, D)``.
            key: ``(B, Lk, D)``; None (with ``value``) to attend to ``cache`` alone.
            value: ``(B, Lk, D)``.
            mask: optional bool (True = may attend) or float (added), broadcastable
                to ``(B, H, Lq, Lk)``; a 3-d mask ``(B, Lq, Lk)`` is applied to
                every head. With a cache, ``Lk`` counts the cached positions too.
            need_weights: also return the attention weights (takes the readable
                path; otherwise the fused ``F.scaled_dot_product_attention``).
            cache: keys and values of earlier positions (incremental decoding):
                the new ones of ``key``/``value`` are appended to it (in place)
                and the queries attend to all of them.
            check: check the arguments first (False: the caller, a layer,
                has checked them once for all its sub-layers).

        Returns:
            ``(output, weights)``: output ``(B, Lq, D)``; weights
            ``(B, H, Lq, Lk)`` if ``need_weights`` else None.
        """
        if check:
            cached = None if cache is None else cache.k.shape[2]
            check_attention_inputs(
                query, key, value, mask, self.d_model, self.num_heads, type(self).__name__, cached
            )
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, 1, Lq, Lk): the same for every head
        q, k, v = self.project(query, key, value)  # (B, H, Lq, Dh), (B, Hkv, Lk, Dh) x2
        if self.rotary:
            q, k = self.rotate(q, k, 0 if cache is None else cache.k.shape[2])
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, Lk, Dh): every position so far
        p = self.dropout if self.training else 0.0
        grouped = self.num_kv_heads != self.num_heads
        if self.fused and not (need_weights or self.record_weights):
            out, weights = fused_attention(q, k, v, mask, p, grouped), None  # (B, H, Lq, Dh)
        else:
            if grouped:
                k, v = self.expand_kv(k), self.expand_kv(v)  # (B, H, Lk, Dh)
            out, weights = self.attend(q, k, v, mask, p)  # the readable path
        b, _, lq, _ = q.shape
        out = out.transpose(1, 2).reshape(b, lq, self.d_model)  # (B, Lq, D): heads side by side
        return self.w_o(out), (weights if need_weights else None)

    def rotate(self, q: Tensor, k: Tensor | None, cached: int) -> tuple[Tensor, Tensor | None]:
        """Rotary positions: the new keys ``(B, Hkv, Lk', Dh)`` sit at
        ``cached .. cached + Lk' − 1``, the queries ``(B, H, Lq, Dh)`` at the
        last ``Lq`` positions up to there (see the class docstring)."""
        total = cached + (0 if k is None else k.shape[2])
        q = apply_rotary(q, torch.arange(total - q.shape[2], total, device=q.device), check=False)
        if k is not None:
            k = apply_rotary(k, torch.arange(cached, total, device=k.device), check=False)
        return q, k

    def expand_kv(self, x: Tensor) -> Tensor:
        """Grouped-query attention's key/value heads, each repeated for its group
        of query heads: ``(B, Hkv, L, Dh)`` → ``(B, H, L, Dh)``."""
        return x.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float
    ) -> tuple[Tensor, Tensor]:
        """The readable path, ``combine(masked_softmax(score(q, k)), v)``:
        ``(B, H, Lq, Dh)``, ``(B, H, Lk, Dh)`` x2 → output ``(B, H, Lq, Dh)``
        and weights ``(B, H, Lq, Lk)`` (before dropout; kept in
        ``last_weights`` when ``record_weights``)."""
        weights = masked_softmax(self.score(q, k), mask)  # (B, H, Lq, Lk)
        out = self.combine(F.dropout(weights, dropout_p) if dropout_p > 0 else weights, v)
        if self.record_weights:
            self.last_weights = weights.detach()
        return out, weights

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        """Attention scores ``q kᵀ / √Dh``: ``(B, H, Lq, Dh)``, ``(B, H, Lk, Dh)``
        → ``(B, H, Lq, Lk)``, before the mask."""
        return q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)

    def combine(self, weights: Tensor, v: Tensor) -> Tensor:
        """Each head's weighted average of the values: ``(B, H, Lq, Lk)``,
        ``(B, H, Lk, Dh)`` → ``(B, H, Lq, Dh)``."""
        return weights @ v

    def project(
        self, query: Tensor, key: Tensor | None, value: Tensor | None
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Queries, keys and values split into heads, ``(B, H, L, Dh)`` and
        ``(B, Hkv, L, Dh)`` (keys and values None when ``key`` is None). An input passed as
        several arguments (``x, x, x`` in self-attention, ``memory, memory``
        in cross-attention) is projected once by :func:`stacked_linear`."""
        if query is key and key is value:  # self-attention: W_q, W_k, W_v stacked
            q, k, v = stacked_linear(query, self.w_q, self.w_k, self.w_v)
        elif key is None:
            return self._split(self.w_q(query), self.num_heads), None, None
        elif key is value:  # cross-attention: W_k, W_v stacked
            q, (k, v) = self.w_q(query), stacked_linear(key, self.w_k, self.w_v)
        else:
            q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        h, hkv = self.num_heads, self.num_kv_heads
        return self._split(q, h), self._split(k, hkv), self._split(v, hkv)

    def project_kv(self, x: Tensor) -> KVCache:
        """Keys and values of ``x`` ``(B, L, D)``, split into heads: a
        :class:`KVCache` of ``(B, Hkv, L, Dh)`` tensors (the cross-attention
        cache of the encoder's memory; not rotated)."""
        k, v = stacked_linear(x, self.w_k, self.w_v)
        # contiguous (B, Hkv, L, Dh) copies: attention over them at every step is faster
        hkv = self.num_kv_heads
        return KVCache(self._split(k, hkv).contiguous(), self._split(v, hkv).contiguous())

    def _split(self, x: Tensor, heads: int | None = None) -> Tensor:
        """``(B, L, heads·Dh)`` → ``(B, heads, L, Dh)`` (``heads``: ``num_heads``
        by default, as chapter 4 calls it)."""
        b, n, _ = x.shape
        heads = self.num_heads if heads is None else heads
        return x.view(b, n, heads, self.head_dim).transpose(1, 2)  # (B, heads, L, Dh)
