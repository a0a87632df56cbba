"""The RNN encoder-decoders that came before the Transformer.

Three GRU models with one shared encoder, in the order of the history of
neural machine translation:

- :class:`SimpleSeq2Seq` (Sutskever et al., 2014, "Sequence to Sequence
  Learning with Neural Networks", with GRUs): the encoder's summary of the
  whole source only *initialises* the decoder's hidden state;
- :class:`ContextSeq2Seq` (Cho et al., 2014, "Learning Phrase
  Representations using RNN Encoder-Decoder"): that summary, the context
  ``c``, is also fed into *every* decoder step and into the output layer;
- :class:`AttentionSeq2Seq` (Bahdanau et al., 2015, "Neural Machine
  Translation by Jointly Learning to Align and Translate"): each step's
  context ``c_t`` is a weighted average of *all* encoder states, the weights
  from additive attention between the previous decoder state and each
  encoder state.

The encoder is a (by default bidirectional) GRU run over the real tokens
only (packed), so padding changes nothing. Its output, the *memory*
``(B, S, E)``, is a plain tensor, as the Transformer's is: the source summary
is read back from it (the forward direction's state at the last real token
and the backward direction's state at the first).

All three have the seq2seq interface of :class:`minitransformer.Transformer`
(``forward``, ``src_mask``, ``encode``, ``decode``, ``config.pad_id``) and
incremental decoding (:meth:`start_decoding`, :meth:`decode_next`,
:meth:`reorder_state`, the protocol of :mod:`minitransformer.seq2seq`), so
the package's trainer, greedy and beam decoding and BLEU serve them and the
Transformer alike.

Shape letters: ``B`` batch, ``S`` source length, ``T`` target length,
``M`` embedding width, ``H`` hidden width (per direction), ``E`` encoder
output width (``2H`` bidirectional, else ``H``), ``V`` target vocabulary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..attention import masked_softmax
from ..checks import check_config, check_token_range, check_tokens
from ..masks import padding_mask
from ..seq2seq import register_model, reorder_tensors
from .attention_scorers import AdditiveAttention

__all__ = [
    "RNNConfig",
    "RNNEncoder",
    "SimpleSeq2Seq",
    "ContextSeq2Seq",
    "AttentionSeq2Seq",
    "RNN_MODELS",
]


@dataclass
class RNNConfig:
    """Sizes of the RNN encoder-decoders (small defaults that train on a CPU)."""

    src_vocab_size: int
    tgt_vocab_size: int
    emb_dim: int = 128  # M: token embedding width (source and target)
    hidden_dim: int = 256  # H: GRU hidden width (encoder per direction, and decoder)
    attn_dim: int = 256  # A: hidden width of the additive attention scorer
    dropout: float = 0.1  # on embeddings and before the output layer
    bidirectional: bool = True  # encoder reads the source both ways (as Bahdanau et al.)
    pad_id: int = 0  # padding id, the same in both vocabularies

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "emb_dim", "hidden_dim", "attn_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"RNNConfig: {name} must be a positive int, got {value!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"RNNConfig: dropout must be in [0, 1), got {self.dropout}")
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"RNNConfig: pad_id {self.pad_id} is outside the vocabularies")

    @property
    def enc_dim(self) -> int:
        """``E``: width of each encoder output vector."""
        return self.hidden_dim * (2 if self.bidirectional else 1)

    def to_dict(self) -> dict:
        """Plain dict (for JSON and checkpoints); ``RNNConfig(**d)`` rebuilds it."""
        return asdict(self)


def _lengths(src_mask: Tensor) -> Tensor:
    """``(B, 1, 1, S)`` or ``(B, S)`` bool mask → ``(B,)`` number of real tokens (at least 1)."""
    mask = src_mask.reshape(src_mask.shape[0], -1)
    return mask.sum(dim=-1).clamp(min=1)


class RNNEncoder(nn.Module):
    """Embedding → dropout → GRU (bidirectional by default) over the real tokens.

    Padding must be at the end of each row (as :func:`minitransformer.data.make_batch`
    pads); padded positions of the output are zero.
    """

    def __init__(self, config: RNNConfig):
        super().__init__()
        c = config
        self.embed = nn.Embedding(c.src_vocab_size, c.emb_dim, padding_idx=c.pad_id)
        self.dropout = nn.Dropout(c.dropout)
        self.rnn = nn.GRU(c.emb_dim, c.hidden_dim, batch_first=True, bidirectional=c.bidirectional)
        self.hidden_dim = c.hidden_dim
        self.bidirectional = c.bidirectional

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """Source ids ``(B, S)`` and their padding mask → states ``(B, S, E)``."""
        lengths = _lengths(src_mask)
        x = self.dropout(self.embed(src))  # (B, S, M)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        return out  # (B, S, E)

    def summary(self, memory: Tensor, src_mask: Tensor | None) -> Tensor:
        """The fixed-size summary of the source, ``(B, E)``: the forward GRU's
        state after the last real token (and the backward GRU's state after
        the first token), read from ``memory``; equal to the GRU's final state."""
        b, s, _ = memory.shape
        if src_mask is None:
            last = torch.full((b,), s - 1, device=memory.device)
        else:
            last = _lengths(src_mask).to(memory.device) - 1
        rows = torch.arange(b, device=memory.device)
        forward_final = memory[rows, last, : self.hidden_dim]  # (B, H)
        if not self.bidirectional:
            return forward_final
        backward_final = memory[:, 0, self.hidden_dim :]  # (B, H)
        return torch.cat([forward_final, backward_final], dim=-1)  # (B, 2H)


