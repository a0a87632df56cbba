"""Self-attention with relative position representations.

Shaw, Uszkoreit and Vaswani, "Self-Attention with Relative Position
Representations" (NAACL 2018). Instead of adding a code of each token's
*absolute* position to its embedding, every attention layer learns two
vectors per *offset* ``j - i`` between a query at position ``i`` and a key at
position ``j`` (clipped to ``[-K, K]``): ``a^K`` is added to the key inside
the dot product (equation 4 of the paper), ``a^V`` to the value inside the
weighted sum, after the softmax (equation 3; ``z`` is the head output):

    e_ij = q_i · (k_j + a^K_ij) / √d_h
    z_i  = Σ_j softmax_j(e_ij) (v_j + a^V_ij)

``a^K_ij = w^K[clip(j - i, -K, K)]`` and likewise ``a^V``; the two tables of
``2K + 1`` vectors of width ``d_h`` are shared by all heads of a layer, as in
the paper. Such a layer sees the order of its inputs (it is not
permutation-equivariant) with no absolute position anywhere.

:func:`use_relative_positions` swaps the self-attentions of a
:class:`~minitransformer.model.Transformer` for this one, so the model can be
built with ``positional="none"``; cached (incremental) decoding works as
with the plain attention, the new query's position being the number of
cached keys.

Shape letters: ``B`` batch, ``H`` heads, ``Lq``/``Lk`` query/key lengths,
``D`` model width, ``Dh`` head width, ``K`` clipping distance.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..attention import MultiHeadAttention
from ..checks import check_positive_int

__all__ = ["relative_position_index", "RelativeMultiHeadAttention", "use_relative_positions"]


def relative_position_index(
    query_len: int,
    key_len: int,
    max_distance: int,
    device: torch.device | str | None = None,
    offset: int = 0,
) -> Tensor:
    """``(Lq, Lk)`` int64: ``clip(j - (i + offset), -K, K) + K``, the row of
    the offset table used for query ``i`` and key ``j`` (0 … 2K). Query ``i``
    sits at position ``i + offset``: 0 when queries and keys are the same
    positions, ``Lk - Lq`` when the queries are the last ``Lq`` of them."""
    for name, value in (("query_len", query_len), ("key_len", key_len),
                        ("max_distance", max_distance)):
        check_positive_int(value, name, "relative_position_index")
    i = torch.arange(offset, offset + query_len, device=device)[:, None]  # (Lq, 1)
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
    signature, the ``(output, weights)`` result, the masking and the
    key/value cache are :class:`MultiHeadAttention`'s: only :meth:`score`
    (the ``a^K`` term) and :meth:`combine` (the ``a^V`` term) differ, and
    there is no fused path.

    The queries are taken to be the *last* ``Lq`` of the ``Lk`` positions:
    query ``i`` sits at position ``Lk - Lq + i``. In self-attention over a
    whole sequence (``Lq = Lk``) that is position ``i``; in a cached decoding
    step the new query follows the cached keys, so incremental decoding gives
    what a full pass gives.
    """

    fused = False  # the a^K and a^V terms need the written-out scores and weights

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
        check_positive_int(max_distance, "max_distance", type(self).__name__)
        self.max_distance = max_distance
        self.rel_k = nn.Embedding(2 * max_distance + 1, self.head_dim)
        self.rel_v = nn.Embedding(2 * max_distance + 1, self.head_dim) if values else None
        for table in (self.rel_k, self.rel_v):
            if table is not None:
                nn.init.normal_(table.weight, std=1 / math.sqrt(self.head_dim))

    def _index(self, query_len: int, key_len: int, device: torch.device) -> Tensor:
        """``(Lq, Lk)`` rows of the offset tables, queries at the last positions."""
        return relative_position_index(
            query_len, key_len, self.max_distance, device, offset=key_len - query_len
        )

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        """``e_ij = q_i · (k_j + a^K_ij) / √Dh``: ``(B, H, Lq, Dh)``,
        ``(B, H, Lk, Dh)`` → ``(B, H, Lq, Lk)``."""
        a_k = self.rel_k(self._index(q.shape[2], k.shape[2], q.device))  # (Lq, Lk, Dh)
        scores = q @ k.transpose(-2, -1) + torch.einsum("bhqd,qkd->bhqk", q, a_k)
        return scores / math.sqrt(self.head_dim)  # (B, H, Lq, Lk)

    def combine(self, weights: Tensor, v: Tensor) -> Tensor:
        """``z_i = Σ_j α_ij (v_j + a^V_ij)``: ``(B, H, Lq, Lk)``,
        ``(B, H, Lk, Dh)`` → ``(B, H, Lq, Dh)``."""
        out = weights @ v  # (B, H, Lq, Dh)
        if self.rel_v is not None:
            a_v = self.rel_v(self._index(weights.shape[2], weights.shape[3], weights.device))
            out = out + torch.einsum("bhqk,qkd->bhqd", weights, a_v)  # a_v: (Lq, Lk, Dh)
        return out


def use_relative_positions(
    model: nn.Module, max_distance: int = 16, values: bool = True
) -> nn.Module:
    """Replace every ``self_attn`` :class:`MultiHeadAttention` in ``model`` (encoder
    and decoder layers) by a :class:`RelativeMultiHeadAttention` with the same
    projection weights and new offset tables; cross-attention is left as it is
    (queries and keys there belong to different sequences).

    Build the model with ``positional="none"`` to have relative positions
    only. Returns ``model`` (changed in place). Cached decoding
    (``decode_next``) gives what full decoding gives.
    """
    swapped = 0
    for module in list(model.modules()):
        old = getattr(module, "self_attn", None)
        if isinstance(old, MultiHeadAttention) and not isinstance(old, RelativeMultiHeadAttention):
            if old.num_kv_heads != old.num_heads or old.rotary:
                raise ValueError(
                    "use_relative_positions: the self-attention has grouped key/value heads "
                    "or rotary positions; relative attention replaces only plain "
                    "MultiHeadAttention (num_kv_heads=None, positional other than 'rope')"
                )
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
