"""Translation quality as papers report it: sacreBLEU's BLEU and chrF, with signatures.

BLEU (Papineni et al., 2002) is the geometric mean of the 1- to 4-gram
precisions of the hypotheses against the references, times a brevity
penalty; chrF (Popović, 2015) is an F-score over character n-grams (up to
6), kinder to a word with the right stem but the wrong ending. Scores
depend on how the text is tokenised and cased, so papers report sacreBLEU's
(Post, 2018) defaults on *detokenised* text and print its **signature**,
e.g. ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``, which
says how the number was computed.

:func:`corpus_scores` gives the three figures this package reports:

- ``bleu``: sacreBLEU's default, cased, ``13a`` tokenisation (the headline);
- ``bleu_lc``: the same, lower-cased (what the book's word-level models,
  which write lower case, can be compared on);
- ``chrf``: sacreBLEU's default chrF (chrF2: β = 2, character 6-grams).

:func:`minitransformer.decoding.corpus_bleu` is the lower-cased BLEU alone,
kept for the chapters that use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

__all__ = ["MetricScore", "CorpusScores", "corpus_scores"]


@dataclass(frozen=True)
class MetricScore:
    """One corpus-level score: the number, sacreBLEU's signature and its full line."""

    name: str  #: e.g. "BLEU", "BLEU (lowercased)", "chrF2"
    score: float  #: 0..100
    signature: str  #: how it was computed, to print beside the number
    #: sacreBLEU's line under this name, e.g. "BLEU (lowercased) = 36.97 66.0/42.1/... (BP = ...)"
    detail: str

    def __str__(self) -> str:
        return f"{self.name} {self.score:.2f}  ({self.signature})"


@dataclass(frozen=True)
class CorpusScores:
    """Cased BLEU (the headline), lower-cased BLEU and chrF of one corpus."""

    bleu: MetricScore
    bleu_lc: MetricScore
    chrf: MetricScore

    def __str__(self) -> str:
        return "\n".join(str(s) for s in (self.bleu, self.bleu_lc, self.chrf))

    def to_dict(self) -> dict:
        """Plain values (for JSON): ``{"bleu": {"name", "score", "signature", "detail"}, ...}``."""
        return asdict(self)


def _check(hypotheses: Sequence[str], references: Sequence[str], where: str):
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError(f"{where}: expected lists of sentences, got a single string")
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{where}: {len(hypotheses)} hypotheses but {len(references)} references; "
            "they must be aligned one to one"
        )
    if not hypotheses:
        raise ValueError(f"{where}: no sentences to score; expected at least one hypothesis "
                         "and its reference")
    for name, lines in (("hypotheses", hypotheses), ("references", references)):
        bad = next((x for x in lines if not isinstance(x, str)), None)
        if bad is not None:
            raise TypeError(f"{where}: {name} must be strings, got a {type(bad).__name__}")
    return hypotheses, references


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str]) -> CorpusScores:
    """Cased BLEU, lower-cased BLEU and chrF of detokenised hypotheses
    against one reference each, with sacreBLEU's default settings.

    Args:
        hypotheses: system outputs, one detokenised string per sentence.
        references: the references, aligned with ``hypotheses``.

    Returns:
        a :class:`CorpusScores`; ``print`` it for one line per score with
        its signature.
    """
    from sacrebleu.metrics import BLEU, CHRF

    hyps, refs = _check(hypotheses, references, "corpus_scores")
    out = []
    for name, metric in (
        ("BLEU", BLEU()),
        ("BLEU (lowercased)", BLEU(lowercase=True)),
        (None, CHRF()),
    ):
        result = metric.corpus_score(hyps, [refs])
        name = name or result.name
        out.append(MetricScore(
            name=name, score=float(result.score), signature=str(metric.get_signature()),
            detail=str(result).replace(result.name, name, 1),
        ))
    return CorpusScores(*out)
