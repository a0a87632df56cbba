"""Self-attention with relative position representations.

Shaw, Uszkoreit and Vaswani, "Self-Attention with Relative Position
Representations" (NAACL 2018). Instead of adding a code of each token's
*absolute* position to its embedding, every attention layer learns one vector
per *offset* ``j - i`` between a query at position ``i`` and a key at
position ``j`` (clipped to ``[-K, K]``), and adds it to the key and the value
(equations 3 and 4 of the paper, with ``z`` the head output):

    e_ij = q_i · (k_j + a^K_ij) / √d_h
    z_i  = Σ_j softmax_j(e_ij) (v_j + a^V_ij)

``a^K_ij = w^K[clip(j - i, -K, K)]`` and likewise ``a^V``; the two tables of
``2K + 1`` vectors of width ``d_h`` are shared by all heads of a layer, as in
the paper. Such a layer sees the order of its inputs (it is not
permutation-equivariant) with no absolute position anywhere.

:func:`use_relative_positions` swaps the self-attentions of a
:class:`~minitransformer.model.Transformer` for this one, so the model can be
built with ``positional="none"``. It supports full (non-incremental) forward
passes: query ``i`` and key ``j`` are taken to sit at positions ``i`` and
``j`` of the same sequence.

Shape letters: ``B`` batch, ``H`` heads, ``Lq``/``Lk`` query/key lengths,
``D`` model width, ``Dh`` head width, ``K`` clipping distance.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import MultiHeadAttention, _check_mask, _fully_masked_rows, _unblock_rows

__all__ = ["relative_position_index", "RelativeMultiHeadAttention", "use_relative_positions"]


def relative_position_index(
    query_len: int, key_len: int, max_distance: int, device: torch.device | str | None = None
) -> Tensor:
    """``(Lq, Lk)`` int64: ``clip(j - i, -K, K) + K``, the row of the offset
    table used for query ``i`` and key ``j`` (0 … 2K)."""
    for name, value in (("query_len", query_len), ("key_len", key_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"relative_position_index: {name} must be a positive int, got {value!r}"
            )
    if isinstance(max_distance, bool) or not isinstance(max_distance, int) or max_distance < 1:
        raise ValueError(
            f"relative_position_index: max_distance must be a positive int, got {max_distance!r}"
        )
    i = torch.arange(query_len, device=device)[:, None]  # (Lq, 1)
    j = torch.arange(key_len, device=device)[None, :]  # (1, Lk)
    return (j - i).clamp(-max_distance, max_distance) + max_distance  # (Lq, Lk)


class RelativeMultiHeadAttention(MultiHeadAttention):
    """Multi-head attention with learned relative position vectors on keys and values.

    Args:
        d_model: model width ``D``.
        num_heads: number of heads ``H``; must divide ``d_model``.
        max_distance: clipping distance ``K``: offsets beyond ±K share a vector
            (the paper uses K = 16 and finds little change for K ≥ 2).
        dropout: dropout on the attention weights during training.
        bias: whether the four projections have biases.
        values: also add ``a^V`` to the values (the paper's full form); False
            keeps only the key term.

    Parameters beyond :class:`MultiHeadAttention`'s: ``rel_k`` and ``rel_v``,
    ``nn.Embedding(2K + 1, Dh)``, initialised with variance ``1/Dh``. The call
    signature and the ``(output, weights)`` result are those of
    :class:`MultiHeadAttention`.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        max_distance: int = 16,
        dropout: float = 0.0,
        bias: bool = True,
        values: bool = True,
    ):
        super().__init__(d_model, num_heads, dropout, bias)
        if isinstance(max_distance, bool) or not isinstance(max_distance, int) or max_distance < 1:
            raise ValueError(
                "RelativeMultiHeadAttention: max_distance must be a positive int, "
                f"got {max_distance!r}"
            )
        self.max_distance = max_distance
        self.rel_k = nn.Embedding(2 * max_distance + 1, self.head_dim)
        self.rel_v = nn.Embedding(2 * max_distance + 1, self.head_dim) if values else None
        for table in (self.rel_k, self.rel_v):
            if table is not None:
                nn.init.normal_(table.weight, std=1 / math.sqrt(self.head_dim))

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` ``(B, Lq, D)`` to ``key``/``value`` ``(B, Lk, D)``.

        ``mask``: bool (True = may attend) or float (added), broadcastable to
        ``(B, H, Lq, Lk)``; a 3-d mask ``(B, Lq, Lk)`` applies to every head.

        Returns ``(output (B, Lq, D), weights (B, H, Lq, Lk) or None)``.
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
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(
                f"{where}: query, key and value must share the batch size and key/value their "
                f"length, got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        b, lq, _ = query.shape
        lk = key.shape[1]
        if mask is not None:
            if isinstance(mask, Tensor) and mask.dim() == 3:
                mask = mask.unsqueeze(1)  # (B, 1, Lq, Lk)
            _check_mask(mask, (b, self.num_heads, lq, lk), where)

        q, k, v = self._project_qkv(query, key, value)
        q, k, v = self._split(q), self._split(k), self._split(v)  # (B, H, L, Dh)
        idx = relative_position_index(lq, lk, self.max_distance, query.device)  # (Lq, Lk)
        a_k = self.rel_k(idx)  # (Lq, Lk, Dh)
        scores = q @ k.transpose(-2, -1) + torch.einsum("bhqd,qkd->bhqk", q, a_k)
        scores = scores / math.sqrt(self.head_dim)  # (B, H, Lq, Lk)
        dead = None
        if mask is not None:
            dead = _fully_masked_rows(mask)  # (..., Lq, 1)
            mask = _unblock_rows(mask, dead)
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(~mask, float("-inf"))
            else:
                scores = scores + mask
        weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
        if dead is not None:
            weights = weights.masked_fill(dead, 0.0)
        p = self.dropout if self.training else 0.0
        dropped = F.dropout(weights, p=p) if p > 0 else weights
        out = dropped @ v  # (B, H, Lq, Dh)
        if self.rel_v is not None:
            out = out + torch.einsum("bhqk,qkd->bhqd", dropped, self.rel_v(idx))
        if self.record_weights:
            self.last_weights = weights.detach()
        out = out.transpose(1, 2).reshape(b, lq, self.d_model)  # (B, Lq, D)
        return self.w_o(out), (weights if need_weights else None)

    def attend_cached(self, query: Tensor, cache: object, mask: Tensor | None = None) -> Tensor:
        """Not supported: a cached step would need the query's absolute offset.
        Decode without the cache (``use_cache=False``)."""
        raise NotImplementedError(
            "RelativeMultiHeadAttention does not support cached (incremental) decoding; "
            "decode with use_cache=False"
        )


def use_relative_positions(
    model: nn.Module, max_distance: int = 16, values: bool = True
) -> nn.Module:
    """Replace every ``self_attn`` :class:`MultiHeadAttention` in ``model`` (encoder
    and decoder layers) by a :class:`RelativeMultiHeadAttention` with the same
    projection weights and new offset tables; cross-attention is left as it is
    (queries and keys there belong to different sequences).

    Build the model with ``positional="none"`` to have relative positions
    only. Returns ``model`` (changed in place). Full forward passes only: an
    incremental (cached) decoder step would need the query's absolute offset.
    """
    swapped = 0
    for module in list(model.modules()):
        old = getattr(module, "self_attn", None)
        if isinstance(old, MultiHeadAttention) and not isinstance(old, RelativeMultiHeadAttention):
            new = RelativeMultiHeadAttention(
                old.d_model,
                old.num_heads,
                max_distance,
                old.dropout,
                bias=old.w_q.bias is not None,
                values=values,
            ).to(old.w_q.weight.device)
            new.load_state_dict(old.state_dict(), strict=False)
            module.self_attn = new
            swapped += 1
    if swapped == 0:
        raise ValueError(
            f"use_relative_positions: {type(model).__name__} has no layer with a "
            "MultiHeadAttention named self_attn"
        )
    return model
