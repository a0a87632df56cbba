"""Synthetic sequence-to-sequence tasks for small, fast experiments.

Each task maps a random sequence of symbols to a target sequence by a fixed
rule. They isolate what attention must do: ``copy`` needs a monotonic
one-to-one alignment, ``reverse`` an anti-diagonal one, ``sort`` a
content-based one (find the smallest remaining symbol anywhere),
``swap_halves`` a long-range jump (the first output copies the middle of the
input), and ``duplicate`` a target twice as long as the source.

Symbol ids start at 4, after the specials ``<pad> <bos> <eos> <unk>`` of
:mod:`minitransformer.data.vocab`, so the examples go straight into
:func:`~minitransformer.data.batching.make_batch`.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .vocab import SPECIALS

__all__ = ["SYNTHETIC_TASKS", "make_synthetic", "synthetic_vocab_size"]

FIRST_SYMBOL = len(SPECIALS)


def _swap_halves(xs: list[int]) -> list[int]:
    half = len(xs) // 2
    return xs[half:] + xs[:half]


_RULES: dict[str, Callable[[list[int]], list[int]]] = {
    "copy": lambda xs: list(xs),
    "reverse": lambda xs: xs[::-1],
    "sort": sorted,
    "swap_halves": _swap_halves,
    "duplicate": lambda xs: [x for x in xs for _ in range(2)],
}

#: Names accepted by :func:`make_synthetic`.
SYNTHETIC_TASKS: tuple[str, ...] = tuple(_RULES)


def synthetic_vocab_size(num_symbols: int = 10) -> int:
    """Vocabulary size of a synthetic task: the 4 specials plus ``num_symbols``."""
    return FIRST_SYMBOL + num_symbols


def make_synthetic(
    task: str,
    num_examples: int,
    min_len: int,
    max_len: int,
    num_symbols: int = 10,
    seed: int = 0,
) -> list[tuple[list[int], list[int]]]:
    """Random (source, target) id pairs for a synthetic task.

    Args:
        task: one of :data:`SYNTHETIC_TASKS`.
        num_examples: how many pairs.
        min_len, max_len: source lengths are uniform in ``[min_len, max_len]``.
        num_symbols: symbols are ids ``4 .. 4 + num_symbols - 1``.
        seed: same seed, same examples.

    Returns:
        A list of ``(src_ids, tgt_ids)`` without BOS/EOS.
    """
    if task not in _RULES:
        raise ValueError(
            f"make_synthetic: unknown task {task!r}; expected one of {SYNTHETIC_TASKS}"
        )
    for name, value, low in (
        ("num_examples", num_examples, 0),
        ("min_len", min_len, 1),
        ("max_len", max_len, 1),
        ("num_symbols", num_symbols, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"make_synthetic: {name} must be an int >= {low}, got {value!r}")
    if max_len < min_len:
        raise ValueError(f"make_synthetic: max_len ({max_len}) < min_len ({min_len})")
    rng = random.Random(seed)
    rule = _RULES[task]
    hi = FIRST_SYMBOL + num_symbols - 1
    examples = []
    for _ in range(num_examples):
        n = rng.randint(min_len, max_len)
        src = [rng.randint(FIRST_SYMBOL, hi) for _ in range(n)]
        examples.append((src, rule(src)))
    return examples
