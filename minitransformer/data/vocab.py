"""Word vocabularies: token ↔ id maps with four reserved specials.

The ids follow the convention of the whole package: ``<pad>`` = 0 (so
:func:`minitransformer.masks.padding_mask` can find padding), ``<bos>`` = 1
(first decoder input), ``<eos>`` = 2 (end of a target), ``<unk>`` = 3 (any
word outside the vocabulary).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["PAD_ID", "BOS_ID", "EOS_ID", "UNK_ID", "SPECIALS", "Vocab"]

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


class Vocab:
    """A token ↔ id map whose first four entries are :data:`SPECIALS`.

    Build one from tokenised sentences with :meth:`Vocab.build`; ``itos`` is
    the id → token list and ``stoi`` the token → id dict.
    """

    def __init__(self, itos: Sequence[str]):
        if isinstance(itos, (str, bytes)) or not isinstance(itos, (list, tuple)):
            raise TypeError(f"Vocab: expected a list of tokens, got a {type(itos).__name__}")
        itos = list(itos)
        bad = next(((i, t) for i, t in enumerate(itos) if not isinstance(t, str) or not t), None)
        if bad is not None:
            raise TypeError(f"Vocab: token {bad[0]} is {str(bad[1])[:50]!r} (a "
                            f"{type(bad[1]).__name__}); expected non-empty strings")
        if itos[: len(SPECIALS)] != SPECIALS:
            raise ValueError(
                f"Vocab: the first tokens must be {SPECIALS}, got {itos[: len(SPECIALS)]}"
            )
        if len(set(itos)) != len(itos):
            raise ValueError("Vocab: tokens must be unique")
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {tok: i for i, tok in enumerate(itos)}

    @classmethod
    def build(
        cls,
        token_lists: Iterable[Sequence[str]],
        min_freq: int = 1,
        max_size: int | None = None,
    ) -> Vocab:
        """Count tokens and keep those seen at least ``min_freq`` times.

        Args:
            token_lists: tokenised sentences (lists of str).
            min_freq: rarer tokens become ``<unk>``.
            max_size: if given, the largest vocabulary size, specials included
                (the most frequent tokens are kept).

        Tokens are ordered by decreasing frequency, ties alphabetically, so the
        same corpus always gives the same ids.
        """
        if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 1:
            raise ValueError(f"Vocab.build: min_freq must be an int >= 1, got {min_freq!r}")
        if max_size is not None and (not isinstance(max_size, int) or max_size < len(SPECIALS)):
            raise ValueError(
                f"Vocab.build: max_size must be None or an int >= {len(SPECIALS)}, "
                f"got {max_size!r}"
            )
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            if isinstance(tokens, str):
                raise TypeError("Vocab.build: expected lists of tokens, got a str (tokenize it)")
            counts.update(tokens)
        for special in SPECIALS:
            counts.pop(special, None)
        kept = (w for w, c in counts.items() if c >= min_freq)
        words = sorted(kept, key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max_size - len(SPECIALS)]
        return cls(SPECIALS + words)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)})"

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Map tokens to ids; unknown tokens get ``UNK_ID``. No BOS/EOS are added."""
        if isinstance(tokens, str):
            raise TypeError("Vocab.encode: expected a list of tokens, got a str (tokenize it)")
        return [self.stoi.get(tok, UNK_ID) for tok in tokens]

    def decode(self, ids: Iterable[int], skip_specials: bool = True) -> list[str]:
        """Map ids to tokens.

        With ``skip_specials`` (default), ``<pad>`` and ``<bos>`` are dropped
        and decoding stops at the first ``<eos>``; ``<unk>`` is kept (it
        stands for a word). Accepts a list or a 1-D tensor.
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        out: list[str] = []
        n = len(self.itos)
        for i in ids:
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(f"Vocab.decode: id {i} is outside the vocabulary (size {n})")
            if skip_specials:
                if i == EOS_ID:
                    break
                if i in (PAD_ID, BOS_ID):
                    continue
            out.append(self.itos[i])
        return out

    def to_dict(self) -> dict:
        """A JSON-friendly dict; :meth:`from_dict` rebuilds the vocabulary."""
        return {"itos": list(self.itos)}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        if not isinstance(d, dict) or "itos" not in d:
            raise ValueError("Vocab.from_dict: expected a dict with key 'itos'")
        return cls(d["itos"])

    def save(self, path: str | os.PathLike) -> None:
        """Write the vocabulary as JSON (atomically: temp file then rename)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocab:
        """Read a vocabulary written by :meth:`save`."""
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except UnicodeDecodeError as err:
            raise ValueError(f"Vocab.load: {path} is not UTF-8 text ({err.reason} at byte "
                             f"{err.start}); expected the JSON Vocab.save writes") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"Vocab.load: {path} is not valid JSON ({err})") from err
        try:
            return cls.from_dict(d)
        except (TypeError, ValueError) as err:
            raise ValueError(f"Vocab.load: {path} is not a vocabulary: {err}") from None
