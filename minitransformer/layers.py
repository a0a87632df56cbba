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
the feed-forward weights sit in ``ffn``): :mod:`minitransformer.interop`
copies weights between the two.

Masks are bool, True = may attend (the opposite of ``nn.Transformer``).
Shape letters: ``B`` batch, ``S`` source length, ``T`` target length,
``D`` model width.
"""

from __future__ import annotations

from torch import Tensor, nn

from .attention import MultiHeadAttention
from .feedforward import PositionwiseFeedForward
from .layernorm import LayerNorm

__all__ = ["EncoderLayer", "DecoderLayer", "Encoder", "Decoder"]


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
        self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False
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


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention and a feed-forward network, each
    with Add & Norm. Arguments as for :class:`EncoderLayer`."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False
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
