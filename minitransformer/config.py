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

from .checks import check_dropout, check_heads, check_int_at_least, check_positive_int
from .factories import KINDS

__all__ = ["TransformerConfig", "config_from"]


@dataclass
class TransformerConfig:
    """Sizes and switches of a :class:`Transformer` (defaults: the paper's base model).

    ``positional``, ``norm`` and ``feed_forward`` name entries of the
    factories' tables (:data:`minitransformer.factories.KINDS`).
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
    positional: Literal["sinusoidal", "learned", "none"] = "sinusoidal"
    norm: Literal["layernorm"] = "layernorm"  # the normalisation of every sub-layer
    feed_forward: Literal["relu"] = "relu"  # the position-wise network of every layer

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
