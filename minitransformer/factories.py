"""The small factories that build a layer's parts from a config.

Each switchable part has one table, kind → constructor taking the config,
and one ``make_*`` function that looks the config's choice up in it. A new
kind (another normalisation, feed-forward network or positional encoding)
is one entry in its table, its name in the matching ``Literal`` of
:class:`~minitransformer.config.TransformerConfig`, and its tests; the
layers, stacks and model do not change.

``config`` is anything with the fields of
:class:`~minitransformer.config.TransformerConfig` that the part reads
(``d_model``, ``num_heads``, ``d_ff``, ``dropout``, ``max_len``...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from .attention import MultiHeadAttention
from .feedforward import PositionwiseFeedForward, SwiGLUFeedForward
from .layernorm import LayerNorm, RMSNorm
from .positional import (
    LearnedPositionalEmbedding,
    NoPositionalEncoding,
    PositionalEncoding,
    SinusoidalPositionalEncoding,
)

__all__ = [
    "NORMS",
    "FEED_FORWARDS",
    "POSITIONALS",
    "KINDS",
    "make_norm",
    "make_feed_forward",
    "make_positional",
    "make_attention",
]

Factory = Callable[[Any], nn.Module]

#: ``config.norm`` → the normalisation of one sub-layer (and of a pre-LN stack's end).
NORMS: dict[str, Factory] = {
    "layernorm": lambda c: LayerNorm(c.d_model),
    "rmsnorm": lambda c: RMSNorm(c.d_model),
}

#: ``config.feed_forward`` → the position-wise network of one layer.
FEED_FORWARDS: dict[str, Factory] = {
    "relu": lambda c: PositionwiseFeedForward(c.d_model, c.d_ff, c.dropout, c.bias),
    "gelu": lambda c: PositionwiseFeedForward(c.d_model, c.d_ff, c.dropout, c.bias, "gelu"),
    "swiglu": lambda c: SwiGLUFeedForward(c.d_model, c.d_ff, c.dropout, c.bias),
}

#: ``config.positional`` → the positional module added to the embeddings.
POSITIONALS: dict[str, Factory] = {
    "sinusoidal": lambda c: SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout),
    "learned": lambda c: LearnedPositionalEmbedding(c.max_len, c.d_model, c.dropout),
    "none": lambda c: NoPositionalEncoding(c.dropout),
    # rotary positions turn queries and keys inside attention (make_attention):
    # nothing is added to the embeddings
    "rope": lambda c: NoPositionalEncoding(c.dropout),
}

#: Config field → its table (the config validates its choices against these).
KINDS: dict[str, dict[str, Factory]] = {
    "norm": NORMS,
    "feed_forward": FEED_FORWARDS,
    "positional": POSITIONALS,
}


def _make(field: str, config: Any) -> nn.Module:
    kind = getattr(config, field)
    table = KINDS[field]
    if kind not in table:
        known = ", ".join(repr(k) for k in table)
        raise ValueError(f"make_{field}: {field} must be one of {known}, got {kind!r}")
    return table[kind](config)


def make_norm(config: Any) -> nn.Module:
    """The normalisation ``config.norm`` names, over ``config.d_model``:
    ``(B, L, D)`` → ``(B, L, D)``."""
    return _make("norm", config)


def make_feed_forward(config: Any) -> nn.Module:
    """The position-wise network ``config.feed_forward`` names:
    ``(B, L, D)`` → ``(B, L, D)``."""
    return _make("feed_forward", config)


def make_positional(config: Any) -> PositionalEncoding:
    """The positional module ``config.positional`` names:
    ``forward(x, start=0)``, ``(B, L, D)`` → ``(B, L, D)``."""
    return _make("positional", config)


def make_attention(config: Any, cross: bool = False) -> MultiHeadAttention:
    """One attention sub-layer of ``config.num_heads`` heads over
    ``config.d_model``, with ``config.dropout`` on its weights, self- or
    (``cross``) cross-attention. The per-layer attention switches are read
    here: ``config.bias``, ``config.num_kv_heads`` (both kinds), and rotary
    positions when ``config.positional == "rope"`` (self-attention only:
    a query and the memory's keys belong to different sequences)."""
    rotary = config.positional == "rope" and not cross
    return MultiHeadAttention(config.d_model, config.num_heads, config.dropout, config.bias,
                              num_kv_heads=config.num_kv_heads, rotary=rotary)
