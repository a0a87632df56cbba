"""Data for the book: tokenizer, vocabularies, batching, synthetic tasks, Multi30k.

Examples everywhere are ``(source ids, target ids)`` pairs WITHOUT BOS/EOS;
:func:`make_batch` adds them. Modules: :mod:`.tokenize`, :mod:`.vocab`,
:mod:`.batching`, :mod:`.synthetic`, :mod:`.multi30k`, :mod:`.prepare`.
"""

from .batching import Batch, TokenBatcher, make_batch
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
from .prepare import build_vocabs, encode_pairs, tokenize_pairs
from .synthetic import SPLITS, SYNTHETIC_TASKS, make_synthetic, split_of, synthetic_vocab_size
from .tokenize import detokenize, tokenize
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
    "Batch",
    "make_batch",
    "TokenBatcher",
    "SYNTHETIC_TASKS",
    "SPLITS",
    "make_synthetic",
    "split_of",
    "synthetic_vocab_size",
    "MULTI30K_URL",
    "MULTI30K_SHA256",
    "MULTI30K_SPLITS",
    "MULTI30K_LANGS",
    "DatasetNotFoundError",
    "DownloadError",
    "CorpusError",
    "default_cache_dir",
    "download_file",
    "load_multi30k",
    "tokenize_pairs",
    "build_vocabs",
    "encode_pairs",
]
