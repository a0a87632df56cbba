"""Decoder-only (GPT-style) and encoder-only (BERT-style) models, built from
the encoder-decoder's own parts.

    LanguageModel:        tokens → embedding·√D + positions → Encoder (causal mask) → logits
    MaskedLanguageModel:  tokens → embedding·√D + positions → Encoder (no causal mask) → logits

Both stack the package's :class:`~minitransformer.layers.EncoderLayer`:
self-attention and a feed-forward network with Add & Norm, no
cross-attention. What makes one a GPT and the other a BERT is the mask and
the objective alone:

- :class:`LanguageModel` (Radford et al. 2018) hides the future with
  :func:`~minitransformer.masks.causal_mask` and is trained to predict the
  next token (:func:`~minitransformer.data.make_lm_batch` does the shift);
  its key/value cache (:meth:`LanguageModel.start`, :meth:`LanguageModel.step`)
  makes each generated token cost one position;
- :class:`MaskedLanguageModel` (Devlin et al. 2019) lets every position see
  every other and is trained to fill in the tokens that
  :func:`~minitransformer.data.mask_tokens` hid.

Shape letters: ``B`` batch, ``L`` length, ``D`` model width, ``V`` vocabulary
size. Tensors are batch-first and right-padded with ``pad_id`` (the first
token of a row must not be padding).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn

from ..attention import KVCache
from ..checks import (
    check_config,
    check_dropout,
    check_heads,
    check_int_at_least,
    check_kv_heads,
    check_positive_int,
    check_token_range,
    check_tokens,
)
from ..config import TransformerConfig
from ..factories import KINDS, make_positional
from ..layers import Encoder
from ..masks import causal_mask, padding_mask
from ..positional import PositionalEncoding
from ..seq2seq import register_model

__all__ = ["LanguageModelConfig", "LanguageModel", "MaskedLanguageModel", "LanguageModelState"]


@dataclass
class LanguageModelConfig:
    """Sizes and switches of a :class:`LanguageModel` or :class:`MaskedLanguageModel`.

    One vocabulary (``vocab_size`` ids, padding ``pad_id``) and one stack of
    ``num_layers`` layers; every other field means what it means in
    :class:`~minitransformer.config.TransformerConfig`, with the same
    default (post-LN; GPT-2 and the book's chapter 11 use ``norm_first=True``),
    the switches of later models included (``positional``, ``norm``,
    ``feed_forward``, ``num_kv_heads``, ``bias``: see
    :class:`~minitransformer.config.TransformerConfig`).
    """

    vocab_size: int
    d_model: int = 512  # width of every token vector
    num_heads: int = 8  # attention heads per layer (must divide d_model)
    num_layers: int = 6
    d_ff: int = 2048  # inner width of the feed-forward networks
    dropout: float = 0.1
    max_len: int = 512  # longest sequence, in tokens
    pad_id: int = 0  # padding token id
    norm_first: bool = False  # False: post-LN as in the 2017 paper; True: pre-LN (GPT-2)
    tie_output: bool = False  # output projection = embedding matrix
    positional: Literal["sinusoidal", "learned", "none", "rope"] = "sinusoidal"
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"  # the normalisation of every sub-layer
    feed_forward: Literal["relu", "gelu", "swiglu"] = "relu"  # every layer's position-wise network
    num_kv_heads: int | None = None  # key/value heads (None: num_heads; 1: multi-query)
    bias: bool = True  # biases in the attention and feed-forward linear layers

    def __post_init__(self) -> None:
        where = "LanguageModelConfig"
        for name in ("vocab_size", "d_model", "num_heads", "d_ff", "max_len"):
            check_positive_int(getattr(self, name), name, where)
        check_int_at_least(self.num_layers, 0, "num_layers", where)
        check_heads(self.d_model, self.num_heads, where)
        check_dropout(self.dropout, where)
        for name, table in KINDS.items():
            kind = getattr(self, name)
            if kind not in table:
                known = ", ".join(repr(k) for k in table)
                raise ValueError(f"{where}: {name} must be one of {known}, got {kind!r}")
        check_kv_heads(self.num_heads, self.num_kv_heads, where)
        if self.positional == "rope" and (self.d_model // self.num_heads) % 2:
            raise ValueError(f"{where}: positional='rope' needs an even head width, got "
                             f"d_model / num_heads = {self.d_model // self.num_heads}")
        check_int_at_least(self.pad_id, 0, "pad_id", where)
        if self.pad_id >= self.vocab_size:
            raise ValueError(f"{where}: pad_id {self.pad_id} is outside the vocabulary "
                             f"[0, {self.vocab_size})")

    def to_dict(self) -> dict:
        """Plain dict (for JSON and checkpoints); ``LanguageModelConfig(**d)`` rebuilds it."""
        return asdict(self)

    def layer_config(self) -> TransformerConfig:
        """The :class:`~minitransformer.config.TransformerConfig` the stack is
        built from: the same sizes and switches, ``num_layers`` encoder layers
        and no decoder layers."""
        shared = {k: v for k, v in asdict(self).items()
                  if k not in ("vocab_size", "num_layers")}
        return TransformerConfig(
            src_vocab_size=self.vocab_size, tgt_vocab_size=self.vocab_size,
            num_encoder_layers=self.num_layers, num_decoder_layers=0, **shared,
        )


@dataclass
class LanguageModelState:
    """The key/value cache of :meth:`LanguageModel.step` for ``B`` rows."""

    caches: list[KVCache]  #: one per layer, ``(B, Hkv, step, Dh)`` keys and values
    step: int = field(default=0)  #: tokens fed so far (the next one's position)

    def index_select(self, index: Tensor) -> LanguageModelState:
        """Rows ``index`` ``(B',)`` of every cache (beam search reorders them)."""
        return LanguageModelState([c.index_select(index) for c in self.caches], self.step)

    def num_bytes(self) -> int:
        """Memory the cached keys and values take: ``2 · layers · B · step ·
        Hkv · Dh`` numbers of the model's dtype (``Hkv · Dh = D`` unless
        ``num_kv_heads`` is below ``num_heads``)."""
        return sum(t.numel() * t.element_size() for c in self.caches for t in (c.k, c.v))


class _StackModel(nn.Module):
    """What both models hold: ``embed`` (``nn.Embedding``), ``pos`` (the
    positional module), ``encoder`` (the package's
    :class:`~minitransformer.layers.Encoder`, ``num_layers`` layers) and
    ``output`` (``nn.Linear`` ``D → V``, whose weight is ``embed.weight``
    when ``tie_output``). Initialised as the
    :class:`~minitransformer.model.Transformer` is: Xavier-uniform weights,
    positional modules as they set themselves, the padding row zero."""

    causal: bool  #: whether a position may see only itself and earlier ones

    def __init__(self, config: LanguageModelConfig):
        super().__init__()
        check_config(config, LanguageModelConfig, type(self).__name__)
        self.config = c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.pos = make_positional(c)
        self.encoder = Encoder(c.layer_config())
        self.output = nn.Linear(c.d_model, c.vocab_size)
        self._init_weights()
        if c.tie_output:
            self.output.weight = self.embed.weight

    @torch.no_grad()
    def _init_weights(self) -> None:
        positional = {sub for m in self.modules() if isinstance(m, PositionalEncoding)
                      for sub in m.modules()}
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)) and module not in positional:
                nn.init.xavier_uniform_(module.weight)
        self.embed.weight[self.config.pad_id].zero_()

    def mask(self, tokens: Tensor) -> Tensor:
        """The self-attention mask of ``tokens`` ``(B, L)``: padding hidden,
        and with ``causal`` the future too: ``(B, 1, L, L)`` or ``(B, 1, 1, L)``
        bool, True = may attend."""
        keep = padding_mask(tokens, self.config.pad_id)  # (B, 1, 1, L)
        if self.causal:
            return keep & causal_mask(tokens.shape[1], tokens.device)  # (B, 1, L, L)
        return keep

    def _check(self, tokens: Tensor, where: str, start: int = 0) -> None:
        check_tokens(tokens, "tokens", where, self.config.max_len - start)
        check_token_range(tokens, self.config.vocab_size, "tokens", where)

    def _run(
        self, tokens: Tensor, mask: Tensor | None, caches: list[KVCache] | None = None,
        start: int = 0,
    ) -> Tensor:
        """Positions ``start .. start + L - 1`` ``(B, L)`` → logits ``(B, L, V)``."""
        x = self.embed(tokens) * math.sqrt(self.config.d_model)  # (B, L, D)
        x = self.pos(x, start, check=False)
        h = self.encoder(x, mask, check=False, caches=caches)  # (B, L, D)
        return self.output(h)  # (B, L, V)

    def forward(self, tokens: Tensor) -> Tensor:
        """Token ids ``(B, L)`` (int64, right-padded with ``pad_id``) → logits
        ``(B, L, V)``. For :class:`LanguageModel`, position ``t`` sees
        ``tokens[:, : t + 1]`` only and predicts token ``t + 1``; for
        :class:`MaskedLanguageModel`, every position sees every non-padding
        token and predicts the token at its own position."""
        self._check(tokens, type(self).__name__)
        return self._run(tokens, self.mask(tokens))


