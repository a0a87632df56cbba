"""The configuration of a :class:`~minitransformer.model.Transformer`, one
dataclass that flows whole: the model, its stacks and their layers are all
built from it (nanoGPT's ``Block(config)``), the parts through the small
factories of :mod:`minitransformer.factories`.

A layer or a stack can still be built from its sizes alone, as the chapters
do (``EncoderLayer(512, 8, 2048, dropout=0.0)``): :func:`config_from` turns
those sizes into a config whose other fields keep their defaults.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from .checks import (
    check_dropout,
    check_heads,
    check_int_at_least,
    check_kv_heads,
    check_positive_int,
)
from .factories import KINDS

__all__ = ["TransformerConfig", "config_from"]


@dataclass
class TransformerConfig:
    """Sizes and switches of a :class:`Transformer` (defaults: the paper's base model).

    ``positional``, ``norm`` and ``feed_forward`` name entries of the
    factories' tables (:data:`minitransformer.factories.KINDS`).

    The switches of later models, each off by default (the 2017 model):
    ``positional``: ``"sinusoidal"`` (the paper), ``"learned"``, ``"none"``
    or ``"rope"`` (rotary positions in every self-attention, nothing added
    to the embeddings); ``norm``: ``"layernorm"`` or ``"rmsnorm"``;
    ``feed_forward``: ``"relu"`` (the paper), ``"gelu"`` or ``"swiglu"``
    (hidden width 2/3 of ``d_ff``, rounded to the nearest integer, so the
    parameter count stays: :func:`~minitransformer.feedforward.swiglu_hidden`);
    ``num_kv_heads``: the key/value heads of grouped-query attention (None:
    ``num_heads``, one per query head; 1: multi-query; must divide
    ``num_heads``); ``bias``: whether the linear layers of attention and
    feed-forward networks have biases (norms, embeddings and the output
    layer keep theirs).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512  # width of every token vector
    num_heads: int = 8  # attention heads per layer (must divide d_model)
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048  # inner width of the feed-forward networks
    dropout: float = 0.1
    max_len: int = 512  # longest source or target sequence
    pad_id: int = 0  # padding token id (same in both vocabularies)
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN
    share_embeddings: bool = False  # one embedding table for source and target
    tie_output: bool = False  # output projection = target embedding matrix
    positional: Literal["sinusoidal", "learned", "none", "rope"] = "sinusoidal"
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"  # the normalisation of every sub-layer
    feed_forward: Literal["relu", "gelu", "swiglu"] = "relu"  # every layer's position-wise network
    num_kv_heads: int | None = None  # key/value heads (None: num_heads; 1: multi-query)
    bias: bool = True  # biases in the attention and feed-forward linear layers

    def __post_init__(self) -> None:
        where = "TransformerConfig"
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "d_ff", "max_len"):
            check_positive_int(getattr(self, name), name, where)
        for name in ("num_encoder_layers", "num_decoder_layers"):
            check_int_at_least(getattr(self, name), 0, name, where)
        check_heads(self.d_model, self.num_heads, where)
        check_dropout(self.dropout, where)
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"{where}: share_embeddings needs src_vocab_size == tgt_vocab_size, "
                f"got {self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        for name, table in KINDS.items():
            kind = getattr(self, name)
            if kind not in table:
                known = ", ".join(repr(k) for k in table)
                raise ValueError(f"{where}: {name} must be one of {known}, got {kind!r}")
        check_kv_heads(self.num_heads, self.num_kv_heads, where)
        if self.positional == "rope" and (self.d_model // self.num_heads) % 2:
            raise ValueError(f"{where}: positional='rope' needs an even head width, got "
                             f"d_model / num_heads = {self.d_model // self.num_heads}")
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"{where}: pad_id {self.pad_id} is outside the vocabularies")

    def to_dict(self) -> dict:
        """Plain dict (for JSON and checkpoints); ``TransformerConfig(**d)`` rebuilds it."""
        return asdict(self)


def config_from(
    config: Any, sizes: tuple, options: dict, names: tuple[str, ...], where: str
) -> TransformerConfig:
    """The config a layer or stack is built from.

    Args:
        config: a :class:`TransformerConfig` (returned as it is), or the first
            of the sizes.
        sizes: the further sizes given by position, in the order ``names``.
        options: sizes and switches given by keyword (config field names).
        names: the field names of the positional sizes, e.g. ``("d_model",
            "num_heads", "d_ff", "dropout", "norm_first")``.
        where: the caller, for the error messages.

    Returns: ``config``, or a :class:`TransformerConfig` of those sizes with
    every other field at its default (the vocabulary sizes, which no layer
    reads, at 1), validated as any config is.
    """
    if isinstance(config, TransformerConfig):
        if sizes or options:
            raise TypeError(f"{where}: give a TransformerConfig or sizes, not both")
        return config
    values = sizes if config is None else (config, *sizes)
    if len(values) > len(names):
        raise TypeError(
            f"{where}: takes at most {len(names)} sizes by position ({', '.join(names)}), "
            f"got {len(values)}"
        )
    given = dict(zip(names, values))
    twice = sorted(given.keys() & options.keys())
    if twice:
        raise TypeError(f"{where}: {', '.join(twice)} given by position and by keyword")
    return TransformerConfig(**{"src_vocab_size": 1, "tgt_vocab_size": 1, **given, **options})
