"""One interface for turning text into ids and back, words or subwords.

A translator needs little from its tokenizer: text → ids, ids → text, the
special ids, the vocabulary size, and a way to travel inside a checkpoint.
:class:`Tokenizer` names exactly that, so :func:`~minitransformer.decoding.translate`,
the command line and checkpoints work with either of the package's two:

- :class:`WordTokenizer`: the rule-based word tokenizer of
  :mod:`.tokenize` plus a :class:`~minitransformer.data.vocab.Vocab`
  (lower-cased words; a word outside the vocabulary becomes ``<unk>``), the
  simple path of the early chapters;
- :class:`~minitransformer.data.subword.SubwordTokenizer`: byte-pair
  encoding (Sennrich et al., 2016) with SentencePiece (Kudo & Richardson,
  2018), cased, lossless, no unknown words.

Both use the package's special ids (``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2,
``<unk>`` 3). ``encode`` adds no BOS/EOS (:func:`~minitransformer.data.make_batch`
does); ``decode`` drops padding and BOS and stops at the first EOS.
``to_dict`` gives plain values (and tensors) that load with
``torch.load(weights_only=True)``; :func:`tokenizer_from_dict` rebuilds
either kind from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from .subword import SubwordTokenizer
from .tokenize import detokenize, tokenize
from .vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab

__all__ = ["Tokenizer", "WordTokenizer", "tokenizer_from_dict", "as_tokenizer"]


@runtime_checkable
class Tokenizer(Protocol):
    """What the translator needs from a tokenizer (a structural type: any
    object with these members is one)."""

    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, without BOS/EOS."""
        ...

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``: padding and BOS dropped, cut at the first EOS."""
        ...

    def __len__(self) -> int:
        """The vocabulary size (ids are ``0 .. len - 1``)."""
        ...

    def to_dict(self) -> dict:
        """Plain values (and tensors) with a ``"kind"`` key, for checkpoints."""
        ...


class WordTokenizer:
    """Words and punctuation (:func:`~minitransformer.data.tokenize`) mapped
    through a :class:`~minitransformer.data.vocab.Vocab`; lower-cased by default.

    Not lossless: case is lost when ``lowercase``, spacing is normalised by
    :func:`~minitransformer.data.detokenize`, and a word outside the
    vocabulary comes back as ``<unk>``.
    """

    kind = "words"
    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self, vocab: Vocab, lowercase: bool = True):
        if not isinstance(vocab, Vocab):
            raise TypeError(f"WordTokenizer: expected a Vocab, got {type(vocab).__name__}")
        self.vocab = vocab
        self.lowercase = bool(lowercase)

    @classmethod
    def build(
        cls,
        sentences: Iterable[str],
        min_freq: int = 2,
        max_size: int | None = None,
        lowercase: bool = True,
    ) -> WordTokenizer:
        """The vocabulary of the words seen at least ``min_freq`` times in ``sentences``."""
        tokens = (tokenize(s, lowercase) for s in sentences)
        return cls(Vocab.build(tokens, min_freq, max_size), lowercase)

    def encode(self, text: str) -> list[int]:
        return self.vocab.encode(tokenize(text, self.lowercase))

    def decode(self, ids: Iterable[int]) -> str:
        return detokenize(self.vocab.decode(ids))

    def tokens(self, text: str) -> list[str]:
        """The tokens ``text`` is split into (before the vocabulary lookup)."""
        return tokenize(text, self.lowercase)

    def __len__(self) -> int:
        return len(self.vocab)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, WordTokenizer)
            and self.vocab == other.vocab
            and self.lowercase == other.lowercase
        )

    def __repr__(self) -> str:
        return f"WordTokenizer(size={len(self)}, lowercase={self.lowercase})"

    def to_dict(self) -> dict:
        """``{"kind": "words", "itos": [...], "lowercase": bool}`` (also a
        valid :meth:`Vocab.from_dict` input)."""
        return {"kind": self.kind, **self.vocab.to_dict(), "lowercase": self.lowercase}

    @classmethod
    def from_dict(cls, d: dict) -> WordTokenizer:
        """Rebuild from :meth:`to_dict`, or from a bare vocabulary dict
        (``{"itos": ...}``, as older checkpoints hold: lower-cased)."""
        return cls(Vocab.from_dict(d), d.get("lowercase", True))


def tokenizer_from_dict(d: dict) -> Tokenizer:
    """Rebuild a tokenizer from its ``to_dict()``: a :class:`WordTokenizer`
    (kind ``"words"``, or no kind and an ``"itos"`` list) or a
    :class:`~minitransformer.data.subword.SubwordTokenizer` (kind ``"sentencepiece"``)."""
    if not isinstance(d, dict):
        raise TypeError(f"tokenizer_from_dict: expected a dict, got {type(d).__name__}")
    kind = d.get("kind", "words" if "itos" in d else None)
    if kind == "words":
        return WordTokenizer.from_dict(d)
    if kind == "sentencepiece":
        return SubwordTokenizer.from_dict(d)
    raise ValueError(
        f"tokenizer_from_dict: unknown tokenizer kind {kind!r}; expected 'words' "
        f"(or a dict with 'itos') or 'sentencepiece'"
    )


def as_tokenizer(obj: Vocab | Tokenizer | dict, lowercase: bool = True) -> Tokenizer:
    """A :class:`Tokenizer` from a tokenizer (returned as is), a
    :class:`~minitransformer.data.vocab.Vocab` (wrapped in a
    :class:`WordTokenizer` with ``lowercase``) or a ``to_dict()`` dict."""
    if isinstance(obj, Vocab):
        return WordTokenizer(obj, lowercase)
    if isinstance(obj, dict):
        return tokenizer_from_dict(obj)
    if isinstance(obj, Tokenizer):
        return obj
    raise TypeError(
        f"as_tokenizer: expected a Vocab, a tokenizer or a dict, got {type(obj).__name__}"
    )

