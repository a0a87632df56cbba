"""From raw sentence pairs to id pairs: tokenise, build vocabularies, encode.

The glue between :func:`~minitransformer.data.multi30k.load_multi30k` (text)
and :class:`~minitransformer.data.batching.TokenBatcher` (ids), for either
kind of tokenizer (:mod:`~minitransformer.data.tokenizers`): words with a
vocabulary per language, or one subword model shared by both.
"""

from __future__ import annotations

from collections.abc import Sequence

from .subword import SubwordTokenizer
from .tokenize import tokenize
from .tokenizers import Tokenizer, WordTokenizer, as_tokenizer
from .vocab import Vocab

__all__ = [
    "tokenize_pairs", "build_vocabs", "TOKENIZER_KINDS", "TARGET_PIECES", "build_tokenizers",
    "encode_pairs",
]

#: The kinds of tokenizer :func:`build_tokenizers` makes.
TOKENIZER_KINDS = ("words", "subword")
#: The target side of a joint subword model: every piece, or the pieces its
#: training targets use (:meth:`~minitransformer.data.SubwordTokenizer.restricted_to`).
TARGET_PIECES = ("all", "seen")


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


def build_tokenizers(
    pairs: Sequence[tuple[str, str]],
    kind: str = "words",
    *,
    min_freq: int = 2,
    vocab_size: int = 8000,
    lowercase: bool = True,
    target_pieces: str = "all",
) -> tuple[Tokenizer, Tokenizer]:
    """Source and target tokenizers learned from raw training pairs.

    Args:
        pairs: (source, target) training sentences (never validation or test).
        kind: ``"words"``: a :class:`~minitransformer.data.tokenizers.WordTokenizer`
            per language (words seen ≥ ``min_freq`` times, ``lowercase``);
            ``"subword"``: one cased :class:`~minitransformer.data.subword.SubwordTokenizer`
            of ``vocab_size`` pieces learned from both sides, for both.
        target_pieces: with ``"subword"``, ``"all"``: the target side uses
            every piece, and the same tokenizer is returned twice (source
            and target can share embeddings); ``"seen"``: the target side uses
            only the pieces of the training targets (the same model, its own
            smaller ids: a smaller output layer). Word vocabularies are per
            language already, so ``"seen"`` changes nothing for ``"words"``.
    """
    if target_pieces not in TARGET_PIECES:
        raise ValueError(f"build_tokenizers: target_pieces must be one of {TARGET_PIECES}, "
                         f"got {target_pieces!r}")
    if kind == "words":
        return (
            WordTokenizer.build((s for s, _ in pairs), min_freq, lowercase=lowercase),
            WordTokenizer.build((t for _, t in pairs), min_freq, lowercase=lowercase),
        )
    if kind == "subword":
        joint = SubwordTokenizer.train([s for s, _ in pairs] + [t for _, t in pairs], vocab_size)
        if target_pieces == "seen":
            return joint, joint.restricted_to(t for _, t in pairs)
        return joint, joint
    raise ValueError(f"build_tokenizers: kind must be one of {TOKENIZER_KINDS}, got {kind!r}")


def encode_pairs(
    pairs: Sequence[tuple[str, str]],
    src_vocab: Vocab | Tokenizer,
    tgt_vocab: Vocab | Tokenizer,
    lowercase: bool = True,
    max_len: int | None = None,
) -> list[tuple[list[int], list[int]]]:
    """Tokenise and encode raw pairs into (source ids, target ids), no BOS/EOS.

    ``src_vocab`` and ``tgt_vocab`` are tokenizers, or word vocabularies
    (then the sentences are split by :func:`~minitransformer.data.tokenize`,
    lower-cased if ``lowercase``). Pairs with an empty side are dropped; with
    ``max_len``, so are pairs with a side longer than ``max_len`` tokens.
    """
    src_tok, tgt_tok = as_tokenizer(src_vocab, lowercase), as_tokenizer(tgt_vocab, lowercase)
    out = []
    for s, t in pairs:
        s_ids, t_ids = src_tok.encode(s), tgt_tok.encode(t)
        if not s_ids or not t_ids:
            continue
        if max_len is not None and (len(s_ids) > max_len or len(t_ids) > max_len):
            continue
        out.append((s_ids, t_ids))
    return out
