"""minitransformer: the Transformer's parts, small, tested and readable.

The companion package of the minitransformer book. Tensors are batch-first;
bool attention masks mean True = may attend (see :mod:`minitransformer.masks`).
"""

from .attention import MultiHeadAttention, scaled_dot_product_attention
from .conv import ConvEncoder, ConvEncoderLayer
from .data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIALS,
    SYNTHETIC_TASKS,
    UNK_ID,
    Batch,
    TokenBatcher,
    Vocab,
    detokenize,
    load_multi30k,
    make_batch,
    make_synthetic,
    synthetic_vocab_size,
    tokenize,
)
from .decoding import beam_search, corpus_bleu, greedy_decode, translate
from .feedforward import PositionwiseFeedForward
from .history import History
from .interop import load_torch_attention, load_torch_decoder_layer, load_torch_encoder_layer
from .layernorm import LayerNorm, layer_norm
from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer
from .masks import (
    causal_mask,
    padding_mask,
    to_additive_mask,
    to_torch_bool_mask,
    torch_key_padding_mask,
)
from .model import Transformer, TransformerConfig
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table
from .probe import record_attention
from .relative import RelativeMultiHeadAttention, use_relative_positions
from .rnn import AttentionSeq2Seq, ContextSeq2Seq, RNNConfig, SimpleSeq2Seq
from .scoring import AdditiveAttention, DotProductAttention, GeneralAttention, masked_softmax
from .segment import SegmentEmbedding
from .training import TrainConfig, evaluate_loss, fit, label_smoothed_cross_entropy, pick_device

__version__ = "0.1.0"

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "SPECIALS",
    "tokenize",
    "detokenize",
    "Vocab",
    "Batch",
    "make_batch",
    "TokenBatcher",
    "SYNTHETIC_TASKS",
    "make_synthetic",
    "synthetic_vocab_size",
    "load_multi30k",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "PositionwiseFeedForward",
    "LayerNorm",
    "layer_norm",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "sinusoidal_table",
    "causal_mask",
    "padding_mask",
    "to_torch_bool_mask",
    "torch_key_padding_mask",
    "to_additive_mask",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "ConvEncoderLayer",
    "ConvEncoder",
    "TransformerConfig",
    "Transformer",
    "TrainConfig",
    "fit",
    "evaluate_loss",
    "label_smoothed_cross_entropy",
    "pick_device",
    "History",
    "RNNConfig",
    "SimpleSeq2Seq",
    "ContextSeq2Seq",
    "AttentionSeq2Seq",
    "AdditiveAttention",
    "DotProductAttention",
    "GeneralAttention",
    "masked_softmax",
    "record_attention",
    "RelativeMultiHeadAttention",
    "use_relative_positions",
    "SegmentEmbedding",
    "load_torch_attention",
    "load_torch_encoder_layer",
    "load_torch_decoder_layer",
    "greedy_decode",
    "beam_search",
    "translate",
    "corpus_bleu",
]
