"""Attention masks: which keys each query may look at.

Convention of this package
--------------------------
A boolean mask is **True where a query may attend to a key** and False where
it is blocked. This is the convention of
:func:`torch.nn.functional.scaled_dot_product_attention`.

:class:`torch.nn.MultiheadAttention` and :class:`torch.nn.Transformer` use the
*opposite* convention for their boolean ``attn_mask`` and
``key_padding_mask``: there True means *blocked*. :func:`to_torch_bool_mask`
and :func:`torch_key_padding_mask` convert between the two, and
:func:`to_additive_mask` turns a boolean mask into the float form (0 where
allowed, ``-inf`` where blocked) that every PyTorch attention accepts.

Shape letters: ``B`` batch, ``L`` sequence length, ``Lq``/``Lk`` query/key
lengths.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "causal_mask",
    "padding_mask",
    "to_torch_bool_mask",
    "torch_key_padding_mask",
    "to_additive_mask",
]


def causal_mask(length: int, device: torch.device | str | None = None) -> Tensor:
    """Mask that lets position ``i`` attend to positions ``0..i`` only.

    Args:
        length: sequence length ``L`` (a positive integer).
        device: where to create the mask.

    Returns:
        ``(L, L)`` bool tensor, True on and below the diagonal (may attend),
        False above it (the future, blocked). ``nn.Transformer`` expects the
        negation of this (:func:`to_torch_bool_mask`).
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"causal_mask: length must be a positive int, got {length!r}")
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Mask that hides padding keys.

    Args:
        tokens: ``(B, L)`` integer token ids.
        pad_id: the id of the padding token.

    Returns:
        ``(B, 1, 1, L)`` bool tensor, True where the token is *not* padding
        (may be attended to). It broadcasts against attention scores of shape
        ``(B, H, Lq, L)``. ``nn.MultiheadAttention``'s ``key_padding_mask`` is
        the opposite, ``(B, L)`` True at padding: see
        :func:`torch_key_padding_mask`.
    """
    if not isinstance(tokens, Tensor):
        raise TypeError(f"padding_mask: tokens must be a tensor, got {type(tokens).__name__}")
    if tokens.dim() != 2:
        raise ValueError(
            f"padding_mask: tokens must have shape (batch, len), got shape {tuple(tokens.shape)}"
        )
    return (tokens != pad_id)[:, None, None, :]


def to_torch_bool_mask(mask: Tensor) -> Tensor:
    """Convert this package's bool mask (True = may attend) to PyTorch's
    ``nn.MultiheadAttention`` / ``nn.Transformer`` convention (True = blocked).

    The conversion is its own inverse.
    """
    if mask.dtype != torch.bool:
        raise TypeError(f"to_torch_bool_mask: expected a bool mask, got dtype {mask.dtype}")
    return ~mask


def torch_key_padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """``key_padding_mask`` for ``nn.MultiheadAttention``: ``(B, L)`` bool,
    True where ``tokens`` is padding (blocked), the opposite of
    :func:`padding_mask`."""
    return ~padding_mask(tokens, pad_id)[:, 0, 0, :]


def to_additive_mask(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Turn a bool mask (True = may attend) into an additive float mask:
    ``0`` where allowed, ``-inf`` where blocked. Same shape as ``mask``."""
    if mask.dtype != torch.bool:
        raise TypeError(f"to_additive_mask: expected a bool mask, got dtype {mask.dtype}")
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))