class _RNNSeq2Seq(nn.Module):
    """What the three models share: encoder, target embedding, bridge, interface."""

    def __init__(self, config: RNNConfig):
        super().__init__()
        check_config(config, RNNConfig, type(self).__name__)
        self.config = c = config
        self.encoder = RNNEncoder(c)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.emb_dim, padding_idx=c.pad_id)
        self.dropout = nn.Dropout(c.dropout)
        # Source summary (B, E) -> the decoder's initial hidden state (B, H).
        self.bridge = nn.Linear(c.enc_dim, c.hidden_dim)

    # -- checks -----------------------------------------------------------------
    def _check_tokens(self, tokens: Tensor, name: str, vocab_size: int) -> None:
        check_tokens(tokens, name, type(self).__name__)
        check_token_range(tokens, vocab_size, name, type(self).__name__)

    # -- the seq2seq interface --------------------------------------------------
    def src_mask(self, src: Tensor) -> Tensor:
        """``(B, 1, 1, S)`` bool padding mask of the source (True = real token)."""
        return padding_mask(src, self.config.pad_id)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Source ids ``(B, S)`` → memory ``(B, S, E)`` (encoder GRU states)."""
        self._check_tokens(src, "src", self.config.src_vocab_size)
        if src_mask is None:
            src_mask = self.src_mask(src)
        return self.encoder(src, src_mask)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits.

        Args:
            src: source ids ``(B, S)``, padded with ``pad_id`` at the end.
            tgt: target input ids ``(B, T)`` (BOS + target without its last token).

        Returns:
            logits ``(B, T, V)``; position ``t`` predicts target token ``t + 1``.
        """
        self._check_tokens(src, "src", self.config.src_vocab_size)
        self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"{type(self).__name__}: src and tgt batch sizes differ: "
                f"{src.shape[0]} and {tgt.shape[0]}"
            )
        src_mask = self.src_mask(src)
        return self.decode(tgt, self.encode(src, src_mask), src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        """Target ids ``(B, T)`` (BOS first) and memory ``(B, S, E)`` → logits ``(B, T, V)``.

        ``memory_mask`` is the source padding mask (``src_mask(src)``); None
        means every source position is real.
        """
        self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
        state = self.start_decoding(memory, memory_mask)
        return self._decode_all(tgt, state)

    # -- incremental decoding ---------------------------------------------------
    def start_decoding(self, memory: Tensor, memory_mask: Tensor | None = None) -> dict:
        """Everything the decoder carries from step to step, as a dict of ``(B, ...)`` tensors."""
        summary = self.encoder.summary(memory, memory_mask)  # (B, E)
        return {"hidden": torch.tanh(self.bridge(summary)), "summary": summary}  # (B, H), (B, E)

    def decode_next(self, tokens: Tensor, state: dict) -> tuple[Tensor, dict]:
        """One step: previous tokens ``(B,)`` → next-token logits ``(B, V)``, new state."""
        raise NotImplementedError

    def reorder_state(self, state: dict, index: Tensor) -> dict:
        """Select (and repeat) batch rows of ``state`` (e.g. surviving beams), ``index (B',)``."""
        return reorder_tensors(state, index)

    def _decode_all(self, tgt: Tensor, state: dict) -> Tensor:
        """Teacher forcing over the whole target, step by step; subclasses do it faster."""
        logits = []
        for t in range(tgt.shape[1]):
            step_logits, state = self.decode_next(tgt[:, t], state)
            logits.append(step_logits)
        return torch.stack(logits, dim=1)  # (B, T, V)


@register_model(RNNConfig)
class SimpleSeq2Seq(_RNNSeq2Seq):
    """Encoder-decoder whose source summary only initialises the decoder.

    ``h_0 = tanh(W s)``, ``h_t = GRU(y_{t-1}, h_{t-1})``, ``p(y_t) = softmax(W_o h_t)``:
    nothing else links the decoder to the source.
    """

    def __init__(self, config: RNNConfig):
        super().__init__(config)
        c = config
        self.rnn = nn.GRU(c.emb_dim, c.hidden_dim, batch_first=True)
        self.generator = nn.Linear(c.hidden_dim, c.tgt_vocab_size)

    def _decode_all(self, tgt: Tensor, state: dict) -> Tensor:
        y = self.dropout(self.tgt_embed(tgt))  # (B, T, M)
        out, _ = self.rnn(y, state["hidden"][None])  # (B, T, H)
        return self.generator(self.dropout(out))  # (B, T, V)

    def decode_next(self, tokens: Tensor, state: dict) -> tuple[Tensor, dict]:
        y = self.dropout(self.tgt_embed(tokens))  # (B, M)
        out, _ = self.rnn(y[:, None], state["hidden"][None])  # (B, 1, H)
        h = out[:, 0]
        return self.generator(self.dropout(h)), {**state, "hidden": h}


@register_model(RNNConfig)
class ContextSeq2Seq(_RNNSeq2Seq):
    """Cho et al.'s encoder-decoder: the same context ``c`` enters every step.

    ``h_t = GRU([y_{t-1}; c], h_{t-1})``, ``p(y_t) = softmax(W_o [h_t; y_{t-1}; c])``,
    with ``c`` the encoder's summary ``(B, E)``, static over the steps.
    """

    def __init__(self, config: RNNConfig):
        super().__init__(config)
        c = config
        self.rnn = nn.GRU(c.emb_dim + c.enc_dim, c.hidden_dim, batch_first=True)
        self.generator = nn.Linear(c.hidden_dim + c.emb_dim + c.enc_dim, c.tgt_vocab_size)

    def _decode_all(self, tgt: Tensor, state: dict) -> Tensor:
        y = self.dropout(self.tgt_embed(tgt))  # (B, T, M)
        ctx = state["summary"][:, None].expand(-1, tgt.shape[1], -1)  # (B, T, E)
        out, _ = self.rnn(torch.cat([y, ctx], dim=-1), state["hidden"][None])  # (B, T, H)
        return self.generator(self.dropout(torch.cat([out, y, ctx], dim=-1)))  # (B, T, V)

    def decode_next(self, tokens: Tensor, state: dict) -> tuple[Tensor, dict]:
        y = self.dropout(self.tgt_embed(tokens))  # (B, M)
        ctx = state["summary"]  # (B, E)
        out, _ = self.rnn(torch.cat([y, ctx], dim=-1)[:, None], state["hidden"][None])
        h = out[:, 0]  # (B, H)
        logits = self.generator(self.dropout(torch.cat([h, y, ctx], dim=-1)))
        return logits, {**state, "hidden": h}


@register_model(RNNConfig)
class AttentionSeq2Seq(_RNNSeq2Seq):
    """Bahdanau et al.'s encoder-decoder with additive attention.

    At step ``t``: weights ``a_t = softmax(score(h_{t-1}, m_j))`` over the
    encoder states ``m_j`` (padding excluded), context ``c_t = Σ_j a_tj m_j``,
    ``h_t = GRU([y_{t-1}; c_t], h_{t-1})``,
    ``p(y_t) = softmax(W_o [h_t; y_{t-1}; c_t])``.

    ``decode(..., need_weights=True)`` and ``forward(..., need_weights=True)``
    also return the alignment ``(B, T, S)``: row ``t`` holds the weights used
    to predict target token ``t + 1``.
    """

    def __init__(self, config: RNNConfig):
        super().__init__(config)
        c = config
        self.attention = AdditiveAttention(c.hidden_dim, c.enc_dim, c.attn_dim)
        self.cell = nn.GRUCell(c.emb_dim + c.enc_dim, c.hidden_dim)
        self.generator = nn.Linear(c.hidden_dim + c.emb_dim + c.enc_dim, c.tgt_vocab_size)

    def start_decoding(self, memory: Tensor, memory_mask: Tensor | None = None) -> dict:
        state = super().start_decoding(memory, memory_mask)
        b, s, _ = memory.shape
        if memory_mask is None:
            mask = torch.ones(b, s, dtype=torch.bool, device=memory.device)
        else:
            mask = memory_mask.reshape(b, s)
        state.update(
            memory=memory,  # (B, S, E)
            keys=self.attention.project_keys(memory),  # (B, S, A), computed once
            mask=mask,  # (B, S)
        )
        return state

    def _step(
        self, y: Tensor, state: dict
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Embedded tokens ``(B, M)`` → logits ``(B, V)``,
        hidden ``(B, H)``, weights ``(B, S)``."""
        h = state["hidden"]
        # (B, 1, S)
        scores = self.attention.score_projected(h[:, None], state["keys"])
        # (B, 1, S)
        weights = masked_softmax(scores, state["mask"][:, None])
        context = (weights @ state["memory"])[:, 0]  # (B, E)
        h = self.cell(torch.cat([y, context], dim=-1), h)  # (B, H)
        features = torch.cat([h, y, context], dim=-1)
        logits = self.generator(self.dropout(features))
        return logits, h, weights[:, 0]

    def decode_next(self, tokens: Tensor, state: dict) -> tuple[Tensor, dict]:
        logits, h, _ = self._step(self.dropout(self.tgt_embed(tokens)), state)
        return logits, {**state, "hidden": h}

    def _decode_all(self, tgt: Tensor, state: dict, need_weights: bool = False):
        y = self.dropout(self.tgt_embed(tgt))  # (B, T, M)
        all_logits, all_weights = [], []
        for t in range(tgt.shape[1]):
            logits, h, w = self._step(y[:, t], state)
            state = {**state, "hidden": h}
            all_logits.append(logits)
            all_weights.append(w)
        logits = torch.stack(all_logits, dim=1)  # (B, T, V)
        return (logits, torch.stack(all_weights, dim=1)) if need_weights else logits

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        memory_mask: Tensor | None = None,
        need_weights: bool = False,
    ):
        """As :meth:`SimpleSeq2Seq.decode`; with ``need_weights`` returns
        ``(logits (B, T, V), weights (B, T, S))``."""
        self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
        state = self.start_decoding(memory, memory_mask)
        return self._decode_all(tgt, state, need_weights)

    def forward(self, src: Tensor, tgt: Tensor, need_weights: bool = False):
        """Teacher-forced logits ``(B, T, V)``; with ``need_weights`` also the
        alignment ``(B, T, S)``."""
        if not need_weights:
            return super().forward(src, tgt)
        self._check_tokens(src, "src", self.config.src_vocab_size)
        src_mask = self.src_mask(src)
        return self.decode(tgt, self.encode(src, src_mask), src_mask, need_weights=True)


#: The three models by name, in historical order.
RNN_MODELS: dict[str, type[_RNNSeq2Seq]] = {
    "simple": SimpleSeq2Seq,
    "context": ContextSeq2Seq,
    "attention": AttentionSeq2Seq,
}
