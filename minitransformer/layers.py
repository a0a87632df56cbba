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

Every layer and stack is built from a
:class:`~minitransformer.config.TransformerConfig` (``EncoderLayer(config)``,
``Encoder(config)``), its parts through :mod:`minitransformer.factories`; the
sizes alone still work (``EncoderLayer(512, 8, 2048, dropout=0.0)``,
``Encoder(6, 512, 8, 2048)``), the other fields at the config's defaults.

Argument checks run once, at the entry point: a layer or stack called
directly checks its input, and calls what it holds with ``check=False``, so
the attention inside a layer and the layers inside a stack compute lean.

Incremental decoding runs the same ``forward``: :meth:`Decoder.start`
computes each layer's cross-attention keys/values of the memory once, and
``forward(x, None, caches=caches)`` runs only the new target positions ``x``
against the cached keys/values (a :class:`DecoderCache` per layer, updated
in place), giving what a full ``forward`` gives at those positions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from .attention import KVCache
from .checks import check_attention_inputs
from .config import TransformerConfig, config_from
from .factories import make_attention, make_feed_forward, make_norm

__all__ = ["residual", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "DecoderCache"]

#: The order of a layer's sizes given by position (``EncoderLayer(512, 8, 2048)``).
LAYER_SIZES = ("d_model", "num_heads", "d_ff", "dropout", "norm_first")


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


class _Layer(nn.Module):
    """What both layers hold, built from ``config``: ``self_attn``, in a
    decoder layer (``cross = True``) a ``cross_attn``, a feed-forward network
    ``ffn``, then a norm and a dropout per sub-layer (``norm1``, ``norm2``...,
    ``dropout1``...), registered in this order (the parameters' order, which
    optimizer states follow, is the same as before layers were built from a
    config).

    ``config``: a :class:`~minitransformer.config.TransformerConfig`, or the
    sizes by position or keyword: ``d_model`` (width ``D``), ``num_heads``
    (must divide ``d_model``), ``d_ff`` (the feed-forward network's inner
    width), ``dropout`` (on attention weights, sub-layer outputs and the FFN;
    default 0.1), ``norm_first`` (pre-LN if True, post-LN, the paper, if
    False), and any other config field by keyword.
    """

    cross: bool = False  #: whether the layer attends to the encoder's memory

    def __init__(self, config: TransformerConfig | int | None = None, *sizes: Any, **options: Any):
        super().__init__()
        config = config_from(config, sizes, options, LAYER_SIZES, type(self).__name__)
        self.d_model, self.num_heads = config.d_model, config.num_heads
        self.norm_first = config.norm_first
        self.self_attn = make_attention(config)
        if self.cross:
            self.cross_attn = make_attention(config, cross=True)
        self.ffn = make_feed_forward(config)
        sublayers = range(1, 4 if self.cross else 3)
        for i in sublayers:
            setattr(self, f"norm{i}", make_norm(config))
        for i in sublayers:
            setattr(self, f"dropout{i}", nn.Dropout(config.dropout))

    def _check(self, x: Tensor, mask: Tensor | None, cached: int | None = None) -> None:
        """Self-attention's arguments: ``x`` ``(B, L, D)`` and ``mask``."""
        check_attention_inputs(
            x, x, x, mask, self.d_model, self.num_heads, type(self).__name__, cached
        )


class EncoderLayer(_Layer):
    """Self-attention and a feed-forward network, each with Add & Norm.

    Built from a config, ``EncoderLayer(config)``, or from sizes,
    ``EncoderLayer(d_model, num_heads, d_ff, dropout=0.1, norm_first=False)``
    (see :class:`_Layer`).
    """

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        check: bool = True,
        cache: KVCache | None = None,
    ) -> Tensor:
        """``(B, S, D)`` → ``(B, S, D)``. ``mask`` broadcastable to
        ``(B, H, S, S)``, typically :func:`~minitransformer.masks.padding_mask`
        (a decoder-only language model passes the causal mask).
        ``check=False``: the caller has checked the arguments. ``cache``: the
        self-attention keys/values of earlier positions (a language model's
        incremental decoding); the new positions' are appended to it, and
        ``mask`` then covers ``(S, cached + S)``."""
        if check:
            self._check(x, mask, None if cache is None else cache.k.shape[2])

        def self_attention(h: Tensor) -> Tensor:
            return self.self_attn(h, h, h, mask, cache=cache, check=False)[0]

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


