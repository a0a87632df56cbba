"""Language models from the encoder-decoder's parts: GPT, BERT, and translation as a language model.

- :mod:`~minitransformer.lm.models`: :class:`LanguageModelConfig`, the
  decoder-only :class:`LanguageModel` (causal mask, next token, key/value
  cache) and the encoder-only :class:`MaskedLanguageModel` (no causal mask,
  masked LM), both a stack of the package's
  :class:`~minitransformer.layers.EncoderLayer`;
- :mod:`~minitransformer.lm.sampling`: temperature, top-k and top-p
  sampling, and :func:`generate`;
- :mod:`~minitransformer.lm.translation`: a language model behind the
  searches of :mod:`minitransformer.decoding` (:class:`PromptedLanguageModel`,
  :func:`translate_with_lm`).

Their batches (the next-token shift, BERT's masking) are in
:mod:`minitransformer.data.lm_batching`.
"""

from .models import LanguageModel, LanguageModelConfig, LanguageModelState, MaskedLanguageModel
from .sampling import filter_logits, generate, sample_next
from .translation import PromptedLanguageModel, translate_with_lm

__all__ = [
    "LanguageModelConfig",
    "LanguageModel",
    "MaskedLanguageModel",
    "LanguageModelState",
    "filter_logits",
    "sample_next",
    "generate",
    "PromptedLanguageModel",
    "translate_with_lm",
]
