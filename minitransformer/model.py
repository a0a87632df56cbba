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
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .checks import check_config, check_mask, check_sequence, check_token_range, check_tokens
from .config import TransformerConfig
from .factories import make_positional
from .layers import Decoder, DecoderCache, Encoder
from .masks import causal_mask, padding_mask
from .positional import PositionalEncoding
from .seq2seq import register_model

__all__ = ["TransformerConfig", "Transformer", "TransformerDecodingState"]


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


@register_model(TransformerConfig)
class Transformer(nn.Module):
    """Encoder-decoder Transformer for sequence-to-sequence tasks.

    Submodules: ``src_embed``, ``tgt_embed`` (``nn.Embedding``; the same
    object when ``share_embeddings``), ``src_pos``, ``tgt_pos``
    (:class:`~minitransformer.positional.PositionalEncoding`), ``encoder``,
    ``decoder`` and ``generator`` (``nn.Linear`` ``D → V``, whose weight is
    ``tgt_embed.weight`` when ``tie_output``). Embeddings are multiplied by
    √D before positions are added, as in the paper.

    Initialisation, by module type (not by parameter name): the weight of
    every ``nn.Linear`` and ``nn.Embedding`` is Xavier-uniform, as
    ``nn.Transformer`` initialises its matrices; biases keep ``nn.Linear``'s
    own initialisation and LayerNorms start at weight 1, bias 0; positional
    modules keep what their own ``reset_parameters`` set (sinusoidal codes,
    or N(0, 1/2) for learned positions), the ``nn.Embedding`` inside
    ``LearnedPositionalEmbedding`` included; the embedding rows of
    ``pad_id`` are zero.

    Differences from ``nn.Transformer``: it embeds token ids and builds the
    padding and causal masks itself; batch-first only; bool masks mean True =
    may attend. Final LayerNorms: ``nn.Transformer`` always ends its encoder
    and its decoder with one (``encoder.norm``, ``decoder.norm``), post-LN
    included; here they exist only with ``norm_first=True`` (pre-LN, whose
    last residual sum is not normalised otherwise). A post-LN model here
    equals an ``nn.Transformer`` whose two final norms are removed
    (``encoder.norm = decoder.norm = None``); a pre-LN model equals it as it
    is (``tests/test_model.py`` checks both, weights copied with
    :func:`~minitransformer.instruments.interop.load_torch_transformer`).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        check_config(config, TransformerConfig, type(self).__name__)
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        if c.share_embeddings:
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.src_pos = make_positional(c)
        self.tgt_pos = make_positional(c)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size)
        self._init_weights()
        if c.tie_output:
            self.generator.weight = self.tgt_embed.weight

    @torch.no_grad()
    def _init_weights(self) -> None:
        """Initialise by module type (see the class docstring), once, at construction."""
        positional = [m for m in self.modules() if isinstance(m, PositionalEncoding)]
        self_initialised = {sub for p in positional for sub in p.modules()}
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)) and module not in self_initialised:
                nn.init.xavier_uniform_(module.weight)
        self.src_embed.weight[self.config.pad_id].zero_()
        self.tgt_embed.weight[self.config.pad_id].zero_()

    def _check_tokens(self, tokens: Tensor, name: str, vocab_size: int) -> None:
        """Type, dtype, shape and length of ``tokens`` (metadata only), and their
        ids in eager mode on the CPU (:func:`~minitransformer.checks.check_token_range`)."""
        check_tokens(tokens, name, type(self).__name__, self.config.max_len)
        check_token_range(tokens, vocab_size, name, type(self).__name__)

    def src_mask(self, src: Tensor) -> Tensor:
        """``(B, 1, 1, S)`` bool padding mask of the source (True = real token)."""
        return padding_mask(src, self.config.pad_id)

    def tgt_mask(self, tgt: Tensor) -> Tensor:
        """``(B, 1, T, T)`` bool mask for decoder self-attention: causal and not padding."""
        return padding_mask(tgt, self.config.pad_id) & causal_mask(tgt.shape[1], tgt.device)

    def encode(self, src: Tensor, src_mask: Tensor | None = None, check: bool = True) -> Tensor:
        """Source ids ``(B, S)`` → memory ``(B, S, D)``.

        ``src_mask`` defaults to :meth:`src_mask` (padding hidden). ``check=False``:
        the caller has checked ``src`` and ``src_mask`` (as :meth:`forward` does).
        """
        if check:
            self._check_tokens(src, "src", self.config.src_vocab_size)
        if src_mask is None:
            src_mask = self.src_mask(src)
        embedded = self.src_embed(src) * math.sqrt(self.config.d_model)
        x = self.src_pos(embedded, check=False)  # (B, S, D)
        return self.encoder(x, src_mask, check=check)  # (B, S, D)

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
        return self._decode(tgt, memory, self.tgt_mask(tgt), memory_mask)

    def _decode(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        tgt_mask: Tensor | None,
        memory_mask: Tensor | None,
        caches: list[DecoderCache] | None = None,
        start: int = 0,
        check: bool = True,
    ) -> Tensor:
        """The decoder side for target positions ``start .. start + T - 1``
        ``(B, T)`` → logits ``(B, T, V)``: a whole prefix (``start=0``) or,
        with ``caches``, the new positions of incremental decoding. The
        decoder checks ``memory`` and the masks once unless ``check`` is False
        (masks the model built itself)."""
        y = self.tgt_embed(tgt) * math.sqrt(self.config.d_model)  # (B, T, D)
        y = self.tgt_pos(y, start, check=False)  # lengths checked with the ids
        h = self.decoder(y, memory, tgt_mask, memory_mask, caches, check=check)  # (B, T, D)
        return self.generator(h)  # (B, T, V)

    # Incremental decoding (the hooks of minitransformer.seq2seq.IncrementalDecoder)

    def start_decoding(
        self, memory: Tensor, memory_mask: Tensor | None = None
    ) -> TransformerDecodingState:
        """Key/value cache for decoding ``N`` sentences: every decoder layer's
        cross-attention keys/values of ``memory`` ``(N, S, D)`` (computed once
        here) and empty self-attention caches. ``memory_mask`` as in :meth:`decode`.
        Memory and mask are checked here, once for all the steps."""
        where = f"{type(self).__name__}.start_decoding"
        check_sequence(memory, self.config.d_model, where, "memory")
        if memory_mask is not None:
            n, s = memory.shape[:2]
            check_mask(memory_mask, (n, self.config.num_heads, 1, s), where)
        return TransformerDecodingState(self.decoder.start(memory), memory_mask)

    def decode_next(
        self, tokens: Tensor, state: TransformerDecodingState
    ) -> tuple[Tensor, TransformerDecodingState]:
        """Feed the latest target token of each row, ``(N,)`` (BOS first).

        Returns the logits ``(N, V)`` for the next token, equal (up to
        rounding) to the last position of :meth:`decode` on the whole prefix,
        and the state with this position's keys/values appended (the caches
        of ``state`` are updated in place and shared by the returned state).
        """
        where = f"{type(self).__name__}.decode_next"
        if not isinstance(tokens, Tensor) or tokens.dim() != 1:
            raise ValueError(
                f"{where}: tokens must have shape (N,), got {tuple(getattr(tokens, 'shape', ()))}"
            )
        t = state.step
        if t >= self.config.max_len:
            raise ValueError(f"{where}: position {t} is beyond max_len={self.config.max_len}")
        check_tokens(tokens[:, None], "tokens", where)  # ids from a search: no range check
        logits = self._decode(
            tokens[:, None], None, None, state.memory_mask, state.caches, start=t, check=False
        )  # (N, 1, V): the new position sees every cached one, so no causal mask
        return logits[:, 0], TransformerDecodingState(state.caches, state.memory_mask, t + 1)

    def reorder_state(
        self, state: TransformerDecodingState, index: Tensor
    ) -> TransformerDecodingState:
        """Rows ``index`` ``(N',)`` of the state (beam search)."""
        return state.index_select(index)

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
        self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"Transformer: src and tgt batch sizes differ: {src.shape[0]} and {tgt.shape[0]}"
            )
        src_mask = self.src_mask(src)  # (B, 1, 1, S)
        memory = self.encode(src, src_mask, check=False)  # (B, S, D)
        return self._decode(tgt, memory, self.tgt_mask(tgt), src_mask, check=False)  # (B, T, V)
