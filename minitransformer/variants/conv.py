"""A 1-D convolutional encoder: the Transformer's encoder with self-attention
replaced by a convolution over positions.

Convolutional sequence encoders: Kalchbrenner et al., "Neural Machine
Translation in Linear Time" (ByteNet, 2016), and Gehring et al.,
"Convolutional Sequence to Sequence Learning" (2017). Vaswani et al. (2017),
Table 1, compare such a layer with self-attention and recurrence: per layer
O(k·n·d²) operations, O(1) sequential operations, and a maximum path length
of O(n/k) between two positions (O(log_k n) with dilations).

Each :class:`ConvEncoderLayer` has exactly the skeleton of
:class:`~minitransformer.layers.EncoderLayer`: a sequence-mixing sub-layer
then a position-wise feed-forward network, each with Add & Norm (post-LN or
pre-LN). Only the mixing sub-layer differs: a ``Conv1d`` of odd width ``k``
whose output at position ``i`` is a fixed linear function of positions
``i - (k//2)·dilation ... i + (k//2)·dilation`` (zero beyond the sequence),
where self-attention takes a data-dependent average over all positions. Like
the attention sub-layer, it is linear; the non-linearity is the FFN's.

Shape letters: ``B`` batch, ``S`` length, ``D`` model width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..checks import check_int_at_least, check_sequence
from ..config import config_from
from ..factories import make_feed_forward, make_norm
from ..layers import LAYER_SIZES, residual

__all__ = ["ConvEncoderLayer", "ConvEncoder"]


def _keep_mask(mask: Tensor | None, x: Tensor, where: str) -> Tensor | None:
    """Turn a padding mask ``(B, S)`` or ``(B, 1, 1, S)`` (True = real token)
    into a float ``(B, S, 1)`` multiplier, or None."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise TypeError(
            f"{where}: mask must be a bool tensor (True = real token), got "
            f"{getattr(mask, 'dtype', type(mask).__name__)}"
        )
    b, s = x.shape[0], x.shape[1]
    if mask.dim() == 4 and mask.shape[1] == 1 and mask.shape[2] == 1:
        mask = mask[:, 0, 0, :]  # (B, S)
    if mask.dim() != 2 or mask.shape[1] != s or mask.shape[0] not in (1, b):
        raise ValueError(
            f"{where}: a convolution takes only a padding mask of shape (B, S) or "
            f"(B, 1, 1, S) with B={b}, S={s}; got {tuple(mask.shape)} "
            "(attention masks such as the causal mask do not apply)"
        )
    return mask.unsqueeze(-1).to(x.dtype)  # (B, S, 1)


def _config(d_model: int, d_ff: int, dropout: float, norm_first: bool, where: str):
    """The config the norms and the feed-forward network are made from: these
    sizes, one head (a convolution has none), other fields at their defaults."""
    return config_from(d_model, (1, d_ff, dropout, norm_first), {}, LAYER_SIZES, where)


class ConvEncoderLayer(nn.Module):
    """A width-``k`` convolution and a feed-forward network, each with Add & Norm.

    Args:
        d_model: width ``D`` (input and output channels of the convolution).
        kernel_size: odd width ``k`` of the convolution.
        d_ff: inner width of the feed-forward network.
        dropout: dropout on the sub-layer outputs and inside the FFN.
        norm_first: pre-LN if True, post-LN (as the paper's encoder) if False.
        dilation: spacing between the ``k`` taps (1: adjacent positions).

    The convolution is ``self.conv`` (``nn.Conv1d(D, D, k)``, "same" zero
    padding), so position ``i`` sees ``i ± (k//2)·dilation``.
    """

    def __init__(
        self,
        d_model: int,
        kernel_size: int = 3,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        dilation: int = 1,
    ):
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(
                f"ConvEncoderLayer: kernel_size must be odd and >= 1 (centred window), "
                f"got {kernel_size}"
            )
        check_int_at_least(dilation, 1, "dilation", "ConvEncoderLayer")
        self.d_model = d_model
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.norm_first = norm_first
        self.conv = nn.Conv1d(
            d_model, d_model, kernel_size, padding=dilation * (kernel_size // 2), dilation=dilation
        )
        config = _config(d_model, d_ff, dropout, norm_first, type(self).__name__)
        self.ffn = make_feed_forward(config)
        self.norm1 = make_norm(config)
        self.norm2 = make_norm(config)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _mix(self, x: Tensor, keep: Tensor | None) -> Tensor:
        """The sequence-mixing sub-layer: ``(B, S, D)`` → ``(B, S, D)``."""
        if keep is not None:
            x = x * keep  # padded positions contribute zeros, as beyond the ends
        return self.conv(x.transpose(1, 2)).transpose(1, 2)  # Conv1d wants (B, D, S)

    def forward(self, x: Tensor, mask: Tensor | None = None, check: bool = True) -> Tensor:
        """``(B, S, D)`` → ``(B, S, D)`` (``check=False``: the caller checked ``x``).

        ``mask``: optional padding mask ``(B, S)`` or ``(B, 1, 1, S)``, True =
        real token (as :func:`~minitransformer.masks.padding_mask` gives). Padded
        positions are zeroed before the convolution, so a real token's output
        is the same as without the padding; outputs at padded positions are
        meaningless.
        """
        where = type(self).__name__
        if check:
            check_sequence(x, self.d_model, where)
        keep = _keep_mask(mask, x, where)  # (B, S, 1) or None
        x = residual(x, lambda h: self._mix(h, keep), self.norm1, self.dropout1, self.norm_first)
        return residual(x, self.ffn, self.norm2, self.dropout2, self.norm_first)


class ConvEncoder(nn.Module):
    """A stack of ``num_layers`` :class:`ConvEncoderLayer`: a drop-in
    replacement for :class:`~minitransformer.layers.Encoder` (same
    ``forward(x, mask)``; with ``norm_first`` a final LayerNorm ``norm``).

    Args:
        num_layers: number of layers.
        d_model: width ``D``.
        kernel_size: odd convolution width ``k`` of every layer.
        d_ff: inner width of the feed-forward networks.
        dropout: as in :class:`ConvEncoderLayer`.
        norm_first: pre-LN if True, post-LN if False.
        dilation_base: layer ``l`` (from 0) has dilation ``dilation_base**l``;
            1 (default) gives plain convolutions, 2 doubles the reach per layer.

    ``receptive_field`` is how many input positions one output position
    depends on: ``1 + (k - 1)·Σ_l dilation_l``.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        kernel_size: int = 3,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        dilation_base: int = 1,
    ):
        super().__init__()
        check_int_at_least(dilation_base, 1, "dilation_base", "ConvEncoder")
        self.layers = nn.ModuleList(
            ConvEncoderLayer(d_model, kernel_size, d_ff, dropout, norm_first, dilation_base**i)
            for i in range(num_layers)
        )
        config = _config(d_model, d_ff, dropout, norm_first, type(self).__name__)
        self.d_model = d_model
        self.norm = make_norm(config) if norm_first else nn.Identity()

    @property
    def receptive_field(self) -> int:
        """Number of input positions that one output position depends on."""
        return 1 + sum((layer.kernel_size - 1) * layer.dilation for layer in self.layers)

    def forward(self, x: Tensor, mask: Tensor | None = None, check: bool = True) -> Tensor:
        """``(B, S, D)`` → ``(B, S, D)``; ``mask`` and ``check`` as in
        :meth:`ConvEncoderLayer.forward`."""
        if check:
            check_sequence(x, self.d_model, type(self).__name__)
        for layer in self.layers:
            x = layer(x, mask, check=False)
        return self.norm(x)
