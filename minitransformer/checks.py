"""Argument checks of the public entry points, in one place.

The modules that compute (attention, layers, the model) call one of these
functions on the first line of a public ``forward`` and then do the math
(nanoGPT's habit: check at the boundary, compute lean inside). Each check
raises a one-line ``TypeError`` or ``ValueError`` that names the caller
(``where``), what was wrong and what was expected.

Every check here reads only Python values and tensor metadata (type, dtype,
shape, device), never tensor *values*, so it costs no host synchronisation
and ``torch.compile`` traces through it, except :func:`check_token_range`,
which must read the ids: it runs in eager mode on CPU tensors only (see its
docstring).

Shape letters: ``B`` batch, ``L`` length, ``Lq``/``Lk`` query/key lengths,
``D`` model width.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = [
    "check_positive_int",
    "check_int_at_least",
    "check_dropout",
    "check_heads",
    "check_config",
    "check_tensor",
    "check_sequence",
    "check_positions",
    "check_mask",
    "check_qkv",
    "check_attention_inputs",
    "check_query_keys_values",
    "check_tokens",
    "check_source_batch",
    "check_token_range",
]


# --------------------------------------------------------------------------- numbers


def check_positive_int(value: Any, name: str, where: str) -> None:
    """``value`` must be an int >= 1 (a bool is not an int here)."""
    check_int_at_least(value, 1, name, where, "a positive int")


def check_int_at_least(
    value: Any, minimum: int, name: str, where: str, what: str | None = None
) -> None:
    """``value`` must be an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}: {name} must be {what or f'an int >= {minimum}'}, got {value!r}")


def check_dropout(value: Any, where: str, name: str = "dropout") -> None:
    """A dropout probability must be in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{where}: {name} must be in [0, 1), got {value!r}")


def check_heads(d_model: Any, num_heads: Any, where: str) -> None:
    """``num_heads`` heads must split ``d_model`` into equal widths."""
    check_positive_int(d_model, "d_model", where)
    check_positive_int(num_heads, "num_heads", where)
    if d_model % num_heads != 0:
        raise ValueError(
            f"{where}: d_model ({d_model}) must be divisible by num_heads ({num_heads})"
        )


def check_kv_heads(num_heads: Any, num_kv_heads: Any, where: str) -> None:
    """``num_kv_heads`` (None: as many as ``num_heads``) key/value heads must
    divide the ``num_heads`` query heads into equal groups."""
    if num_kv_heads is None:
        return
    check_positive_int(num_kv_heads, "num_kv_heads", where)
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            f"{where}: num_kv_heads ({num_kv_heads}) must divide num_heads ({num_heads})"
        )


def check_rotary(x: Any, positions: Any, where: str) -> None:
    """``x`` ``(..., L, Dh)`` with an even ``Dh``, and integer ``positions`` ``(L,)``."""
    check_tensor(x, "x", where)
    check_tensor(positions, "positions", where)
    if x.dim() < 2 or x.shape[-1] % 2 != 0:
        raise ValueError(
            f"{where}: x must have shape (..., len, head_dim) with an even head_dim, "
            f"got shape {tuple(x.shape)}"
        )
    if positions.dtype.is_floating_point or positions.dtype == torch.bool or positions.dim() != 1:
        raise ValueError(
            f"{where}: positions must be integer of shape (len,), got {positions.dtype} "
            f"of shape {tuple(positions.shape)}"
        )
    if positions.shape[0] != x.shape[-2]:
        raise ValueError(
            f"{where}: {positions.shape[0]} positions for a length of {x.shape[-2]} "
            f"(x has shape {tuple(x.shape)})"
        )


def check_config(config: Any, config_cls: type, where: str) -> None:
    """A model is built from an instance of its own config class."""
    if not isinstance(config, config_cls):
        raise TypeError(
            f"{where}: expected a {config_cls.__name__}, got {type(config).__name__}"
        )


# --------------------------------------------------------------------------- tensors


def check_tensor(x: Any, name: str, where: str) -> None:
    """``x`` must be a tensor."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: {name} must be a tensor, got {type(x).__name__}")