class DecoderLayer(_Layer):
    """Masked self-attention, cross-attention and a feed-forward network, each
    with Add & Norm. Built as :class:`EncoderLayer` is."""

    cross = True

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        check: bool = True,
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
            check: False when the caller has checked the arguments.

        Returns: ``(B, T, D)``.
        """
        self_cache = None if cache is None else cache.self_attn
        cross_cache = None if cache is None else cache.cross_attn
        if check:
            self._check_inputs(x, memory, tgt_mask, memory_mask, cache)

        def self_attention(h: Tensor) -> Tensor:
            return self.self_attn(h, h, h, tgt_mask, cache=self_cache, check=False)[0]

        def cross_attention(h: Tensor) -> Tensor:
            out = self.cross_attn(h, memory, memory, memory_mask, cache=cross_cache, check=False)
            return out[0]

        x = residual(x, self_attention, self.norm1, self.dropout1, self.norm_first)
        x = residual(x, cross_attention, self.norm2, self.dropout2, self.norm_first)
        return residual(x, self.ffn, self.norm3, self.dropout3, self.norm_first)

    def _check_inputs(
        self,
        x: Tensor,
        memory: Tensor | None,
        tgt_mask: Tensor | None,
        memory_mask: Tensor | None,
        cache: DecoderCache | None,
    ) -> None:
        """The arguments of both attentions (metadata only)."""
        self._check(x, tgt_mask, None if cache is None else cache.self_attn.k.shape[2])
        cross = None if cache is None else cache.cross_attn.k.shape[2]
        check_attention_inputs(
            x, memory, memory, memory_mask, self.d_model, self.num_heads,
            type(self).__name__, None if memory is not None or cache is None else cross,
        )

    def start(self, memory: Tensor) -> DecoderCache:
        """Cache for decoding with ``memory`` ``(B, S, D)``: its cross-attention
        keys/values, and an empty self-attention cache."""
        cross = self.cross_attn.project_kv(memory)  # (B, H, S, Dh)
        empty = cross.k[:, :, :0]  # (B, H, 0, Dh)
        return DecoderCache(KVCache(empty, empty), cross)


class _Stack(nn.Module):
    """Layers of one kind (``layer``) built from one config, as many as the
    config's ``depth`` field says, and with ``norm_first`` a final norm
    ``norm`` (otherwise the identity). ``config``: a
    :class:`~minitransformer.config.TransformerConfig`, or the sizes
    ``(num_layers, d_model, num_heads, d_ff, dropout=0.1, norm_first=False)``
    by position or keyword (``num_layers`` by the depth field's name)."""

    layer: type[_Layer]
    depth: str  #: the config field with the number of layers

    def __init__(self, config: TransformerConfig | int | None = None, *sizes: Any, **options: Any):
        super().__init__()
        names = (self.depth, *LAYER_SIZES)
        config = config_from(config, sizes, options, names, type(self).__name__)
        self.layers = nn.ModuleList(self.layer(config) for _ in range(getattr(config, self.depth)))
        self.norm = make_norm(config) if config.norm_first else nn.Identity()


class Encoder(_Stack):
    """A stack of :class:`EncoderLayer`: ``Encoder(config)`` has
    ``config.num_encoder_layers`` of them; ``Encoder(num_layers, d_model,
    num_heads, d_ff, dropout=0.1, norm_first=False)`` builds it from sizes.
    With ``norm_first`` a final LayerNorm ``norm`` (otherwise the identity)."""

    layer, depth = EncoderLayer, "num_encoder_layers"

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        check: bool = True,
        caches: list[KVCache] | None = None,
    ) -> Tensor:
        """``(B, S, D)`` → ``(B, S, D)``; ``check`` as in :meth:`EncoderLayer.forward`;
        ``caches``: one :class:`~minitransformer.attention.KVCache` per layer
        (from :meth:`start`), updated in place."""
        if check and self.layers:
            cached = None if caches is None else caches[0].k.shape[2]
            self.layers[0]._check(x, mask, cached)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, False, None if caches is None else caches[i])
        return self.norm(x)

    def start(self, batch: int, like: Tensor) -> list[KVCache]:
        """Empty self-attention caches, one per layer, for ``batch`` rows, of
        ``like``'s dtype and device: ``(batch, Hkv, 0, Dh)`` keys and values
        (``Hkv``: the layer's key/value heads)."""
        caches = []
        for layer in self.layers:
            attn = layer.self_attn
            empty = like.new_zeros(batch, attn.num_kv_heads, 0, attn.head_dim)
            caches.append(KVCache(empty, empty))
        return caches


class Decoder(_Stack):
    """A stack of :class:`DecoderLayer` (``config.num_decoder_layers`` of
    them, or sizes as for :class:`Encoder`); with ``norm_first`` a final LayerNorm
    ``norm``. Every layer attends to the same ``memory``: the encoder's last
    layer."""

    layer, depth = DecoderLayer, "num_decoder_layers"

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        caches: list[DecoderCache] | None = None,
        check: bool = True,
    ) -> Tensor:
        """``(B, T, D)`` and memory ``(B, S, D)`` → ``(B, T, D)``. With
        ``caches`` (from :meth:`start`; incremental decoding), ``x`` holds only
        the new positions and ``memory`` is None: see :meth:`DecoderLayer.forward`."""
        for i, layer in enumerate(self.layers):
            cache = None if caches is None else caches[i]
            if check and i == 0:
                layer._check_inputs(x, memory, tgt_mask, memory_mask, cache)
            x = layer(x, memory, tgt_mask, memory_mask, cache, check=False)
        return self.norm(x)

    def start(self, memory: Tensor) -> list[DecoderCache]:
        """One :class:`DecoderCache` per layer for decoding with ``memory`` ``(B, S, D)``."""
        return [layer.start(memory) for layer in self.layers]
