"""Tests of the byte-pair encoding learner (minitransformer.data.bpe)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from minitransformer.data import apply_bpe, learn_bpe, load_multi30k, word_counts
from minitransformer.data.bpe import merge_pair

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"

# Sennrich et al. (2016)'s toy corpus.
TOY = {"▁low": 5, "▁lower": 2, "▁newest": 6, "▁widest": 3}


def test_merges_of_the_toy_corpus_worked_out_by_hand():
    """Pair counts by hand: (e,s) and (s,t) 9 each, tie → (e,s); then (es,t) 9;
    (l,o), (o,w), (▁,l) 7 each; ASCII letters sort before ▁ (U+2581), so
    (l,o), then (lo,w) over (▁,lo), then (▁,low); four pairs of newest at 6:
    (e,w) < (n,e) < (w,est) < (▁,n) → (e,w), (ew,est), (n,ewest), (▁,newest);
    then four pairs of widest at 3, (d,est) first."""
    merges, segmentation = learn_bpe(TOY, 10)
    assert merges == [
        ("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w"), ("▁", "low"),
        ("e", "w"), ("ew", "est"), ("n", "ewest"), ("▁", "newest"), ("d", "est"),
    ]
    assert segmentation == {
        "▁low": ["▁low"], "▁lower": ["▁low", "e", "r"],
        "▁newest": ["▁newest"], "▁widest": ["▁", "w", "i", "dest"],
    }


def test_learning_stops_when_every_word_is_one_symbol():
    merges, segmentation = learn_bpe({"▁ab": 3, "▁b": 1}, 100)
    assert merges == [("a", "b"), ("▁", "ab"), ("▁", "b")]
    assert all(len(s) == 1 for s in segmentation.values())


def test_merge_pair_joins_left_to_right_without_overlap():
    assert merge_pair(list("aaa"), ("a", "a")) == ["aa", "a"]
    assert merge_pair(list("abab"), ("a", "b")) == ["ab", "ab"]
    assert merge_pair(["x"], ("x", "x")) == ["x"]


def _random_corpus(seed: int) -> Counter[str]:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcab") for _ in range(rng.randrange(1, 7))) for _ in range(80)]
    return Counter("▁" + rng.choice(words) for _ in range(400))


@pytest.mark.parametrize("seed", range(5))
def test_applying_the_merges_reproduces_the_learned_segmentation(seed):
    """Property: segmenting each training word with the learned merges gives
    the learner's own segmentation, whatever the number of merges; pieces
    always spell the word."""
    words = _random_corpus(seed)
    for n in (0, 1, 5, 20, 200):
        merges, segmentation = learn_bpe(words, n)
        assert len(merges) <= n and len(set(merges)) == len(merges)
        for w in words:
            assert apply_bpe(w, merges) == segmentation[w]
            assert "".join(segmentation[w]) == w


@pytest.mark.parametrize("seed", range(3))
def test_learner_against_a_plain_recount_every_merge(seed):
    """An independent, slow reference: recount every pair of the whole corpus
    before each merge and take the most frequent (ties: the first in order)."""
    words = _random_corpus(seed)
    spelling = {w: list(w) for w in words}
    expected = []
    for _ in range(30):
        counts: Counter = Counter()
        for w, symbols in spelling.items():
            for pair in zip(symbols, symbols[1:]):
                counts[pair] += words[w]
        if not counts:
            break
        top = max(counts.values())
        best = min(p for p, c in counts.items() if c == top)
        expected.append(best)
        spelling = {w: merge_pair(s, best) for w, s in spelling.items()}
    assert learn_bpe(words, 30) == (expected, spelling)


def test_on_the_fixture_corpus_frequent_words_become_whole():
    pairs = load_multi30k("train", root=FIXTURES, download=False)
    counts = word_counts(t for _, t in pairs)
    assert counts["▁A"] > 0 and counts["▁the"] > 0 and "A" not in counts  # cased, ▁-marked
    merges, _ = learn_bpe(counts, 200)
    rank = {p: r for r, p in enumerate(merges)}
    assert apply_bpe("▁the", rank) == ["▁the"]
    assert "".join(apply_bpe("▁thereby", rank)) == "▁thereby"


@pytest.mark.slow
def test_first_merges_on_multi30k_are_sentencepieces():
    """An independent implementation: SentencePiece's BPE trainer, on the
    English side of the real corpus (skipped where it is not on disk), learns
    the same first 50 merges in the same order. (They part at merge 71,
    where this learner joins a letter with a full stop and SentencePiece,
    which keeps pieces within one Unicode script, does not.)"""
    from minitransformer.data import DatasetNotFoundError, SubwordTokenizer

    try:
        pairs = load_multi30k("train", download=False)
    except DatasetNotFoundError:
        pytest.skip("Multi30k is not on this machine")
    sentences = [t for _, t in pairs]
    spm = SubwordTokenizer.train(sentences, vocab_size=1000)
    first = 4 + 256  # after the specials and the byte pieces, in the order merged
    theirs = [spm.id_to_piece(i) for i in range(first, first + 50)]
    merges, _ = learn_bpe(word_counts(sentences), 50)
    assert ["".join(m) for m in merges] == theirs