def check_sequence(x: Any, d_model: int, where: str, name: str = "input") -> None:
    """``x`` must be a ``(B, L, d_model)`` tensor."""
    check_tensor(x, name, where)
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(
            f"{where}: {name} must have shape (batch, len, d_model={d_model}), "
            f"got {tuple(x.shape)}"
        )


def check_positions(x: Any, start: Any, max_len: int, d_model: int, where: str) -> None:
    """``x`` ``(B, L, d_model)`` at positions ``start .. start + L - 1`` must
    fit in a table of ``max_len`` positions."""
    check_sequence(x, d_model, where)
    check_int_at_least(start, 0, "start", where)
    length = x.shape[1]
    if start == 0 and length > max_len:
        raise ValueError(
            f"{where}: sequence length {length} is longer than max_len={max_len}; "
            f"build the module with a larger max_len"
        )
    if start + length > max_len:
        raise ValueError(
            f"{where}: positions {start}..{start + length - 1} go beyond max_len={max_len}; "
            f"build the module with a larger max_len"
        )


def check_mask(mask: Any, target: tuple[int, ...], where: str) -> None:
    """``mask`` must be bool (True = may attend) or float (added to the
    scores) and broadcast to the scores' shape ``target`` ``(..., Lq, Lk)``."""
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


def check_qkv(q: Any, k: Any, v: Any, mask: Any, where: str) -> None:
    """Arguments of :func:`~minitransformer.attention.scaled_dot_product_attention`:
    ``q`` ``(..., Lq, d_k)``, ``k`` ``(..., Lk, d_k)``, ``v`` ``(..., Lk, d_v)``
    and an optional mask broadcastable to ``(..., Lq, Lk)``."""
    _check_ranks(where, lambda n: n >= 2, "at least 2 dims (..., len, dim)", q=q, k=k, v=v)
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
    if mask is not None:
        try:
            batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        except RuntimeError:
            raise ValueError(
                f"{where}: the leading dims of q {tuple(q.shape)} and k {tuple(k.shape)} "
                "do not broadcast"
            ) from None
        check_mask(mask, (*batch, q.shape[-2], k.shape[-2]), where)


def check_attention_inputs(
    query: Any,
    key: Any,
    value: Any,
    mask: Any,
    d_model: int,
    num_heads: int,
    where: str,
    cached: int | None = None,
) -> None:
    """Arguments of :class:`~minitransformer.attention.MultiHeadAttention`:
    ``query`` ``(B, Lq, D)``, ``key`` and ``value`` ``(B, Lk, D)`` (both None
    when the keys and values are all in a cache), and a mask broadcastable
    to ``(B, H, Lq, Lk)`` (a 3-d mask is taken as ``(B, Lq, Lk)``).
    ``cached``: number of positions already in a key/value cache (they come
    before the new keys)."""
    check_sequence(query, d_model, where, "query")
    if (key is None) != (value is None):
        raise ValueError(f"{where}: give both key and value, or neither (with a cache)")
    if key is None and cached is None:
        raise ValueError(f"{where}: key and value may be None only with a cache")
    lk = cached or 0
    if key is not None:
        check_sequence(key, d_model, where, "key")
        check_sequence(value, d_model, where, "value")
        _check_aligned(query, key, value, ("query", "key", "value"), where)
        lk += key.shape[1]
    if mask is not None:
        if isinstance(mask, Tensor) and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        check_mask(mask, (query.shape[0], num_heads, query.shape[1], lk), where)