@register_model(LanguageModelConfig)
class LanguageModel(_StackModel):
    """A decoder-only, GPT-style language model: the causal mask and the
    next-token objective over the package's encoder stack (see
    :class:`_StackModel` for its submodules).

    ``forward(tokens)`` gives every position's next-token logits (training,
    scoring); :meth:`start` and :meth:`step` generate with a key/value cache
    (:func:`~minitransformer.lm.sampling.generate`). ``tests/test_language_model.py``
    checks it against ``nn.TransformerEncoder`` run with a causal mask.
    """

    causal = True

    def start(self, batch: int = 1) -> LanguageModelState:
        """An empty key/value cache for ``batch`` rows (on the model's device)."""
        check_positive_int(batch, "batch", f"{type(self).__name__}.start")
        like = self.embed.weight
        return LanguageModelState(self.encoder.start(batch, like))

    def step(self, tokens: Tensor, state: LanguageModelState) -> tuple[Tensor, LanguageModelState]:
        """Feed the next ``L`` tokens of each row, ``(B, L)`` (a whole prompt,
        or one token), after the ``state.step`` already fed.

        Returns the logits ``(B, L, V)``, equal (up to rounding) to those of
        :meth:`forward` on the whole sequence at these positions, and the
        state with their keys and values appended (the caches of ``state``
        are updated in place and shared by the returned one). The rows must
        hold no padding (a cache has no padding mask).
        """
        where = f"{type(self).__name__}.step"
        self._check(tokens, where, state.step)
        n, length = tokens.shape
        if state.caches and state.caches[0].k.shape[0] != n:
            raise ValueError(f"{where}: tokens has {n} rows but the cache holds "
                             f"{state.caches[0].k.shape[0]}")
        if length == 1:
            mask = None  # the new position sees every cached one
        else:  # (L, step + L): row i sees the cache and new positions 0..i
            full = causal_mask(state.step + length, tokens.device)
            mask = full[state.step:]
        logits = self._run(tokens, mask, state.caches, state.step)
        return logits, LanguageModelState(state.caches, state.step + length)


@register_model(LanguageModelConfig)
class MaskedLanguageModel(_StackModel):
    """An encoder-only, BERT-style model: no causal mask, every position sees
    the whole sentence, and the output layer predicts each position's own
    token (trained on the positions :func:`~minitransformer.data.mask_tokens`
    chose). BERT's next-sentence task and its segment embeddings are left
    out (see :class:`~minitransformer.variants.SegmentEmbedding` for the
    latter); the output layer is a single linear map, as GPT's is."""

    causal = False
