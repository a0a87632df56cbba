"""Encoder and decoder layers and their stacks.

Vaswani et al. (2017), section 3.1: each encoder layer is self-attention then
a feed-forward network; each decoder layer is masked self-attention,
cross-attention over the encoder's output ("memory"), then a feed-forward
network. Every sub-layer is wrapped in a residual connection and layer
normalisation ("Add & Norm"):

- post-LN (the paper, ``norm_first=False``): ``x = norm(x + sublayer(x))``
- pre-LN (Xiong et al. 2020, ``norm_first=True``): ``x = x + sublayer(norm(x))``;
  the stacks then end with one more LayerNorm.

Submodule names match ``nn.TransformerEncoderLayer`` / ``DecoderLayer``
(``self_attn``, ``norm1``...; ``cross_attn`` is their ``multihead_attn``, and
the feed-forward weights sit in ``ffn``): :mod:`minitransformer.instruments.interop`
copies weights between the two.

Masks are bool, True = may attend (the opposite of ``nn.Transformer``).
Shape letters: ``B`` batch, ``S`` source length, ``T`` target length,
``D`` model width.

Incremental decoding: :meth:`Decoder.start` computes each layer's
cross-attention keys/values of the memory once, and :meth:`Decoder.step`
runs one new target position against the cached keys/values (a
:class:`DecoderCache` per layer), giving what ``forward`` gives at that
position of the whole prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from .attention import KVCache, MultiHeadAttention
from .feedforward import PositionwiseFeedForward
from .layernorm import LayerNorm

__all__ = ["EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "DecoderCache"]


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

    def _sa(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, mask)[0])

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout2(self.ffn(x))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``(B, S, D)`` → ``(B, S, D)``. ``mask`` broadcastable to
        ``(B, H, S, S)``, typically :func:`~minitransformer.masks.padding_mask`."""
        if self.norm_first:
            x = x + self._sa(self.norm1(x), mask)
            return x + self._ff(self.norm2(x))
        x = self.norm1(x + self._sa(x, mask))
        return self.norm2(x + self._ff(x))


@dataclass
class DecoderCache:
    """What one :class:`DecoderLayer` keeps between decoding steps."""

    self_attn: KVCache  #: keys/values of the target positions so far (grows by one per step)
    cross_attn: KVCache  #: keys/values of the memory (computed once per sentence)

    def index_select(self, index: Tensor) -> DecoderCache:
        """Rows ``index`` of the batch."""
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

    def _sa(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, mask)[0])

    def _ca(self, x: Tensor, memory: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout2(self.cross_attn(x, memory, memory, mask)[0])

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout3(self.ffn(x))

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        """Args:
            x: target-side states ``(B, T, D)``.
            memory: the encoder's output ``(B, S, D)``.
            tgt_mask: broadcastable to ``(B, H, T, T)``, usually the causal mask
                (and-ed with the target padding mask).
            memory_mask: broadcastable to ``(B, H, T, S)``, usually the source
                padding mask.

        Returns: ``(B, T, D)``.
        """
        if self.norm_first:
            x = x + self._sa(self.norm1(x), tgt_mask)
            x = x + self._ca(self.norm2(x), memory, memory_mask)
            return x + self._ff(self.norm3(x))
        x = self.norm1(x + self._sa(x, tgt_mask))
        x = self.norm2(x + self._ca(x, memory, memory_mask))
        return self.norm3(x + self._ff(x))

    def start(self, memory: Tensor) -> DecoderCache:
        """Cache for decoding with ``memory`` ``(B, S, D)``: its cross-attention
        keys/values, and an empty self-attention cache."""
        cross = self.cross_attn.project_kv(memory)  # (B, H, S, Dh)
        empty = cross.k[:, :, :0]  # (B, H, 0, Dh)
        return DecoderCache(KVCache(empty, empty), cross)

    def step(
        self, x: Tensor, cache: DecoderCache, memory_mask: Tensor | None = None
    ) -> tuple[Tensor, DecoderCache]:
        """One new target position ``x`` ``(B, 1, D)`` → ``(B, 1, D)`` and the
        cache with its keys/values appended. It attends to every earlier
        position (all cached, so no causal mask is needed) and to the memory
        (``memory_mask`` broadcastable to ``(B, H, 1, S)``)."""
        if self.norm_first:
            sa, self_kv = self._sa_step(self.norm1(x), cache)
            x = x + sa
            x = x + self._ca_step(self.norm2(x), cache, memory_mask)
            x = x + self._ff(self.norm3(x))
        else:
            sa, self_kv = self._sa_step(x, cache)
            x = self.norm1(x + sa)
            x = self.norm2(x + self._ca_step(x, cache, memory_mask))
            x = self.norm3(x + self._ff(x))
        return x, DecoderCache(self_kv, cache.cross_attn)

    def _sa_step(self, h: Tensor, cache: DecoderCache) -> tuple[Tensor, KVCache]:
        self_kv = cache.self_attn.append(self.self_attn.project_kv(h))  # (B, H, t + 1, Dh)
        return self.dropout1(self.self_attn.attend_cached(h, self_kv)), self_kv

    def _ca_step(self, h: Tensor, cache: DecoderCache, memory_mask: Tensor | None) -> Tensor:
        return self.dropout2(self.cross_attn.attend_cached(h, cache.cross_attn, memory_mask))


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
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        """``(B, T, D)`` and memory ``(B, S, D)`` → ``(B, T, D)``."""
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)

    def start(self, memory: Tensor) -> list[DecoderCache]:
        """One :class:`DecoderCache` per layer for decoding with ``memory`` ``(B, S, D)``."""
        return [layer.start(memory) for layer in self.layers]

    def step(
        self, x: Tensor, caches: list[DecoderCache], memory_mask: Tensor | None = None
    ) -> tuple[Tensor, list[DecoderCache]]:
        """One new target position ``(B, 1, D)`` through every layer →
        ``(B, 1, D)`` and the updated caches (see :meth:`DecoderLayer.step`)."""
        new_caches = []
        for layer, cache in zip(self.layers, caches, strict=True):
            x, cache = layer.step(x, cache, memory_mask)
            new_caches.append(cache)
        return self.norm(x), new_caches
