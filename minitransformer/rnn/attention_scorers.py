"""Three ways to score a query against keys: additive, dot-product, general.

Attention turns scores into weights with a softmax and averages the values
with them; the scoring function is the only part that differs between:

- **additive** (Bahdanau et al., 2015, "Neural Machine Translation by Jointly
  Learning to Align and Translate"): ``score(q, k) = wᵀ tanh(W_q q + W_k k)``,
  a one-hidden-layer network applied to every (query, key) pair;
- **dot-product** (Luong et al., 2015; scaled by ``1/√d`` in Vaswani et al.,
  2017): ``score(q, k) = q·k / √d``, no parameters;
- **general** or bilinear (Luong et al., 2015, "Effective Approaches to
  Attention-based Neural Machine Translation"): ``score(q, k) = qᵀ W k``, a
  learned matrix between query and key spaces (they may differ in width).

Each class returns ``(output, weights)`` as
:func:`minitransformer.attention.scaled_dot_product_attention` does, with the
same mask convention (bool, **True = may attend**) and the same masking
kernel, :func:`minitransformer.attention.masked_softmax`: a query whose keys
are all masked gets zero weights and a zero output, never NaN.

Shape letters: ``B`` batch, ``Lq``/``Lk`` query/key lengths, ``Dq``/``Dk``/``Dv``
query/key/value widths, ``A`` hidden width of the additive scorer.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..attention import masked_softmax
from ..checks import check_query_keys_values

__all__ = [
    "AdditiveAttention",
    "DotProductAttention",
    "GeneralAttention",
]


def _normalise_mask(mask: Tensor, target: tuple[int, int, int], where: str) -> Tensor:
    """Bool mask broadcast to ``(B, Lq, Lk)``; a ``(B, 1, 1, Lk)`` padding mask is accepted."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"{where}: mask must be a bool tensor (True = may attend), got {got}")
    if mask.dim() == 4 and mask.shape[1] == 1:
        mask = mask[:, 0]  # (B, 1, 1, Lk) from masks.padding_mask -> (B, 1, Lk)
    try:
        return mask.expand(target)
    except RuntimeError:
        raise ValueError(
            f"{where}: mask of shape {tuple(mask.shape)} does not broadcast to the "
            f"scores' shape {target} (B, Lq, Lk)"
        ) from None


class _Scorer(nn.Module):
    """Shared forward: scores → masked softmax → weighted average of the values."""

    def score(self, query: Tensor, keys: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from each query to the keys and average the values.

        Args:
            query: ``(B, Lq, Dq)``.
            keys: ``(B, Lk, Dk)``.
            values: ``(B, Lk, Dv)``.
            mask: optional bool, True = may attend, broadcastable to
                ``(B, Lq, Lk)`` (a ``(B, 1, 1, Lk)`` padding mask works too).

        Returns:
            ``(output, weights)``: ``(B, Lq, Dv)`` and ``(B, Lq, Lk)``.
        """
        where = type(self).__name__
        check_query_keys_values(query, keys, values, where)
        scores = self.score(query, keys)  # (B, Lq, Lk)
        if mask is not None:
            mask = _normalise_mask(mask, tuple(scores.shape), where)
        weights = masked_softmax(scores, mask)  # (B, Lq, Lk)
        return weights @ values, weights  # (B, Lq, Dv), (B, Lq, Lk)


class DotProductAttention(_Scorer):
    """``score = q·k / √d`` (``scale=True``) or ``q·k``: no parameters.

    Args:
        scale: divide by ``√d`` (Vaswani et al.) or not (Luong et al.'s "dot").
    """

    def __init__(self, scale: bool = True):
        super().__init__()
        self.scale = scale

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """``(B, Lq, D)``, ``(B, Lk, D)`` → scores ``(B, Lq, Lk)``."""
        if query.shape[-1] != keys.shape[-1]:
            raise ValueError(
                f"{type(self).__name__}: query and keys must share their last dimension, "
                f"got query {tuple(query.shape)} and keys {tuple(keys.shape)}"
            )
        scores = query @ keys.transpose(-2, -1)  # (B, Lq, Lk)
        return scores / math.sqrt(query.shape[-1]) if self.scale else scores


class GeneralAttention(_Scorer):
    """Luong's "general" (bilinear) score ``qᵀ W k``; ``W`` is ``(Dq, Dk)``.

    Args:
        query_dim: ``Dq``.
        key_dim: ``Dk`` (defaults to ``Dq``).
    """

    def __init__(self, query_dim: int, key_dim: int | None = None):
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        self.query_dim, self.key_dim = query_dim, key_dim
        # W k for every key: a Linear Dk -> Dq without bias.
        self.w = nn.Linear(key_dim, query_dim, bias=False)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """``(B, Lq, Dq)``, ``(B, Lk, Dk)`` → scores ``(B, Lq, Lk)``."""
        where = type(self).__name__
        if query.shape[-1] != self.query_dim or keys.shape[-1] != self.key_dim:
            raise ValueError(
                f"{where}: expected query (..., {self.query_dim}) and keys (..., {self.key_dim}), "
                f"got {tuple(query.shape)} and {tuple(keys.shape)}"
            )
        return query @ self.w(keys).transpose(-2, -1)  # (B, Lq, Dq) @ (B, Dq, Lk)


class AdditiveAttention(_Scorer):
    """Bahdanau's additive score ``wᵀ tanh(W_q q + W_k k)``.

    Args:
        query_dim: ``Dq`` (the decoder state's width in an RNN).
        key_dim: ``Dk`` (the encoder states' width).
        hidden_dim: ``A``, width of the small network (Bahdanau: 1000).

    For a decoder that queries the same keys at every step, project them once
    with :meth:`project_keys` and pass the result to :meth:`score_projected`.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        self.query_dim, self.key_dim, self.hidden_dim = query_dim, key_dim, hidden_dim
        self.w_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.w_k = nn.Linear(key_dim, hidden_dim, bias=True)
        self.w = nn.Linear(hidden_dim, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        """``(B, Lk, Dk)`` → ``W_k k`` ``(B, Lk, A)``."""
        if keys.shape[-1] != self.key_dim:
            raise ValueError(
                f"{type(self).__name__}: keys must have last dimension {self.key_dim}, "
                f"got {tuple(keys.shape)}"
            )
        return self.w_k(keys)

    def score_projected(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """``(B, Lq, Dq)`` and ``project_keys(keys)`` ``(B, Lk, A)`` → ``(B, Lq, Lk)``."""
        if query.shape[-1] != self.query_dim:
            raise ValueError(
                f"{type(self).__name__}: query must have last dimension {self.query_dim}, "
                f"got {tuple(query.shape)}"
            )
        q = self.w_q(query)  # (B, Lq, A)
        hidden = torch.tanh(q[:, :, None, :] + projected_keys[:, None, :, :])  # (B, Lq, Lk, A)
        return self.w(hidden).squeeze(-1)  # (B, Lq, Lk)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """``(B, Lq, Dq)``, ``(B, Lk, Dk)`` → scores ``(B, Lq, Lk)``."""
        return self.score_projected(query, self.project_keys(keys))
