"""Data for the book: tokenizers, vocabularies, batching, synthetic tasks, Multi30k.

Examples everywhere are ``(source ids, target ids)`` pairs WITHOUT BOS/EOS;
:func:`make_batch` adds them. Modules: :mod:`.tokenize` (words),
:mod:`.vocab`, :mod:`.bpe` (byte-pair encoding, written out),
:mod:`.subword` (SentencePiece), :mod:`.tokenizers` (the interface both
kinds share), :mod:`.batching`, :mod:`.synthetic`, :mod:`.multi30k`,
:mod:`.prepare`.
"""

from .batching import Batch, TokenBatcher, make_batch
from .bpe import apply_bpe, learn_bpe, word_counts
from .lm_batching import IGNORE_ID, LMBatch, LMBatcher, make_lm_batch, mask_tokens
from .multi30k import (
    MULTI30K_LANGS,
    MULTI30K_SHA256,
    MULTI30K_SPLITS,
    MULTI30K_URL,
    CorpusError,
    DatasetNotFoundError,
    DownloadError,
    default_cache_dir,
    download_file,
    load_multi30k,
)
from .multi30k import __all__ as _multi30k_names
from .prepare import (
    TARGET_PIECES,
    TOKENIZER_KINDS,
    build_tokenizers,
    build_vocabs,
    encode_pairs,
    tokenize_pairs,
)
from .subword import SubwordTokenizer
from .synthetic import SPLITS, SYNTHETIC_TASKS, make_synthetic, split_of, synthetic_vocab_size
from .tokenize import detokenize, tokenize
from .tokenizers import Tokenizer, WordTokenizer, as_tokenizer, tokenizer_from_dict
from .vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocab

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "SPECIALS",
    "tokenize",
    "detokenize",
    "Vocab",
    "Tokenizer",
    "WordTokenizer",
    "SubwordTokenizer",
    "tokenizer_from_dict",
    "as_tokenizer",
    "word_counts",
    "learn_bpe",
    "apply_bpe",
    "Batch",
    "make_batch",
    "TokenBatcher",
    "IGNORE_ID",
    "LMBatch",
    "make_lm_batch",
    "mask_tokens",
    "LMBatcher",
    "SYNTHETIC_TASKS",
    "SPLITS",
    "make_synthetic",
    "split_of",
    "synthetic_vocab_size",
    *_multi30k_names,
    "tokenize_pairs",
    "build_vocabs",
    "TOKENIZER_KINDS",
    "TARGET_PIECES",
    "build_tokenizers",
    "encode_pairs",
]
