"""minitransformer: the Transformer's parts, small, tested and readable.

The companion package of the minitransformer book. Tensors are batch-first;
bool attention masks mean True = may attend (see :mod:`minitransformer.masks`).

The top level holds the Transformer itself, in the order of the paper's
figure: :mod:`~minitransformer.attention`, :mod:`~minitransformer.masks`,
:mod:`~minitransformer.positional`, :mod:`~minitransformer.layernorm`,
:mod:`~minitransformer.feedforward`, :mod:`~minitransformer.layers`,
:mod:`~minitransformer.model` and :mod:`~minitransformer.decoding`.
Around it, each in its own subpackage:

- :mod:`minitransformer.data`: tokenising (words, or subwords with
  SentencePiece), vocabularies, batches, corpora;
- :mod:`minitransformer.metrics`: BLEU and chrF as papers report them;
- :mod:`minitransformer.lm`: GPT- and BERT-style models from the same
  layers, sampling, and translation as language modelling;
- :mod:`minitransformer.training`: the loop, loss, schedules, checkpoints,
  weight averaging, multi-process training, presets;
- :mod:`minitransformer.rnn`: the RNN encoder-decoders it replaced and their
  attention scorers; :mod:`minitransformer.variants`: convolutional encoder,
  relative positions, segment embeddings, blocked attention with the online softmax;
- :mod:`minitransformer.instruments`: what the chapters look inside a model
  with (plots, probes, summaries, ablations, interop with ``torch.nn``);
- :mod:`minitransformer.exercises`: the checked exercises.

Every public name below is importable as ``minitransformer.<name>``; the
list is ``__all__``.
"""

from types import ModuleType as _ModuleType

from .attention import KVCache, MultiHeadAttention, masked_softmax, scaled_dot_product_attention
from .data import (
    BOS_ID,
    EOS_ID,
    IGNORE_ID,
    PAD_ID,
    SPECIALS,
    SYNTHETIC_TASKS,
    UNK_ID,
    Batch,
    LMBatch,
    LMBatcher,
    SubwordTokenizer,
    TokenBatcher,
    Vocab,
    WordTokenizer,
    detokenize,
    load_multi30k,
    make_batch,
    make_lm_batch,
    make_synthetic,
    mask_tokens,
    synthetic_vocab_size,
    tokenize,
)
from .decoding import beam_search, corpus_bleu, greedy_decode, translate
from .feedforward import PositionwiseFeedForward, SwiGLUFeedForward, swiglu_hidden
from .instruments.interop import (
    load_torch_attention,
    load_torch_decoder,
    load_torch_decoder_layer,
    load_torch_encoder,
    load_torch_encoder_layer,
    load_torch_transformer,
)
from .instruments.probe import record_attention
from .instruments.summary import count_parameters, matched_d_ff
from .layernorm import LayerNorm, RMSNorm, layer_norm, rms_norm
from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer
from .lm import (
    LanguageModel,
    LanguageModelConfig,
    LanguageModelState,
    MaskedLanguageModel,
    PromptedLanguageModel,
    filter_logits,
    generate,
    sample_next,
    translate_with_lm,
)
from .masks import (
    causal_mask,
    padding_mask,
    to_additive_mask,
    to_torch_bool_mask,
    torch_key_padding_mask,
)
from .metrics import corpus_scores
from .model import Transformer, TransformerConfig
from .positional import (
    LearnedPositionalEmbedding,
    NoPositionalEncoding,
    PositionalEncoding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    rotary_angles,
    sinusoidal_table,
)
from .rnn import (
    AdditiveAttention,
    AttentionSeq2Seq,
    ContextSeq2Seq,
    DotProductAttention,
    GeneralAttention,
    RNNConfig,
    SimpleSeq2Seq,
)
from .training import (
    History,
    TrainConfig,
    evaluate_accuracy,
    evaluate_loss,
    fit,
    label_smoothed_cross_entropy,
    pick_device,
)
from .variants import (
    ConvEncoder,
    ConvEncoderLayer,
    RelativeMultiHeadAttention,
    SegmentEmbedding,
    flash_attention,
    use_relative_positions,
)

__version__ = "0.1.0"

#: Every name imported above (each written once, here: no second list to keep in step).
__all__ = sorted(
    name
    for name, value in globals().items()
    if not name.startswith("_") and not isinstance(value, _ModuleType)
)