def check_query_keys_values(query: Any, keys: Any, values: Any, where: str) -> None:
    """Arguments of the RNN attention scorers
    (:mod:`minitransformer.rnn.attention_scorers`): ``query`` ``(B, Lq, Dq)``,
    ``keys`` ``(B, Lk, Dk)``, ``values`` ``(B, Lk, Dv)``."""
    tensors = {"query": query, "keys": keys, "values": values}
    _check_ranks(where, lambda n: n == 3, "shape (batch, len, dim)", **tensors)
    _check_aligned(query, keys, values, tuple(tensors), where)


def _check_ranks(where: str, ok, expected: str, **tensors: Any) -> None:
    """Each of ``tensors`` (name → value) must be a tensor whose number of
    dims satisfies ``ok``; ``expected`` says what that is."""
    for name, t in tensors.items():
        check_tensor(t, name, where)
        if not ok(t.dim()):
            raise ValueError(f"{where}: {name} must have {expected}, got shape {tuple(t.shape)}")


def _check_aligned(query: Tensor, key: Tensor, value: Tensor, names: tuple, where: str) -> None:
    """``key`` and ``value`` ``(B, Lk, ...)`` must share batch and length,
    ``query`` ``(B, Lq, ...)`` the batch; ``names`` are theirs in messages."""
    q, k, v = names
    if key.shape[:2] != value.shape[:2]:
        raise ValueError(
            f"{where}: {k} and {v} must have the same batch and length, got {k} "
            f"{tuple(key.shape)} and {v} {tuple(value.shape)}"
        )
    if query.shape[0] != key.shape[0]:
        raise ValueError(
            f"{where}: {q} and {k} must have the same batch size, got "
            f"{query.shape[0]} and {key.shape[0]}"
        )


# --------------------------------------------------------------------------- token ids


def check_tokens(tokens: Any, name: str, where: str, max_len: int | None = None) -> None:
    """``tokens`` must be a ``(B, L)`` tensor of integer ids, ``L <= max_len``.

    Reads only metadata; the ids themselves are checked by
    :func:`check_token_range`.
    """
    if not isinstance(tokens, Tensor):
        raise TypeError(
            f"{where}: {name} must be a tensor of token ids, got {type(tokens).__name__}"
        )
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(
            f"{where}: {name} must hold integer token ids (torch.long), got dtype {tokens.dtype}"
        )
    if tokens.dim() != 2:
        raise ValueError(f"{where}: {name} must have shape (batch, len), got {tuple(tokens.shape)}")
    if max_len is not None and tokens.shape[1] > max_len:
        raise ValueError(
            f"{where}: {name} has length {tokens.shape[1]}, longer than "
            f"max_len={max_len} of the config"
        )


def check_source_batch(src: Any, where: str) -> None:
    """``src`` must be int64 token ids of shape ``(B, S)`` (the searches of
    :mod:`minitransformer.decoding` build their outputs from it)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"{where}: src must be a tensor of token ids, got {type(src).__name__}")
    if src.dim() != 2 or src.dtype != torch.long:
        raise ValueError(
            f"{where}: src must be int64 token ids of shape (batch, len), got "
            f"dtype {src.dtype} and shape {tuple(src.shape)}"
        )


def check_token_range(
    tokens: Tensor, vocab_size: int, name: str, where: str, what: str = "the vocabulary"
) -> None:
    """Every id in ``tokens`` must be in ``[0, vocab_size)``.

    This is the one check that reads tensor values (``min``/``max``), and so
    would make an accelerator wait for the host. It runs only in eager mode
    on CPU tensors, where reading them is free; it is skipped under
    ``torch.compile`` (no data-dependent branch in the graph) and for tensors
    on an accelerator (where ``nn.Embedding`` still rejects a bad id with its
    own device-side assertion, less clearly). Batches made by
    :mod:`minitransformer.data` hold ids from a vocabulary, in range by
    construction.
    """
    if tokens.device.type != "cpu" or tokens.numel() == 0 or torch.compiler.is_compiling():
        return
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{where}: {name} has ids in [{low}, {high}], outside {what} [0, {vocab_size})"
        )
