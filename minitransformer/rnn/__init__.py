"""The RNN encoder-decoders the Transformer replaced (chapter 1), and the
attention scorers they and chapter 2 use: additive (Bahdanau), dot-product
and general (Luong)."""

from .attention_scorers import AdditiveAttention, DotProductAttention, GeneralAttention
from .models import (
    RNN_MODELS,
    AttentionSeq2Seq,
    ContextSeq2Seq,
    RNNConfig,
    RNNEncoder,
    SimpleSeq2Seq,
)
