"""Variants of the Transformer's parts that the book compares it with: a
convolutional encoder (chapter 8), relative position representations and
segment (language) embeddings (chapter 6), and attention by blocks with the
online softmax (FlashAttention's idea, chapter 12)."""

from .conv import ConvEncoder, ConvEncoderLayer
from .flash import flash_attention
from .relative import RelativeMultiHeadAttention, relative_position_index, use_relative_positions
from .segment import SegmentEmbedding
