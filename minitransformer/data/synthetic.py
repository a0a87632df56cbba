"""Synthetic sequence-to-sequence tasks for small, fast experiments.

Each task maps a random sequence of symbols to a target sequence by a fixed
rule. They isolate what attention must do: ``copy`` needs a monotonic
one-to-one alignment, ``reverse`` an anti-diagonal one, ``sort`` a
content-based one (find the smallest remaining symbol anywhere),
``swap_halves`` a long-range jump (the first output copies the middle of the
input), ``duplicate`` a target twice as long as the source, and
``neighbour_difference`` (chapter 4) two relations at once: output ``t`` is
``(x[t] - x[t+1]) mod num_symbols``, so it needs the symbol at ``t`` *and*
the one at ``t + 1`` and must know which is which. ``previous`` (chapter 8)
is local and depends only on order: output ``t`` is the symbol at ``t - 1``
(output 0 repeats symbol 0), so the target has the source's length and
every answer lies one step to the left; the bag of source symbols alone
cannot say which one that is.

**Splits never overlap.** Every source sequence belongs to exactly one of
the splits ``train``, ``valid`` and ``test``, decided by a hash of the
sequence itself (:func:`split_of`: about 80% / 10% / 10% of all sequences),
and :func:`make_synthetic` draws only sources of the split it is asked for.
So a validation or test set never contains a source seen in training,
whatever the seeds, sizes or number of calls, even when the space of
sequences is small (5 symbols of length 6 give only 15,625 sequences).
Within a split, sources are drawn with replacement: a large training set
over a small space repeats examples, as it would repeat epochs.

Symbol ids start at 4, after the specials ``<pad> <bos> <eos> <unk>`` of
:mod:`minitransformer.data.vocab`, so the examples go straight into
:func:`~minitransformer.data.batching.make_batch`.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Callable, Sequence
from functools import lru_cache

from .vocab import SPECIALS

__all__ = ["SPLITS", "SYNTHETIC_TASKS", "make_synthetic", "split_of", "synthetic_vocab_size"]

FIRST_SYMBOL = len(SPECIALS)

#: The splits and the share of all source sequences each one owns.
SPLIT_SHARES: dict[str, float] = {"train": 0.8, "valid": 0.1, "test": 0.1}
#: Names accepted by ``make_synthetic(..., split=...)``.
SPLITS: tuple[str, ...] = tuple(SPLIT_SHARES)

# Lengths with at most this many sequences are enumerated (exact split
# membership); longer ones are drawn by rejection, which then needs about
# 1 / share tries per example.
_ENUMERATE_LIMIT = 4096
_MAX_TRIES = 100_000


def _swap_halves(xs: list[int], num_symbols: int) -> list[int]:
    half = len(xs) // 2
    return xs[half:] + xs[:half]


def _neighbour_difference(xs: list[int], num_symbols: int) -> list[int]:
    return [FIRST_SYMBOL + (a - b) % num_symbols for a, b in zip(xs, xs[1:])]


def _previous(xs: list[int], num_symbols: int) -> list[int]:
    return xs[:1] + xs[:-1]  # output t = x[t - 1]; output 0 = x[0]


# Each rule maps source ids (and the number of symbols) to target ids.
_RULES: dict[str, Callable[[list[int], int], list[int]]] = {
    "copy": lambda xs, k: list(xs),
    "reverse": lambda xs, k: xs[::-1],
    "sort": lambda xs, k: sorted(xs),
    "swap_halves": _swap_halves,
    "duplicate": lambda xs, k: [x for x in xs for _ in range(2)],
    "neighbour_difference": _neighbour_difference,
    "previous": _previous,
}
# The shortest source each task accepts (a shorter one would give an empty target).
_MIN_LEN = {"neighbour_difference": 2}

#: Names accepted by :func:`make_synthetic`.
SYNTHETIC_TASKS: tuple[str, ...] = tuple(_RULES)


def synthetic_vocab_size(num_symbols: int = 10) -> int:
    """Vocabulary size of a synthetic task: the 4 specials plus ``num_symbols``."""
    return FIRST_SYMBOL + num_symbols


def split_of(src: Sequence[int]) -> str:
    """The split (``"train"``, ``"valid"`` or ``"test"``) that owns a source sequence.

    A fixed function of the ids alone (a BLAKE2 hash, the same on every
    machine and Python run), independent of the task, seed and sizes.
    """
    digest = hashlib.blake2b(",".join(map(str, src)).encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "big") / 2**64  # uniform in [0, 1)
    for split, share in SPLIT_SHARES.items():
        if u < share:
            return split
        u -= share
    return SPLITS[-1]  # rounding


@lru_cache(maxsize=256)
def _members(length: int, num_symbols: int, split: str) -> tuple[tuple[int, ...], ...]:
    """Every source of ``length`` over ``num_symbols`` symbols owned by ``split``."""
    symbols = range(FIRST_SYMBOL, FIRST_SYMBOL + num_symbols)
    return tuple(s for s in itertools.product(symbols, repeat=length) if split_of(s) == split)


def _draw(rng: random.Random, length: int, num_symbols: int, split: str) -> list[int]:
    """One source of ``length`` drawn uniformly among those owned by ``split``."""
    if num_symbols**length <= _ENUMERATE_LIMIT:
        return list(rng.choice(_members(length, num_symbols, split)))
    hi = FIRST_SYMBOL + num_symbols - 1
    for _ in range(_MAX_TRIES):
        src = [rng.randint(FIRST_SYMBOL, hi) for _ in range(length)]
        if split_of(src) == split:
            return src
    raise RuntimeError(
        f"make_synthetic: no {split!r} source of length {length} in {_MAX_TRIES} tries"
    )


def make_synthetic(
    task: str,
    num_examples: int,
    min_len: int,
    max_len: int,
    num_symbols: int = 10,
    seed: int = 0,
    *,
    split: str | None = None,
) -> list[tuple[list[int], list[int]]]:
    """Random (source, target) id pairs for a synthetic task, from one split.

    Args:
        task: one of :data:`SYNTHETIC_TASKS`.
        num_examples: how many pairs.
        min_len, max_len: source lengths are uniform in ``[min_len, max_len]``
            (over the lengths that have sources in ``split``; only tiny
            spaces have lengths without any).
        num_symbols: symbols are ids ``4 .. 4 + num_symbols - 1``.
        seed: same seed, same examples.
        split: ``"train"``, ``"valid"`` or ``"test"`` (required): only
            sources that :func:`split_of` assigns to it are drawn, so two
            splits never share a source.

    Returns:
        A list of ``(src_ids, tgt_ids)`` without BOS/EOS.

    Example:
        >>> train = make_synthetic("reverse", 1000, 6, 6, num_symbols=5, split="train")
        >>> valid = make_synthetic("reverse", 100, 6, 6, num_symbols=5, seed=1, split="valid")
        >>> {tuple(s) for s, _ in train} & {tuple(s) for s, _ in valid}
        set()
    """
    if task not in _RULES:
        raise ValueError(
            f"make_synthetic: unknown task {task!r}; expected one of {SYNTHETIC_TASKS}"
        )
    if split not in SPLIT_SHARES:
        raise ValueError(
            f"make_synthetic: split must be one of {SPLITS} (they never share a source), "
            f"got {split!r}"
        )
    for name, value, low in (
        ("num_examples", num_examples, 0),
        ("min_len", min_len, _MIN_LEN.get(task, 1)),
        ("max_len", max_len, 1),
        ("num_symbols", num_symbols, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(
                f"make_synthetic: {name} must be an int >= {low} for {task!r}, got {value!r}"
            )
    if max_len < min_len:
        raise ValueError(f"make_synthetic: max_len ({max_len}) < min_len ({min_len})")
    lengths = [
        n for n in range(min_len, max_len + 1)
        if num_symbols**n > _ENUMERATE_LIMIT or _members(n, num_symbols, split)
    ]
    if not lengths and num_examples:
        total = sum(num_symbols**n for n in range(min_len, max_len + 1))
        raise ValueError(
            f"make_synthetic: none of the {total} sources of length {min_len}..{max_len} over "
            f"{num_symbols} symbols belongs to split {split!r}; use longer sources or more symbols"
        )
    rng = random.Random(seed)
    rule = _RULES[task]
    examples = []
    for _ in range(num_examples):
        src = _draw(rng, rng.choice(lengths), num_symbols, split)
        examples.append((src, rule(src, num_symbols)))
    return examples
