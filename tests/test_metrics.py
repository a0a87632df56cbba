"""Tests of the corpus scores (minitransformer.metrics)."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import sacrebleu

from minitransformer.metrics import CorpusScores, corpus_scores

REFS = [
    "A man in an orange hat staring at something.",
    "A Boston Terrier is running on lush green grass in front of a white fence.",
    "A girl in karate uniform breaking a stick with a front kick.",
    "Five people wearing winter jackets and helmets stand in the snow.",
]
HYPS = [
    "a man in an orange hat looks at something.",
    "A terrier runs across the green grass in front of a white fence.",
    "A girl in a karate uniform breaks a board with a kick.",
    "Five people in winter jackets and helmets are standing in the snow.",
]


def test_against_sacrebleus_own_functions():
    s = corpus_scores(HYPS, REFS)
    assert s.bleu.score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    lc = sacrebleu.corpus_bleu(HYPS, [REFS], lowercase=True).score
    assert s.bleu_lc.score == pytest.approx(lc)
    assert s.chrf.score == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert s.bleu_lc.score > s.bleu.score  # "a man" only matches lower-cased


def _bleu_by_hand(hyps: list[str], refs: list[str]) -> float:
    """BLEU of Papineni et al. (2002) for text that needs no tokenising
    (lower-case words, single spaces), no smoothing needed."""
    matches, totals = [0] * 4, [0] * 4
    for h, r in zip(hyps, refs):
        hw, rw = h.split(), r.split()
        for n in range(1, 5):
            hc = Counter(tuple(hw[i : i + n]) for i in range(len(hw) - n + 1))
            rc = Counter(tuple(rw[i : i + n]) for i in range(len(rw) - n + 1))
            matches[n - 1] += sum(min(c, rc[g]) for g, c in hc.items())
            totals[n - 1] += max(len(hw) - n + 1, 0)
    hyp_len = sum(len(h.split()) for h in hyps)
    ref_len = sum(len(r.split()) for r in refs)
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * bp * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / 4)


def test_bleu_against_the_formula_worked_by_hand():
    refs = ["the cat sat on the mat today", "there is a dog in the big garden"]
    hyps = ["the cat sat on a mat today", "a dog is in the big garden"]
    expected = _bleu_by_hand(hyps, refs)
    s = corpus_scores(hyps, refs)
    assert s.bleu.score == pytest.approx(expected)
    assert s.bleu_lc.score == pytest.approx(expected)


def test_identical_text_scores_100_and_case_counts_only_when_cased():
    s = corpus_scores(REFS, REFS)
    assert (s.bleu.score, s.bleu_lc.score, s.chrf.score) == pytest.approx((100, 100, 100))
    lower = corpus_scores([r.lower() for r in REFS], REFS)
    assert lower.bleu_lc.score == pytest.approx(100)
    assert lower.bleu.score < 90 and lower.chrf.score < 100


def test_signatures_name_the_settings_and_print():
    s = corpus_scores(HYPS, REFS)
    assert isinstance(s, CorpusScores)
    assert "case:mixed" in s.bleu.signature and "tok:13a" in s.bleu.signature
    assert "case:lc" in s.bleu_lc.signature and "tok:13a" in s.bleu_lc.signature
    assert s.chrf.name == "chrF2" and "nc:6" in s.chrf.signature
    for part in (s.bleu, s.bleu_lc, s.chrf):
        assert f"version:{sacrebleu.__version__}" in part.signature
        assert part.signature in str(s) and f"{part.score:.2f}" in str(s)
    assert s.bleu.detail.startswith("BLEU = ") and s.chrf.detail.startswith("chrF2 = ")
    assert s.bleu_lc.detail.startswith(f"BLEU (lowercased) = {s.bleu_lc.score:.2f}")
    d = s.to_dict()
    assert d["bleu"]["score"] == s.bleu.score and d["chrf"]["signature"] == s.chrf.signature


def test_errors():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_scores(["a", "b"], ["a"])
    with pytest.raises(TypeError, match="single string"):
        corpus_scores("a b", ["a b"])
    with pytest.raises(TypeError, match="hypotheses must be strings"):
        corpus_scores([["a"]], ["a"])
