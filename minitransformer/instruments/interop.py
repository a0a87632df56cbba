"""Copy weights from PyTorch's own Transformer modules into this package's.

The two implementations compute the same function; only the parameter
layout differs. ``nn.MultiheadAttention`` keeps the query, key and value
projections stacked in one ``in_proj_weight`` ``(3D, D)``; here they are
``w_q``, ``w_k``, ``w_v``. ``nn.TransformerEncoderLayer`` keeps ``linear1``
and ``linear2`` on the layer; here they are in ``ffn``. ``nn.Transformer``
always ends its encoder and decoder with a LayerNorm (``encoder.norm``,
``decoder.norm``); this package's stacks have one only when pre-LN
(``norm_first=True``), so a post-LN ``nn.Transformer`` matches only once its
two final norms are removed (set to None). Used by the tests (equality with
PyTorch) and handy for loading a model trained with ``torch.nn``.

Only parts that ``torch.nn`` has can be loaded: a model built with an option
it has no equivalent for (RMSNorm, SwiGLU, grouped-query attention, rotary
positions, relative attention, a convolutional encoder) is refused with a
one-line error naming the part, as is a pair whose feed-forward activations
differ (ReLU or GELU, on both sides).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention
from ..feedforward import PositionwiseFeedForward
from ..layernorm import LayerNorm
from ..layers import Decoder, DecoderLayer, Encoder, EncoderLayer
from ..model import Transformer

__all__ = [
    "load_torch_attention",
    "load_torch_encoder_layer",
    "load_torch_decoder_layer",
    "load_torch_encoder",
    "load_torch_decoder",
    "load_torch_transformer",
]


#: The parts of ours that ``torch.nn``'s Transformer modules have an equivalent for
#: (exact types: a subclass such as relative attention adds parameters torch lacks).
_TORCH_EQUIVALENTS = (
    MultiHeadAttention, PositionwiseFeedForward, LayerNorm, nn.Linear, nn.Dropout,
    nn.Identity, nn.ModuleList, EncoderLayer, DecoderLayer, Encoder, Decoder,
)


def _check_equivalent(ours: nn.Module, theirs: nn.Module, where: str, count: bool = False) -> None:
    """Every part of ``ours`` must have a ``torch.nn`` equivalent (its
    attentions one key/value head per query head and no rotary positions),
    and a ``torch.nn`` layer's activation must be that of ours; with
    ``count`` (a whole layer) both must hold as many parameters, so that a
    part added inside a known one (a per-layer option) cannot be left out."""
    for name, module in ours.named_modules():
        if type(module) not in _TORCH_EQUIVALENTS:
            part = f"ours.{name}" if name else "ours"
            raise ValueError(
                f"{where}: {part} is a {type(module).__name__}, which torch.nn has no "
                "equivalent for (only LayerNorm, the ReLU feed-forward network and plain "
                "MultiHeadAttention load)"
            )
        if isinstance(module, MultiHeadAttention):
            part = f"ours.{name}" if name else "ours"
            if module.num_kv_heads != module.num_heads:
                raise ValueError(
                    f"{where}: {part} is grouped-query attention ({module.num_kv_heads} "
                    f"key/value heads for {module.num_heads} query heads), which "
                    "nn.MultiheadAttention has no equivalent for"
                )
            if module.rotary:
                raise ValueError(
                    f"{where}: {part} uses rotary positions, which nn.MultiheadAttention "
                    "has no equivalent for"
                )
    ffn = getattr(ours, "ffn", None)
    if isinstance(ffn, PositionwiseFeedForward) and hasattr(theirs, "activation"):
        activation = theirs.activation
        theirs_name = {F.relu: "relu", F.gelu: "gelu"}.get(activation)
        if theirs_name is None and isinstance(activation, (nn.ReLU, nn.GELU)):
            exact = not isinstance(activation, nn.GELU) or activation.approximate == "none"
            theirs_name = type(activation).__name__.lower() if exact else None
        if theirs_name != ffn.activation:
            shown = theirs_name or getattr(activation, "__name__", activation)
            raise ValueError(
                f"{where}: theirs uses the activation {shown}, ours {ffn.activation}"
            )
    if count:
        mine, other = (sum(p.numel() for p in m.parameters()) for m in (ours, theirs))
        if mine != other:
            raise ValueError(
                f"{where}: ours has {mine} parameters and theirs {other}: ours has an option "
                "or a size torch.nn's layer lacks"
            )


@torch.no_grad()
def load_torch_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """Copy an ``nn.MultiheadAttention`` (same ``embed_dim``, ``num_heads``) into ``ours``."""
    _check_equivalent(ours, theirs, "load_torch_attention")
    if ours.d_model != theirs.embed_dim or ours.num_heads != theirs.num_heads:
        raise ValueError(
            f"load_torch_attention: sizes differ: ours d_model={ours.d_model}, "
            f"heads={ours.num_heads}; theirs embed_dim={theirs.embed_dim}, "
            f"heads={theirs.num_heads}"
        )
    if theirs.in_proj_weight is None:
        raise ValueError(
            "load_torch_attention: kdim/vdim different from embed_dim are not supported"
        )
    for proj, w in zip((ours.w_q, ours.w_k, ours.w_v), theirs.in_proj_weight.chunk(3)):
        proj.weight.copy_(w)
    ours.w_o.weight.copy_(theirs.out_proj.weight)
    if theirs.in_proj_bias is not None and ours.w_q.bias is not None:
        for proj, b in zip((ours.w_q, ours.w_k, ours.w_v), theirs.in_proj_bias.chunk(3)):
            proj.bias.copy_(b)
        ours.w_o.bias.copy_(theirs.out_proj.bias)


@torch.no_grad()
def _load_ffn_and_norms(ours: nn.Module, theirs: nn.Module, norms: tuple[str, ...]) -> None:
    ours.ffn.linear1.load_state_dict(theirs.linear1.state_dict())
    ours.ffn.linear2.load_state_dict(theirs.linear2.state_dict())
    for name in norms:
        getattr(ours, name).load_state_dict(getattr(theirs, name).state_dict())


def load_torch_encoder_layer(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer) -> None:
    """Copy an ``nn.TransformerEncoderLayer`` (ReLU, same sizes) into ``ours``."""
    _check_equivalent(ours, theirs, "load_torch_encoder_layer", count=True)
    load_torch_attention(ours.self_attn, theirs.self_attn)
    _load_ffn_and_norms(ours, theirs, ("norm1", "norm2"))


def load_torch_decoder_layer(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer) -> None:
    """Copy an ``nn.TransformerDecoderLayer`` into ``ours`` (their ``multihead_attn``
    is our ``cross_attn``)."""
    _check_equivalent(ours, theirs, "load_torch_decoder_layer", count=True)
    load_torch_attention(ours.self_attn, theirs.self_attn)
    load_torch_attention(ours.cross_attn, theirs.multihead_attn)
    _load_ffn_and_norms(ours, theirs, ("norm1", "norm2", "norm3"))


@torch.no_grad()
def _load_stack(ours: Encoder | Decoder, theirs: nn.Module, load_layer, where: str) -> None:
    _check_equivalent(ours, theirs, where)
    if len(ours.layers) != len(theirs.layers):
        raise ValueError(
            f"{where}: ours has {len(ours.layers)} layers, theirs {len(theirs.layers)}"
        )
    for mine, other in zip(ours.layers, theirs.layers, strict=True):
        load_layer(mine, other)
    if isinstance(ours.norm, LayerNorm):
        if theirs.norm is None:
            raise ValueError(f"{where}: ours (pre-LN) has a final LayerNorm, theirs has none")
        ours.norm.load_state_dict(theirs.norm.state_dict())
    elif theirs.norm is not None:
        raise ValueError(
            f"{where}: ours (post-LN) has no final LayerNorm but theirs has one "
            "(nn.Transformer always adds one): set theirs' norm to None first"
        )


def load_torch_encoder(ours: Encoder, theirs: nn.TransformerEncoder) -> None:
    """Copy an ``nn.TransformerEncoder`` into ``ours``: every layer, and the
    final norm, which both must have (pre-LN) or both lack (post-LN)."""
    _load_stack(ours, theirs, load_torch_encoder_layer, "load_torch_encoder")


def load_torch_decoder(ours: Decoder, theirs: nn.TransformerDecoder) -> None:
    """Copy an ``nn.TransformerDecoder`` into ``ours``; final norm as in
    :func:`load_torch_encoder`."""
    _load_stack(ours, theirs, load_torch_decoder_layer, "load_torch_decoder")


def load_torch_transformer(ours: Transformer, theirs: nn.Transformer) -> None:
    """Copy an ``nn.Transformer``'s encoder and decoder into ``ours`` (ReLU,
    same sizes). ``nn.Transformer`` has no embeddings, positions or output
    layer: ``ours`` keeps its own. For a post-LN ``ours``, remove the final
    norms first: ``theirs.encoder.norm = theirs.decoder.norm = None``."""
    load_torch_encoder(ours.encoder, theirs.encoder)
    load_torch_decoder(ours.decoder, theirs.decoder)
