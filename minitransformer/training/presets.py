"""The book's CPU configuration: chapter 10, the command line's defaults,
the benchmarks.

A Transformer small enough to train for minutes on a laptop-class CPU:
width 256, 8 heads, 3 + 3 layers, feed-forward width 512, pre-LN, no
dropout (ten minutes show the model each sentence only a few times),
one cased subword vocabulary of 8,000 pieces shared by German and English
(SentencePiece BPE) with separate source embeddings, target embeddings and
output projection, Adam with the paper's warm-up schedule and label
smoothing, and a moving average of the weights as the result. Why each
setting was chosen, and what it gave (the vocabulary and tying campaign, the
bf16 measurement), is in ``benchmarks/README.md``.
``share_embeddings=True, tie_output=True`` gives the paper's tying.

Two sets of parts, :data:`ERA_PARTS`, fields that
:class:`~minitransformer.model.TransformerConfig` and
:class:`~minitransformer.lm.LanguageModelConfig` share: ``"2017"``, the
paper's (LayerNorm, ReLU, sinusoids, one key/value head per query head,
biases; the norm's place is left to the preset: pre-LN in :data:`CPU_MODEL`),
and ``"2020s"``, Llama's (pre-RMSNorm, SwiGLU, rotary positions,
grouped-query attention with 2 key/value heads, no biases).
:data:`CPU_MODEL_2020S` is :data:`CPU_MODEL` with the 2020s parts (the same
sizes); ``cpu_model_config(..., era="2020s")`` builds it, and
:func:`language_model_config` puts either era's parts on a language model.

With word vocabularies (``kind="words"``, the early chapters' simple path)
the two languages have different vocabularies and cannot share embeddings:
pass ``share_embeddings=False`` to :func:`cpu_model_config` (the command
line does so for ``--tokenizer words``).

:data:`CPU_MODEL` and :data:`CPU_TRAINING` are :class:`Preset` objects:
*partial configs*, typed by the config class they fill. Their keys are
checked against the class's fields when the module is imported (a typo or a
renamed field fails at once), and they read like the dicts they replace
(``CPU_MODEL["d_model"]``, ``**CPU_MODEL``). The other two are typed dicts:

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

The command line's language model (``lm train``) takes its defaults from
:data:`CPU_LM` (fields of :class:`~minitransformer.lm.LanguageModelConfig`,
derived from :data:`CPU_MODEL`) and :data:`CPU_LM_TRAINING` (:data:`CPU_TRAINING`
without label smoothing).

:func:`cpu_model_config` and :func:`cpu_train_config` build the configs,
with :func:`positions_for` the one rule for the model's ``max_len``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypedDict, TypeVar

from ..lm.models import LanguageModelConfig
from ..model import TransformerConfig
from .config import TrainConfig

__all__ = [
    "Preset",
    "CPU_MODEL",
    "CPU_TRAINING",
    "CPU_TOKENIZERS",
    "CPU_DATA",
    "ERA_PARTS",
    "CPU_MODEL_2020S",
    "CPU_MODELS",
    "positions_for",
    "cpu_model_config",
    "language_model_config",
    "cpu_train_config",
    "CPU_LM",
    "CPU_LM_TRAINING",
]

C = TypeVar("C")


class Preset(Mapping[str, Any], Generic[C]):
    """Some fields of the dataclass ``config_class``, checked against it:
    a partial config. Reads as a read-only dict of those fields;
    :meth:`build` fills the rest and makes the config."""

    def __init__(self, config_class: type[C], values: Mapping[str, Any]) -> None:
        names = {f.name for f in dataclasses.fields(config_class)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise TypeError(f"Preset: {config_class.__name__} has no field "
                            f"{', '.join(unknown)}")
        self.config_class = config_class
        self._values = dict(values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return repr(self._values)

    def build(self, *args: Any, **overrides: Any) -> C:
        """``config_class(*args, **{**preset, **overrides})``."""
        return self.config_class(*args, **{**self._values, **overrides})


#: :class:`~minitransformer.model.TransformerConfig` fields of the book's CPU model.
CPU_MODEL: Preset[TransformerConfig] = Preset(TransformerConfig, {
    "d_model": 256,
    "num_heads": 8,
    "num_encoder_layers": 3,
    "num_decoder_layers": 3,
    "d_ff": 512,
    "dropout": 0.0,
    "norm_first": True,
    # untied: chosen on validation BLEU (benchmarks/README.md, "The translator campaign")
    "share_embeddings": False,  # one embedding table for both languages (needs subwords)
    "tie_output": False,  # the output projection is the (target) embedding matrix
})

#: The parts of each era's Transformer: fields of both
#: :class:`~minitransformer.model.TransformerConfig` and
#: :class:`~minitransformer.lm.LanguageModelConfig` (checked below).
ERA_PARTS: dict[str, dict[str, Any]] = {
    "2017": {"norm": "layernorm", "feed_forward": "relu", "positional": "sinusoidal",
             "num_kv_heads": None, "bias": True},
    # 2 key/value heads: each serves 4 of CPU_MODEL's 8 query heads (needs an even num_heads)
    "2020s": {"norm_first": True, "norm": "rmsnorm", "feed_forward": "swiglu",
              "positional": "rope", "num_kv_heads": 2, "bias": False},
}
for _parts in ERA_PARTS.values():
    for _config_class in (TransformerConfig, LanguageModelConfig):
        Preset(_config_class, _parts)  # a typo or a renamed field fails at import

#: :data:`CPU_MODEL` with the 2020s parts: the same width, heads and layers,
#: Llama's parts, and the 2017 model's parameter count: grouped key/value
#: heads and no biases save weights, which a wider feed-forward network gives
#: back (``d_ff`` 805, SwiGLU hidden width 537: the width that
#: :func:`~minitransformer.instruments.summary.matched_d_ff` finds for any
#: vocabulary size, checked in ``tests/test_modern_parts.py``).
CPU_MODEL_2020S: Preset[TransformerConfig] = Preset(
    TransformerConfig, {**CPU_MODEL, **ERA_PARTS["2020s"], "d_ff": 805}
)

#: :class:`~minitransformer.training.TrainConfig` fields of its training.
CPU_TRAINING: Preset[TrainConfig] = Preset(TrainConfig, {
    "lr": 1e-3,
    "schedule": "noam",
    "warmup_steps": 200,
    "label_smoothing": 0.1,
    "ema_decay": 0.98,
    # bf16 autocast where the hardware computes bf16 (a GPU; a CPU with AVX512_BF16
    # or AMX where a bf16 product measures faster); elsewhere float32
    # (measured: benchmarks/README.md)
    "amp": "native",
})


#: :class:`~minitransformer.lm.LanguageModelConfig` fields of the command line's
#: language model (``lm train``): the translator's width, heads, feed-forward
#: width, pre-LN and no dropout, with as many layers as its encoder and
#: decoder together (the vocabulary size comes from the data).
CPU_LM: Preset[LanguageModelConfig] = Preset(LanguageModelConfig, {
    "d_model": CPU_MODEL["d_model"],
    "num_heads": CPU_MODEL["num_heads"],
    "num_layers": CPU_MODEL["num_encoder_layers"] + CPU_MODEL["num_decoder_layers"],
    "d_ff": CPU_MODEL["d_ff"],
    "dropout": CPU_MODEL["dropout"],
    "norm_first": CPU_MODEL["norm_first"],
    "tie_output": CPU_MODEL["tie_output"],
})

#: :class:`~minitransformer.training.TrainConfig` fields of its training: the
#: translator's, without label smoothing (the training loss is then the
#: cross-entropy whose exponential is the perplexity).
CPU_LM_TRAINING: Preset[TrainConfig] = Preset(TrainConfig, {
    **CPU_TRAINING, "label_smoothing": 0.0,
})


class TokenizerSettings(TypedDict):
    """Arguments of :func:`~minitransformer.data.build_tokenizers`."""

    kind: str  # "subword" (one cased BPE model for both languages) or "words"
    min_freq: int  # words: rarer words become <unk>
    vocab_size: int  # subword: pieces of the joint model
    target_pieces: str  # subword: "all" pieces on the target side, or those its training uses


class DataSettings(TypedDict):
    """``encode_pairs(max_len=)`` and ``TokenBatcher(max_tokens=)``."""

    max_len: int  # drop training pairs with a side longer than this (tokens)
    max_tokens: int  # padded source + target tokens per batch


#: :func:`~minitransformer.data.build_tokenizers` arguments: words seen at
#: least ``min_freq`` times (``kind="words"``), or a joint subword model of
#: ``vocab_size`` pieces (``kind="subword"``).
CPU_TOKENIZERS: TokenizerSettings = {
    "kind": "subword",  # one cased BPE model for both languages; or "words"
    "min_freq": 2,  # words: rarer words become <unk>
    "vocab_size": 8000,  # subword: pieces of the joint model (chosen on validation BLEU)
    # subword: the target side (the output layer) only has the pieces of the training
    # targets, about 4,140 of the 8,000 on Multi30k (measured: benchmarks/README.md)
    "target_pieces": "seen",
}

#: ``encode_pairs(max_len=)`` for the training pairs, ``TokenBatcher(max_tokens=)``.
CPU_DATA: DataSettings = {
    "max_len": 100,
    "max_tokens": 2048,
}


def positions_for(max_pair_len: int) -> int:
    """The model's ``max_len`` (positions it can encode) when training pairs
    have at most ``max_pair_len`` tokens a side: those plus ``<bos>`` or
    ``<eos>``, and at least 256, so that decoding a long sentence (its
    length + 50 tokens) has room."""
    return max(256, max_pair_len + 2)


#: The CPU translator of each era of :data:`ERA_PARTS`.
CPU_MODELS: dict[str, Preset[TransformerConfig]] = {"2017": CPU_MODEL, "2020s": CPU_MODEL_2020S}


def _era_check(era: str, where: str) -> None:
    if era not in ERA_PARTS:
        raise ValueError(f"{where}: era must be one of {', '.join(map(repr, ERA_PARTS))}, "
                         f"got {era!r}")


def cpu_model_config(
    src_vocab_size: int, tgt_vocab_size: int, *, era: str = "2017", **overrides: Any
) -> TransformerConfig:
    """The :class:`~minitransformer.model.TransformerConfig` of :data:`CPU_MODEL`
    (``era="2017"``) or :data:`CPU_MODEL_2020S` (``era="2020s"``) for these
    vocabulary sizes, ``max_len`` from :func:`positions_for` and
    :data:`CPU_DATA`'s ``max_len``; keyword arguments override fields."""
    _era_check(era, "cpu_model_config")
    overrides = {"max_len": positions_for(CPU_DATA["max_len"]), **overrides}
    return CPU_MODELS[era].build(src_vocab_size, tgt_vocab_size, **overrides)


def language_model_config(vocab_size: int, *, era: str = "2017",
                          **fields: Any) -> LanguageModelConfig:
    """A :class:`~minitransformer.lm.LanguageModelConfig` of ``vocab_size``
    ids with the parts of ``era`` (:data:`ERA_PARTS`) and ``fields`` (sizes,
    and overrides of the parts)."""
    _era_check(era, "language_model_config")
    return LanguageModelConfig(vocab_size, **{**ERA_PARTS[era], **fields})


def cpu_train_config(**overrides: Any) -> TrainConfig:
    """The :class:`~minitransformer.training.TrainConfig` of :data:`CPU_TRAINING`;
    keyword arguments override fields or set the others (budget, device, ...)."""
    return CPU_TRAINING.build(**overrides)
