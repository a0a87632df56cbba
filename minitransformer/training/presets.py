"""The book's CPU configuration: chapter 10, the command line's defaults,
the benchmarks.

A Transformer small enough to train for minutes on a laptop-class CPU:
width 256, 8 heads, 3 + 3 layers, feed-forward width 512, pre-LN, no
dropout (ten minutes show the model each sentence only a few times),
one cased subword vocabulary of 8,000 pieces shared by German and English
(SentencePiece BPE) with separate source embeddings, target embeddings and
output projection, Adam with the paper's warm-up schedule and label
smoothing, and a moving average of the weights as the result. Why each
setting, and what it gave, is measured in ``benchmarks/README.md``.

The vocabulary size and the tying were chosen on the validation split
(``benchmarks/campaign_translator.py``, 2026-11-30): ten-minute runs with
4,000, 8,000 and 12,000 pieces tied three ways (8,000 best), then 8,000
untied, then both 8,000 models with three seeds each; untied scored beam-4
cased BLEU 38.07 on average (37.66 to 38.52), tied as in the paper 37.19
(36.96 to 37.64). ``share_embeddings=True, tie_output=True`` gives the
paper's tying (two 8,000 × 256 tables fewer: 4.1 M of the 10.1 M parameters).

With word vocabularies (``kind="words"``, the early chapters' simple path)
the two languages have different vocabularies and cannot share embeddings:
pass ``share_embeddings=False`` to :func:`cpu_model_config` (the command
line does so for ``--tokenizer words``).

Each dictionary uses the names of the thing it configures, so it can be
passed on as keyword arguments:

- :data:`CPU_MODEL`: fields of :class:`~minitransformer.model.TransformerConfig`
  (the vocabulary sizes come from the data);
- :data:`CPU_TRAINING`: fields of :class:`~minitransformer.training.TrainConfig`
  (the budget, device and checkpoint folder are the caller's);
- :data:`CPU_TOKENIZERS`: arguments of
  :func:`~minitransformer.data.build_tokenizers` (``min_freq`` also of
  :func:`~minitransformer.data.build_vocabs`);
- :data:`CPU_DATA`: ``max_len`` of :func:`~minitransformer.data.encode_pairs`
  (the longest training sentence, in tokens) and ``max_tokens`` of
  :class:`~minitransformer.data.TokenBatcher`.

:func:`cpu_model_config` and :func:`cpu_train_config` build the configs,
with :func:`positions_for` the one rule for the model's ``max_len``.
"""

from __future__ import annotations

from typing import Any

from ..model import TransformerConfig
from .loop import TrainConfig

__all__ = [
    "CPU_MODEL",
    "CPU_TRAINING",
    "CPU_TOKENIZERS",
    "CPU_DATA",
    "positions_for",
    "cpu_model_config",
    "cpu_train_config",
]

#: :class:`~minitransformer.model.TransformerConfig` fields of the book's CPU model.
CPU_MODEL: dict[str, Any] = {
    "d_model": 256,
    "num_heads": 8,
    "num_encoder_layers": 3,
    "num_decoder_layers": 3,
    "d_ff": 512,
    "dropout": 0.0,
    "norm_first": True,
    # untied: chosen on validation BLEU over three seeds against the paper's three-way
    # tying (benchmarks/README.md, "The translator campaign")
    "share_embeddings": False,  # one embedding table for both languages (needs subwords)
    "tie_output": False,  # the output projection is the (target) embedding matrix
}

#: :class:`~minitransformer.training.TrainConfig` fields of its training.
CPU_TRAINING: dict[str, Any] = {
    "lr": 1e-3,
    "schedule": "noam",
    "warmup_steps": 200,
    "label_smoothing": 0.1,
    "ema_decay": 0.98,
    # bf16 autocast where the hardware computes bf16 (a CPU with AVX512_BF16 or
    # AMX, a GPU); elsewhere float32. Measured on a 2-core AVX512_BF16 CPU
    # (benchmarks/README.md): 1.32x the float32 tokens/s, and after the same 300
    # steps a validation cross-entropy 0.006 above float32's (one seed)
    "amp": "native",
}

#: :func:`~minitransformer.data.build_tokenizers` arguments: words seen at
#: least ``min_freq`` times (``kind="words"``), or a joint subword model of
#: ``vocab_size`` pieces (``kind="subword"``).
CPU_TOKENIZERS: dict[str, Any] = {
    "kind": "subword",  # one cased BPE model for both languages; or "words"
    "min_freq": 2,  # words: rarer words become <unk>
    "vocab_size": 8000,  # subword: pieces of the joint model (chosen on validation BLEU)
}

#: ``encode_pairs(max_len=)`` for the training pairs, ``TokenBatcher(max_tokens=)``.
CPU_DATA: dict[str, Any] = {
    "max_len": 100,
    "max_tokens": 2048,
}


def positions_for(max_pair_len: int) -> int:
    """The model's ``max_len`` (positions it can encode) when training pairs
    have at most ``max_pair_len`` tokens a side: those plus ``<bos>`` or
    ``<eos>``, and at least 256, so that decoding a long sentence (its
    length + 50 tokens) has room."""
    return max(256, max_pair_len + 2)


def cpu_model_config(
    src_vocab_size: int, tgt_vocab_size: int, **overrides: Any
) -> TransformerConfig:
    """The :class:`~minitransformer.model.TransformerConfig` of :data:`CPU_MODEL`
    for these vocabulary sizes, ``max_len`` from :func:`positions_for` and
    :data:`CPU_DATA`'s ``max_len``; keyword arguments override fields."""
    fields = {**CPU_MODEL, "max_len": positions_for(CPU_DATA["max_len"]), **overrides}
    return TransformerConfig(src_vocab_size, tgt_vocab_size, **fields)


def cpu_train_config(**overrides: Any) -> TrainConfig:
    """The :class:`~minitransformer.training.TrainConfig` of :data:`CPU_TRAINING`;
    keyword arguments override fields or set the others (budget, device, ...)."""
    return TrainConfig(**{**CPU_TRAINING, **overrides})
