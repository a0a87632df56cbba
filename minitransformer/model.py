"""The encoder-decoder Transformer of Vaswani et al. (2017).

    source ids → embedding·√D + positions → Encoder ─┐ memory
    target ids → embedding·√D + positions → Decoder ←┘ → generator → logits

Shape letters: ``B`` batch, ``S`` source length, ``T`` target length,
``D`` model width, ``V`` target vocabulary size.

Besides teacher-forced ``forward``/``encode``/``decode``, the model has the
incremental decoding hooks of :mod:`minitransformer.seq2seq`
(``start_decoding``, ``decode_next``, ``reorder_state``): a key/value cache
so that each decoding step costs one position.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn

from .layers import Decoder, DecoderCache, Encoder
from .masks import causal_mask, padding_mask
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

__all__ = ["TransformerConfig", "Transformer", "TransformerDecodingState"]


@dataclass
class TransformerConfig:
    """Sizes and switches of a :class:`Transformer` (defaults: the paper's base model)."""

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

    def __post_init__(self) -> None:
        for name in (
            "src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "d_ff", "max_len"
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TransformerConfig: {name} must be a positive int, got {value!r}")
        for name in ("num_encoder_layers", "num_decoder_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"TransformerConfig: {name} must be an int >= 0, got {value!r}")
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"TransformerConfig: d_model ({self.d_model}) must be divisible by "
                f"num_heads ({self.num_heads})"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"TransformerConfig: dropout must be in [0, 1), got {self.dropout}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "TransformerConfig: share_embeddings needs src_vocab_size == tgt_vocab_size, "
                f"got {self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        if self.positional not in ("sinusoidal", "learned", "none"):
            raise ValueError(
                "TransformerConfig: positional must be 'sinusoidal', 'learned' or 'none', "
                f"got {self.positional!r}"
            )
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(
                f"TransformerConfig: pad_id {self.pad_id} is outside the vocabularies"
            )

    def to_dict(self) -> dict:
        """Plain dict (for JSON and checkpoints); ``TransformerConfig(**d)`` rebuilds it."""
        return asdict(self)


@dataclass
class TransformerDecodingState:
    """The key/value cache of :meth:`Transformer.decode_next` for ``N`` rows."""

    caches: list[DecoderCache]  #: one per decoder layer
    memory_mask: Tensor | None  #: ``(N, 1, 1, S)`` source padding mask
    step: int = field(default=0)  #: target tokens fed so far (the next one's position)

    def index_select(self, index: Tensor) -> TransformerDecodingState:
        """Rows ``index`` ``(N',)`` of every cache and of the mask."""
        mask = None if self.memory_mask is None else self.memory_mask.index_select(0, index)
        return TransformerDecodingState(
            [c.index_select(index) for c in self.caches], mask, self.step
        )


def _positions(config: TransformerConfig) -> nn.Module:
    if config.positional == "sinusoidal":
        return SinusoidalPositionalEncoding(config.d_model, config.max_len, config.dropout)
    if config.positional == "learned":
        return LearnedPositionalEmbedding(config.max_len, config.d_model, config.dropout)
    return nn.Dropout(config.dropout)


class Transformer(nn.Module):
    """Encoder-decoder Transformer for sequence-to-sequence tasks.

    Submodules: ``src_embed``, ``tgt_embed`` (``nn.Embedding``; the same
    object when ``share_embeddings``), ``src_pos``, ``tgt_pos`` (positional
    encodings), ``encoder``, ``decoder`` and ``generator`` (``nn.Linear``
    ``D → V``, whose weight is ``tgt_embed.weight`` when ``tie_output``).
    Embeddings are multiplied by √D before positions are added, as in the
    paper. Matrices are initialised Xavier-uniform, as in ``nn.Transformer``.

    Differences from ``nn.Transformer``: it embeds token ids and builds the
    padding and causal masks itself; batch-first only.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(
                f"Transformer: expected a TransformerConfig, got {type(config).__name__}"
            )
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        if c.share_embeddings:
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.src_pos = _positions(c)
        self.tgt_pos = _positions(c)
        layer_args = (c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
        self.encoder = Encoder(c.num_encoder_layers, *layer_args)
        self.decoder = Decoder(c.num_decoder_layers, *layer_args)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size)
        self._reset_parameters()
        if c.tie_output:
            self.generator.weight = self.tgt_embed.weight

    def _reset_parameters(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() > 1 and "pos" not in name:
                nn.init.xavier_uniform_(p)
        with torch.no_grad():
            self.src_embed.weight[self.config.pad_id].zero_()
            self.tgt_embed.weight[self.config.pad_id].zero_()

    def _check_tokens(self, tokens: Tensor, name: str, vocab_size: int) -> None:
        where = type(self).__name__
        if not isinstance(tokens, Tensor):
            raise TypeError(
                f"{where}: {name} must be a tensor of token ids, got {type(tokens).__name__}"
            )
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TypeError(
                f"{where}: {name} must hold integer token ids (torch.long), "
                f"got dtype {tokens.dtype}"
            )
        if tokens.dim() != 2:
            raise ValueError(
                f"{where}: {name} must have shape (batch, len), got {tuple(tokens.shape)}"
            )
        if tokens.shape[1] > self.config.max_len:
            raise ValueError(
                f"{where}: {name} has length {tokens.shape[1]}, longer than "
                f"max_len={self.config.max_len} of the config"
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab_size):
            raise ValueError(
                f"{where}: {name} has ids in [{int(tokens.min())}, {int(tokens.max())}], "
                f"outside the vocabulary [0, {vocab_size})"
            )

    def src_mask(self, src: Tensor) -> Tensor:
        """``(B, 1, 1, S)`` bool padding mask of the source (True = real token)."""
        return padding_mask(src, self.config.pad_id)

    def tgt_mask(self, tgt: Tensor) -> Tensor:
        """``(B, 1, T, T)`` bool mask for decoder self-attention: causal and not padding."""
        return padding_mask(tgt, self.config.pad_id) & causal_mask(tgt.shape[1], tgt.device)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Source ids ``(B, S)`` → memory ``(B, S, D)``.

        ``src_mask`` defaults to :meth:`src_mask` (padding hidden).
        """
        self._check_tokens(src, "src", self.config.src_vocab_size)
        if src_mask is None:
            src_mask = self.src_mask(src)
        x = self.src_pos(self.src_embed(src) * math.sqrt(self.config.d_model))  # (B, S, D)
        return self.encoder(x, src_mask)

    def decode(
        self, tgt: Tensor, memory: Tensor, memory_mask: Tensor | None = None
    ) -> Tensor:
        """Target ids ``(B, T)`` and memory ``(B, S, D)`` → logits ``(B, T, V)``.

        Args:
            tgt: target prefix, starting with BOS (teacher forcing).
            memory: output of :meth:`encode`.
            memory_mask: ``(B, 1, 1, S)`` source padding mask (``src_mask(src)``);
                None lets every source position be attended to.
        """
        self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
        y = self.tgt_pos(self.tgt_embed(tgt) * math.sqrt(self.config.d_model))  # (B, T, D)
        h = self.decoder(y, memory, self.tgt_mask(tgt), memory_mask)  # (B, T, D)
        return self.generator(h)  # (B, T, V)

    # Incremental decoding (the hooks of minitransformer.seq2seq.IncrementalDecoder)

    def start_decoding(
        self, memory: Tensor, memory_mask: Tensor | None = None
    ) -> TransformerDecodingState:
        """Key/value cache for decoding ``N`` sentences: every decoder layer's
        cross-attention keys/values of ``memory`` ``(N, S, D)`` (computed once
        here) and empty self-attention caches. ``memory_mask`` as in :meth:`decode`."""
        return TransformerDecodingState(self.decoder.start(memory), memory_mask)

    def decode_next(
        self, tokens: Tensor, state: TransformerDecodingState
    ) -> tuple[Tensor, TransformerDecodingState]:
        """Feed the latest target token of each row, ``(N,)`` (BOS first).

        Returns the logits ``(N, V)`` for the next token, equal (up to
        rounding) to the last position of :meth:`decode` on the whole prefix,
        and the state with this position's keys/values appended.
        """
        if tokens.dim() != 1:
            raise ValueError(
                f"Transformer.decode_next: tokens must have shape (N,), got {tuple(tokens.shape)}"
            )
        t = state.step
        if t >= self.config.max_len:
            raise ValueError(
                f"Transformer.decode_next: position {t} is beyond max_len={self.config.max_len}"
            )
        y = self.tgt_embed(tokens[:, None]) * math.sqrt(self.config.d_model)  # (N, 1, D)
        y = self._add_position(y, t)
        h, caches = self.decoder.step(y, state.caches, state.memory_mask)  # (N, 1, D)
        new_state = TransformerDecodingState(caches, state.memory_mask, t + 1)
        return self.generator(h[:, 0]), new_state  # (N, V)

    def reorder_state(
        self, state: TransformerDecodingState, index: Tensor
    ) -> TransformerDecodingState:
        """Rows ``index`` ``(N',)`` of the state (beam search)."""
        return state.index_select(index)

    def _add_position(self, y: Tensor, t: int) -> Tensor:
        """What ``tgt_pos`` does to position ``t`` of a sequence, for ``y`` ``(N, 1, D)``."""
        pos = self.tgt_pos
        if isinstance(pos, SinusoidalPositionalEncoding):
            y = y + pos.pe[t]
        elif isinstance(pos, LearnedPositionalEmbedding):
            y = y + pos.embedding.weight[t]
        return pos.dropout(y) if hasattr(pos, "dropout") else pos(y)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits.

        Args:
            src: source ids ``(B, S)``, int64, padded with ``pad_id``.
            tgt: target input ids ``(B, T)`` (BOS + target without its last token).

        Returns:
            logits ``(B, T, V)``; position ``t`` predicts target token ``t + 1``
            from source and ``tgt[:, : t + 1]`` only.
        """
        self._check_tokens(src, "src", self.config.src_vocab_size)
        if src.shape[0] != getattr(tgt, "shape", (src.shape[0],))[0]:
            raise ValueError(
                f"Transformer: src and tgt batch sizes differ: {src.shape[0]} and {tgt.shape[0]}"
            )
        src_mask = self.src_mask(src)
        return self.decode(tgt, self.encode(src, src_mask), src_mask)
