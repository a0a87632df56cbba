"""Byte-pair encoding, learned and applied in a few lines (Sennrich et al., 2016).

Start with every word spelled in characters. Count every pair of adjacent
symbols over the corpus (a word counts as often as it occurs), merge the
most frequent pair into one new symbol everywhere, and repeat: each merge
adds one symbol to the vocabulary. Frequent words end up as one symbol,
rare words as a few frequent pieces. To segment a word later, apply the
learned merges to it in the order they were learned (:func:`apply_bpe`).

Words are whitespace-separated and begin with ``▁``, as in SentencePiece,
so ``"a man"`` is ``["▁a", "▁man"]`` and a piece that starts a word differs
from the same letters inside one. This is the algorithm; the package's
translator uses SentencePiece's implementation of it
(:mod:`minitransformer.data.subword`), which also keeps pieces within one
Unicode script (letters do not merge with punctuation) and falls back to
bytes for unseen characters.

Ties (pairs equally frequent) go to the pair that sorts first, so the same
corpus always gives the same merges.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["word_counts", "learn_bpe", "apply_bpe", "merge_pair"]

Pair = tuple[str, str]


def word_counts(sentences: Iterable[str]) -> Counter[str]:
    """How often each whitespace-separated word occurs, each marked with a leading ``▁``."""
    return Counter("▁" + w for s in sentences for w in s.split())


def merge_pair(symbols: Sequence[str], pair: Pair) -> list[str]:
    """``symbols`` with every occurrence of ``pair`` (left to right) joined into one."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def learn_bpe(words: Mapping[str, int], num_merges: int) -> tuple[list[Pair], dict[str, list[str]]]:
    """Learn up to ``num_merges`` merges from word frequencies.

    Args:
        words: word → count, e.g. :func:`word_counts` of the training sentences.
        num_merges: merges to learn (fewer if every word becomes one symbol).

    Returns:
        ``(merges, segmentation)``: the merged pairs in the order learned, and
        each word's symbols after the last merge.
    """
    spelling = {w: list(w) for w in words}  # word → its current symbols
    pair_counts: Counter[Pair] = Counter()  # pair → occurrences in the corpus
    holders: defaultdict[Pair, set[str]] = defaultdict(set)  # pair → words that hold it
    for w, symbols in spelling.items():
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += words[w]
            holders[pair].add(w)
    # A heap finds the most frequent pair (ties: the one that sorts first); an
    # entry whose count is out of date is skipped when it comes up.
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[Pair] = []
    while len(merges) < num_merges and heap:
        count, best = heapq.heappop(heap)
        if pair_counts.get(best) != -count:
            continue  # out of date
        merges.append(best)
        changed = set()
        for w in holders.pop(best):  # only the words holding the pair change
            old = spelling[w]
            spelling[w] = new = merge_pair(old, best)
            for pair in zip(old, old[1:]):
                pair_counts[pair] -= words[w]
                changed.add(pair)
            for pair in zip(new, new[1:]):
                pair_counts[pair] += words[w]
                holders[pair].add(w)
                changed.add(pair)
        for pair in changed:
            if pair_counts[pair] > 0:
                heapq.heappush(heap, (-pair_counts[pair], pair))
            else:
                del pair_counts[pair]
    return merges, spelling


def apply_bpe(word: str, merges: Sequence[Pair] | Mapping[Pair, int]) -> list[str]:
    """Segment ``word`` (with its leading ``▁``) by applying ``merges`` in order.

    Only the merges whose pair is present matter, and merging can only form
    pairs that were learned later, so this takes the lowest-ranked pair
    present each time instead of walking through every merge. To segment
    many words, pass the ranks ``{pair: i for i, pair in enumerate(merges)}``
    instead of the list (they are then not rebuilt for every word).
    """
    rank = merges if isinstance(merges, Mapping) else {p: r for r, p in enumerate(merges)}
    symbols = list(word)
    while len(symbols) > 1:
        pairs = [p for p in zip(symbols, symbols[1:]) if p in rank]
        if not pairs:
            break
        symbols = merge_pair(symbols, min(pairs, key=rank.__getitem__))
    return symbols
