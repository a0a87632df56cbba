"""Checker for top-p (nucleus) filtering, the distribution top-p sampling draws from.

Holtzman et al. (2020), "The Curious Case of Neural Text Degeneration",
section 3.1: sort the next-token probabilities from the largest down and
keep the smallest set of tokens whose probabilities sum to at least ``p``
(the nucleus); set the others to zero and renormalise, so the kept ones sum
to 1. A token is kept when the tokens more probable than it sum to less than
``p``: the token that carries the sum across ``p`` is kept, and the most
probable token always is. Reference:
:func:`minitransformer.lm.sampling.filter_logits` followed by a softmax,
the distribution :func:`~minitransformer.lm.sampling.sample_next` draws from.

The cases keep every cumulative sum well away from ``p`` (tests check it),
so that rounding cannot decide whether a token is in.

Shape letters: ``B`` rows, ``V`` vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..lm.sampling import filter_logits
from ._harness import Case, Mistake, check, generator
from ._messages import t

__all__ = ["check_top_p_filter"]


def _reference(logits: Tensor, top_p: float) -> Tensor:
    return filter_logits(logits, top_p=top_p).softmax(dim=-1)  # (B, V), zero outside


def _nucleus(logits: Tensor, top_p: float, *, descending=True, rule="before", keep_top=True,
             renormalise=True, mass="probs", sort=True, axis=-1, as_logits=False) -> Tensor:
    """Top-p filtering with one knob turned: the family of wrong answers.

    ``rule``: "before" keeps a token when the mass before it is below p (the
    right one, the crossing token kept); "upto" keeps it when the mass up to
    and including it is at most p (the crossing token dropped). ``mass``:
    "probs" sums probabilities, "logits" the raw scores. ``sort=False`` sums
    in vocabulary order.
    """
    probs = logits.softmax(dim=axis)  # (B, V)
    scores = probs if mass == "probs" else logits
    if sort:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=descending)
    else:
        sorted_scores, order = scores, torch.arange(scores.shape[-1]).expand_as(scores)
    upto = sorted_scores.cumsum(dim=-1)  # (B, V) mass up to each sorted token
    keep_sorted = (upto - sorted_scores < top_p) if rule == "before" else (upto <= top_p)
    if keep_top:
        keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    if as_logits:
        return logits.masked_fill(~keep, float("-inf"))
    kept = probs.masked_fill(~keep, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True) if renormalise else kept


def _knob(**kw):
    def fn(logits, top_p):
        return _nucleus(logits, top_p, **kw)
    return fn


def _top_k_share(logits: Tensor, top_p: float) -> Tensor:
    """The ``round(p · V)`` most probable tokens: top-k with k from p."""
    k = max(1, round(top_p * logits.shape[-1]))
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf")).softmax(dim=-1)


def _mistakes() -> list[Mistake]:
    return [
        Mistake("top_p.hint.logits", _knob(as_logits=True)),
        Mistake("top_p.hint.no_renormalise", _knob(renormalise=False)),
        Mistake("top_p.hint.drop_crossing", _knob(rule="upto")),
        Mistake("top_p.hint.no_top", _knob(rule="upto", keep_top=False)),
        Mistake("top_p.hint.ascending", _knob(descending=False)),
        Mistake("top_p.hint.ascending", _knob(descending=False, keep_top=False)),
        Mistake("top_p.hint.unsorted", _knob(sort=False)),
        Mistake("top_p.hint.unsorted", _knob(sort=False, keep_top=False)),
        Mistake("top_p.hint.logit_mass", _knob(mass="logits")),
        Mistake("top_p.hint.top_k", _top_k_share),
        Mistake("top_p.hint.axis", _knob(axis=0)),
    ]


def _cases() -> list[Case]:
    g = generator(23)

    def logits(b, v, scale=1.5, dtype=torch.float32):
        return (torch.randn(b, v, generator=g, dtype=torch.float64) * scale).to(dtype)

    peaked = logits(3, 8)
    peaked[:, 0] += torch.tensor([4.0, 0.0, 5.0], dtype=peaked.dtype)  # p(top) > 0.9 in rows 0, 2
    return [
        Case("top_p.case.plain", (logits(4, 10), 0.9), fields={"p": 0.9}),
        Case("top_p.case.half", (logits(3, 12, 2.0), 0.5), fields={"p": 0.5}),
        Case("top_p.case.peaked", (peaked, 0.8), fields={"p": 0.8}),
        Case("top_p.case.small_p", (logits(2, 9), 0.05), fields={"p": 0.05}),
        Case("top_p.case.all", (logits(2, 7), 1.0)),
        Case("top_p.case.two", (torch.tensor([[0.3, -0.4], [-1.0, 1.2]]), 0.6), fields={"p": 0.6}),
        Case("top_p.case.float64", (logits(3, 16, 1.0, torch.float64), 0.75), fields={"p": 0.75}),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "sort" in line and ("descending" in text or "unexpected keyword" in text):
        return t("top_p.err.sort")
    if "scatter" in line or "gather" in line:
        return t("top_p.err.scatter")
    return None


def check_top_p_filter(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(logits, top_p) -> probs``.

    Args:
        fn: the reader's nucleus filter: ``logits`` ``(B, V)`` next-token
            scores, ``top_p`` a number in ``(0, 1]``. Returns ``(B, V)``
            probabilities, in the logits' dtype: in each row the smallest set
            of most probable tokens whose probabilities (``softmax(logits)``)
            sum to at least ``top_p`` keep their probabilities, renormalised
            to sum to 1, and every other token gets 0.
        lang: language of the verdict; None for the current one.

    Tests: p = 0.9, 0.5, 0.05, 1.0 (every token kept), rows whose most
    probable token alone holds more than p, a vocabulary of 2, float64.

    Returns:
        True if it matches :func:`minitransformer.lm.sampling.filter_logits`
        followed by a softmax.
    """
    return check(
        "top_p_filter", fn, _cases(), _reference, _mistakes(), signature="fn(logits, top_p)",
        names=("name.probabilities",), atol=1e-5, rtol=1e-4, on_error=_error,
        fallback="top_p.fallback", lang=lang,
    )
