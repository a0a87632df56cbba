"""Encoder and decoder layers and their stacks.

Vaswani et al. (2017), section 3.1: each encoder layer is self-attention then
a feed-forward network; each decoder layer is masked self-attention,
cross-attention over the encoder's output ("memory"), then a feed-forward
network. Every sub-layer is wrapped in a residual connection and layer
normalisation ("Add & Norm"), written once in :func:`residual`:

- post-LN (the paper, ``norm_first=False``): ``x = norm(x + sublayer(x))``
- pre-LN (Xiong et al. 2020, ``norm_first=True``): ``x = x + sublayer(norm(x))``;
  the stacks then end with one more LayerNorm.

Submodule names match ``nn.TransformerEncoderLayer`` / ``DecoderLayer``
(``self_attn``, ``norm1``, ``dropout1``...; ``cross_attn`` is their
``multihead_attn``, and the feed-forward weights sit in ``ffn``):
:mod:`minitransformer.instruments.interop` copies weights between the two.

Masks are bool, True = may attend (the opposite of ``nn.Transformer``).
Shape letters: ``B`` batch, ``S`` source length, ``T`` target length,
``D`` model width.

Incremental decoding runs the same ``forward``: :meth:`Decoder.start`
computes each layer's cross-attention keys/values of the memory once, and
``forward(x, None, caches=caches)`` runs only the new target positions ``x``
against the cached keys/values (a :class:`DecoderCache` per layer, updated
in place), giving what a full ``forward`` gives at those positions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor, nn

from .attention import KVCache, MultiHeadAttention
from .feedforward import PositionwiseFeedForward
from .layernorm import LayerNorm

__all__ = ["residual", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "DecoderCache"]


def residual(
    x: Tensor,
    sublayer: Callable[[Tensor], Tensor],
    norm: nn.Module,
    dropout: nn.Module,
    norm_first: bool,
) -> Tensor:
    """One sub-layer with its residual connection and LayerNorm ("Add & Norm").

    Args:
        x: the sub-layer's input ``(B, L, D)``.
        sublayer: attention or feed-forward, ``(B, L, D)`` → ``(B, L, D)``.
        norm: the LayerNorm of this sub-layer.
        dropout: dropout on the sub-layer's output, before the addition.
        norm_first: pre-LN (``x + dropout(sublayer(norm(x)))``) if True,
            post-LN (``norm(x + dropout(sublayer(x)))``, the paper) if False.

    Returns: ``(B, L, D)``. The Annotated Transformer's ``SublayerConnection``
    as a function, so that the layers keep ``nn.TransformerEncoderLayer``'s
    attribute names (``norm1``, ``dropout1``...).
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward network, each with Add & Norm.

    Args:
        d_model: width ``D``.
        num_heads: attention heads (must divide ``d_model``).
        d_ff: inner width of the feed-forward network.
        dropout: dropout on attention weights, sub-layer outputs and the FFN.
        norm_first: pre-LN if True, post-LN (the paper) if False.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``(B, S, D)`` → ``(B, S, D)``. ``mask`` broadcastable to
        ``(B, H, S, S)``, typically :func:`~minitransformer.masks.padding_mask`."""

        def self_attention(h: Tensor) -> Tensor:
            return self.self_attn(h, h, h, mask)[0]

        x = residual(x, self_attention, self.norm1, self.dropout1, self.norm_first)
        return residual(x, self.ffn, self.norm2, self.dropout2, self.norm_first)


@dataclass
class DecoderCache:
    """What one :class:`DecoderLayer` keeps between decoding steps."""

    self_attn: KVCache  #: keys/values of the target positions so far (grows at every step)
    cross_attn: KVCache  #: keys/values of the memory (computed once per sentence)

    def index_select(self, index: Tensor) -> DecoderCache:
        """A new cache of rows ``index`` of the batch."""
        return DecoderCache(self.self_attn.index_select(index), self.cross_attn.index_select(index))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention and a feed-forward network, each
    with Add & Norm. Arguments as for :class:`EncoderLayer`."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Args:
            x: target-side states ``(B, T, D)``; with ``cache``, only the new
                positions.
            memory: the encoder's output ``(B, S, D)``; None with ``cache``
                (its keys/values are in ``cache.cross_attn``).
            tgt_mask: broadcastable to ``(B, H, T, T)``, usually the causal mask
                (and-ed with the target padding mask); with ``cache``, over the
                cached and new positions (None: the new positions see every
                earlier one).
            memory_mask: broadcastable to ``(B, H, T, S)``, usually the source
                padding mask.
            cache: from :meth:`start` (incremental decoding); the new positions'
                self-attention keys/values are appended to it.

        Returns: ``(B, T, D)``.
        """
        self_cache = None if cache is None else cache.self_attn
        cross_cache = None if cache is None else cache.cross_attn

        def self_attention(h: Tensor) -> Tensor:
            return self.self_attn(h, h, h, tgt_mask, cache=self_cache)[0]

        def cross_attention(h: Tensor) -> Tensor:
            return self.cross_attn(h, memory, memory, memory_mask, cache=cross_cache)[0]

        x = residual(x, self_attention, self.norm1, self.dropout1, self.norm_first)
        x = residual(x, cross_attention, self.norm2, self.dropout2, self.norm_first)
        return residual(x, self.ffn, self.norm3, self.dropout3, self.norm_first)

    def start(self, memory: Tensor) -> DecoderCache:
        """Cache for decoding with ``memory`` ``(B, S, D)``: its cross-attention
        keys/values, and an empty self-attention cache."""
        cross = self.cross_attn.project_kv(memory)  # (B, H, S, Dh)
        empty = cross.k[:, :, :0]  # (B, H, 0, Dh)
        return DecoderCache(KVCache(empty, empty), cross)


class Encoder(nn.Module):
    """A stack of ``num_layers`` :class:`EncoderLayer`; with ``norm_first`` a
    final LayerNorm ``norm`` (otherwise ``norm`` is the identity)."""

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)
        )
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``(B, S, D)`` → ``(B, S, D)``."""
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(nn.Module):
    """A stack of ``num_layers`` :class:`DecoderLayer`; with ``norm_first`` a
    final LayerNorm ``norm``. Every layer attends to the same ``memory``: the
    encoder's last layer."""

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)
        )
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        caches: list[DecoderCache] | None = None,
    ) -> Tensor:
        """``(B, T, D)`` and memory ``(B, S, D)`` → ``(B, T, D)``. With
        ``caches`` (from :meth:`start`; incremental decoding), ``x`` holds only
        the new positions and ``memory`` is None: see :meth:`DecoderLayer.forward`."""
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask, memory_mask, None if caches is None else caches[i])
        return self.norm(x)

    def start(self, memory: Tensor) -> list[DecoderCache]:
        """One :class:`DecoderCache` per layer for decoding with ``memory`` ``(B, S, D)``."""
        return [layer.start(memory) for layer in self.layers]
