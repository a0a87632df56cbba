"""From raw sentence pairs to id pairs: tokenise, build vocabularies, encode.

The glue between :func:`~minitransformer.data.multi30k.load_multi30k` (text)
and :class:`~minitransformer.data.batching.TokenBatcher` (ids).
"""

from __future__ import annotations

from collections.abc import Sequence

from .tokenize import tokenize
from .vocab import Vocab

__all__ = ["tokenize_pairs", "build_vocabs", "encode_pairs"]


def tokenize_pairs(
    pairs: Sequence[tuple[str, str]], lowercase: bool = True
) -> list[tuple[list[str], list[str]]]:
    """Tokenise both sides of each (source, target) sentence pair."""
    return [(tokenize(s, lowercase), tokenize(t, lowercase)) for s, t in pairs]


def build_vocabs(
    pairs: Sequence[tuple[str, str]],
    min_freq: int = 2,
    max_size: int | None = None,
    lowercase: bool = True,
) -> tuple[Vocab, Vocab]:
    """Source and target vocabularies from raw training pairs (words seen ≥ ``min_freq`` times)."""
    tok = tokenize_pairs(pairs, lowercase)
    return (
        Vocab.build((s for s, _ in tok), min_freq, max_size),
        Vocab.build((t for _, t in tok), min_freq, max_size),
    )


def encode_pairs(
    pairs: Sequence[tuple[str, str]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    lowercase: bool = True,
    max_len: int | None = None,
) -> list[tuple[list[int], list[int]]]:
    """Tokenise and encode raw pairs into (source ids, target ids), no BOS/EOS.

    Pairs with an empty side are dropped; with ``max_len``, so are pairs with
    a side longer than ``max_len`` tokens.
    """
    out = []
    for s, t in tokenize_pairs(pairs, lowercase):
        if not s or not t:
            continue
        if max_len is not None and (len(s) > max_len or len(t) > max_len):
            continue
        out.append((src_vocab.encode(s), tgt_vocab.encode(t)))
    return out
