"""Translation as language modelling: a decoder-only model that reads
``German [BOS] English [EOS]`` and is trained on the English part.

The training batches come from :func:`~minitransformer.data.make_lm_batch`
with the source as the prefix (``LMBatcher(list(zip(src_ids, tgt_ids)))``):
the loss covers the English tokens and the final EOS only. To translate,
:class:`PromptedLanguageModel` shows a
:class:`~minitransformer.lm.models.LanguageModel` to the searches of
:mod:`minitransformer.decoding` as if it were an encoder-decoder: the
"memory" is the source ids themselves, :meth:`PromptedLanguageModel.start_decoding`
runs them through the model once (filling the key/value cache), and every
decoding step feeds one target token after them, BOS first, as in training.
:func:`translate_with_lm` translates raw sentences with it (greedy or beam).

A key/value cache has no padding mask, so the prompts decoded together
must have the same length: :func:`translate_with_lm` groups the sentences
by their length in tokens. Shape letters: ``N`` rows, ``S`` source length,
``T`` target length, ``V`` vocabulary size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..checks import check_config
from ..decoding import translate
from ..masks import padding_mask
from .models import LanguageModel, LanguageModelConfig, LanguageModelState

__all__ = ["PromptedLanguageModel", "translate_with_lm"]


@dataclass(frozen=True)
class _PromptedConfig:
    """What the searches read from a model's config."""

    pad_id: int
    src_vocab_size: int
    tgt_vocab_size: int
    max_len: int  #: target tokens (BOS included) that fit after the longest prompt
    max_src_len: int  #: the longest prompt: one that leaves a position for BOS


class PromptedLanguageModel(nn.Module):
    """A :class:`~minitransformer.lm.models.LanguageModel` behind the
    seq2seq interface of :mod:`minitransformer.seq2seq` (``src_mask``,
    ``encode``, ``decode``) and its incremental hooks (``start_decoding``,
    ``decode_next``, ``reorder_state``), so that
    :func:`~minitransformer.decoding.greedy_decode`,
    :func:`~minitransformer.decoding.beam_search` and
    :func:`~minitransformer.decoding.translate` run it unchanged.

    Args:
        model: the language model (held as ``self.model``, not copied).
        prompt_len: the length ``S`` of the prompts it will be given; its
            ``config.max_len`` is what is left of the model's positions.

    The prompts ``(N, S)`` must hold no padding (see the module docstring).
    """

    def __init__(self, model: LanguageModel, prompt_len: int = 0):
        super().__init__()
        check_config(getattr(model, "config", None), LanguageModelConfig,
                     "PromptedLanguageModel")
        self.model = model
        c = model.config
        self.config = _PromptedConfig(c.pad_id, c.vocab_size, c.vocab_size,
                                      max(1, c.max_len - prompt_len), max(1, c.max_len - 1))

    def src_mask(self, src: Tensor) -> Tensor:
        """``(N, 1, 1, S)`` padding mask (True = real token)."""
        return padding_mask(src, self.config.pad_id)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """The "memory" is the prompt itself, ``(N, S)`` (checked: no padding)."""
        if bool((src == self.config.pad_id).any()):
            raise ValueError("PromptedLanguageModel: the prompts hold padding; decode prompts "
                             "of one length together (translate_with_lm groups them)")
        return src

    def decode(self, tgt: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        """Target prefix ``(N, T)`` (BOS first) after the prompts ``memory``
        ``(N, S)`` → logits ``(N, T, V)``, by running the whole sequence."""
        logits = self.model(torch.cat([memory, tgt], dim=1))  # (N, S + T, V)
        return logits[:, memory.shape[1]:]

    def start_decoding(self, memory: Tensor, memory_mask: Tensor | None = None
                       ) -> LanguageModelState:
        """Run the prompts ``(N, S)`` through the model once: the cache of
        their keys and values."""
        state = self.model.start(memory.shape[0])
        _, state = self.model.step(memory, state)
        return state

    def decode_next(self, tokens: Tensor, state: LanguageModelState
                    ) -> tuple[Tensor, LanguageModelState]:
        """Feed one token per row ``(N,)``; logits ``(N, V)`` for the next."""
        logits, state = self.model.step(tokens[:, None], state)
        return logits[:, 0], state

    def reorder_state(self, state: LanguageModelState, index: Tensor) -> LanguageModelState:
        """Rows ``index`` ``(N',)`` of the cache (beam search)."""
        return state.index_select(index)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits ``(N, T, V)`` of the target positions."""
        return self.decode(tgt_in, self.encode(src))


def translate_with_lm(
    model: LanguageModel,
    sentences: Sequence[str],
    src_vocab: Any,
    tgt_vocab: Any,
    beam_size: int = 1,
    **options: Any,
) -> list[str]:
    """Translate raw sentences with a language model trained on ``source
    [BOS] target [EOS]`` sequences.

    Sentences are grouped by their source length in tokens, and each group
    goes through :func:`~minitransformer.decoding.translate` with a
    :class:`PromptedLanguageModel` (so ``beam_size``, ``extra_len``,
    ``batch_size``, ``length_penalty``, ``device``, ``use_cache``... mean
    what they mean there). A source longer than ``max_len - 1`` tokens is
    cut to that (as :func:`~minitransformer.decoding.translate` cuts a
    seq2seq model's sources): with BOS it fills every position, and one
    target token is generated. Returns one translation per sentence, in order.
    """
    from ..data import as_tokenizer

    if isinstance(sentences, str):
        raise TypeError("translate_with_lm: expected a list of sentences, got a single string")
    src_tok = as_tokenizer(src_vocab, options.get("lowercase", True))
    longest = max(1, model.config.max_len - 1)  # the prompt, then BOS at the last position
    groups: dict[int, list[int]] = defaultdict(list)
    for i, sentence in enumerate(sentences):
        length = len(src_tok.encode(sentence)) if sentence.strip() else 0
        groups[min(length, longest)].append(i)
    out = [""] * len(sentences)
    for length, indices in sorted(groups.items()):
        if length == 0:
            continue
        prompted = PromptedLanguageModel(model, length)
        texts = translate(prompted, [sentences[i] for i in indices], src_vocab, tgt_vocab,
                          beam_size, **options)
        for i, text in zip(indices, texts, strict=True):
            out[i] = text
    return out
