"""Checker for merging two blocks of keys with the online softmax (FlashAttention's step).

Milakov and Gimelshein (2018); Dao et al., "FlashAttention" (2022). For one
query row and one block of keys with scores ``s_j`` and values ``v_j``, three
numbers summarise the block, as in
:func:`minitransformer.variants.flash.flash_attention` (its ``m``, ``s`` and
``acc``):

- ``m = max_j s_j``, the block's largest score (``−inf`` if every key of the
  block is masked);
- ``l = Σ_j exp(s_j − m)``;
- ``o = Σ_j exp(s_j − m) · v_j``, *unnormalised* (not divided by ``l``).

Two blocks merge into the summary of their union: ``m = max(m1, m2)``, and
each block's sums are brought to the new maximum by ``exp(m_i − m)`` before
they are added, ``l = e1·l1 + e2·l2``, ``o = e1·o1 + e2·o2``; then ``o / l``
is the softmax attention over both blocks. A row whose two blocks are both
masked keeps ``m = −inf``, ``l = 0``, ``o = 0`` (no NaN: flash_attention's
convention). Reference: the summary of the union computed directly from
the full row of scores (``tests/test_exercises_modern.py`` checks that its
``o / l`` is ``torch.softmax(scores) @ v``).

Shape letters: ``...`` leading axes (batch, heads, queries), ``Dv`` value width.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ._harness import Case, Mistake, check, generator, normal
from ._messages import t

__all__ = ["check_online_softmax_merge", "summarise"]

_NEG_INF = float("-inf")


def summarise(scores: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The online softmax's summary of a block: ``scores`` ``(..., n)`` (``−inf``
    = masked), ``values`` ``(..., n, Dv)`` → ``(m, l, o)``, ``(..., 1)``,
    ``(..., 1)`` and ``(..., Dv)`` (a fully masked row: ``−inf, 0, 0``)."""
    m = scores.amax(dim=-1, keepdim=True)  # (..., 1)
    shift = m.masked_fill(torch.isneginf(m), 0.0)  # a fully masked row: exp(-inf - 0) = 0
    p = torch.exp(scores - shift)  # (..., n)
    return m, p.sum(dim=-1, keepdim=True), (p.unsqueeze(-2) @ values).squeeze(-2)


#: A case, and the full rows of scores and the values its two blocks were cut from.
_Made = tuple[Case, tuple[Tensor, Tensor]]


def _reference_for(made: list[_Made]) -> Callable[..., tuple[Tensor, Tensor, Tensor]]:
    """The reference: the summary of the full row of scores that the six
    summaries given were cut from (the reader sees only the summaries)."""
    def reference(*args: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        for case, full in made:
            if all(torch.equal(a, b) for a, b in zip(args, case.args)):
                return summarise(*full)
        raise LookupError("online_softmax_merge: arguments of no known case")
    return reference


def _merge(m1, l1, o1, m2, l2, o2, *, max_of="max", factor="exp", rescale="both",
           guard=True, normalise_out=False, weight_by_l=False, average=False, crossed=False,
           order="mlo"):
    """The merge with one knob turned: the family of wrong answers.

    ``max_of``: "max" (right), "sum" (m1 + m2), "min". ``factor``: "exp"
    (exp(m_i − m), right), "flipped" (exp(m − m_i)), "no_exp" (m_i − m).
    ``rescale``: "both", "none", "first", "second", "o_only", "l_only".
    ``guard``: replace a −inf merged max by 0 before subtracting (else NaN
    where both blocks are masked). ``normalise_out``: return o / l.
    ``weight_by_l``: treat o_i as normalised (multiply by l_i). ``average``:
    halve the sums. ``crossed``: block 1's factor on block 2's sums.
    """
    m = {"max": torch.maximum(m1, m2), "sum": m1 + m2, "min": torch.minimum(m1, m2)}[max_of]
    ref = m.masked_fill(torch.isneginf(m), 0.0) if guard else m

    def f(mi):
        if factor == "exp":
            return torch.exp(mi - ref)
        if factor == "flipped":
            return torch.exp(ref - mi)
        return mi - ref

    e1, e2 = f(m1), f(m2)
    if crossed:
        e1, e2 = e2, e1
    one = torch.ones_like(e1)
    le1, le2, oe1, oe2 = {
        "both": (e1, e2, e1, e2), "none": (one, one, one, one),
        "first": (e1, one, e1, one), "second": (one, e2, one, e2),
        "o_only": (one, one, e1, e2), "l_only": (e1, e2, one, one)}[rescale]
    if weight_by_l:
        o = oe1 * l1 * o1 + oe2 * l2 * o2
    else:
        o = oe1 * o1 + oe2 * o2
    l = le1 * l1 + le2 * l2  # noqa: E741 (the paper's letter)
    if average:
        o, l = o / 2, l / 2  # noqa: E741
    if normalise_out:
        o = o / l.masked_fill(l == 0, 1.0)
    return (m, l, o) if order == "mlo" else (m, o, l)


def _cases() -> list[_Made]:
    r = normal(generator(15))

    def case(label, shape, n1, n2, dv, *, shift1=0.0, shift2=0.0, scale=1.0, masked1=(),
             masked2=(), dtype=torch.float32):
        """Scores ``shape + (n1 + n2,)``: the first ``n1`` keys are block 1;
        rows ``masked1``/``masked2`` (indices into the flattened rows) have
        their block 1/2 fully masked."""
        scores = torch.cat([r(*shape, n1, scale=scale, shift=shift1),
                            r(*shape, n2, scale=scale, shift=shift2)], dim=-1)
        flat = scores.view(-1, n1 + n2)
        for row in masked1:
            flat[row, :n1] = _NEG_INF
        for row in masked2:
            flat[row, n1:] = _NEG_INF
        values = r(*shape, n1 + n2, dv)
        scores, values = scores.to(dtype), values.to(dtype)
        b1 = summarise(scores[..., :n1], values[..., :n1, :])
        b2 = summarise(scores[..., n1:], values[..., n1:, :])
        return Case(label, (*b1, *b2)), (scores, values)

    return [
        case("online.case.plain", (2, 3), 4, 5, 6, scale=2.0),
        case("online.case.second_larger", (2, 3), 3, 4, 5, shift2=4.0),
        case("online.case.first_larger", (3, 2), 5, 3, 4, shift1=4.0),
        case("online.case.heads", (2, 2, 3), 4, 4, 3, scale=3.0),
        case("online.case.masked", (2, 3), 4, 5, 4, masked1=(1,), masked2=(3, 4), scale=2.0),
        case("online.case.both_masked", (2, 3), 3, 3, 4, masked1=(0, 2), masked2=(2, 5)),
        case("online.case.large", (2, 3), 4, 4, 5, scale=40.0),
        case("online.case.float64", (2, 2), 3, 4, 3, scale=2.0, dtype=torch.float64),
    ]


def _mistakes() -> list[Mistake]:
    def knob(**kw):
        return lambda m1, l1, o1, m2, l2, o2: _merge(m1, l1, o1, m2, l2, o2, **kw)

    return [
        Mistake("online.hint.order", knob(order="mol")),
        Mistake("online.hint.no_rescale", knob(rescale="none")),
        Mistake("online.hint.o_not_rescaled", knob(rescale="l_only")),
        Mistake("online.hint.l_not_rescaled", knob(rescale="o_only")),
        Mistake("online.hint.one_block", knob(rescale="first")),
        Mistake("online.hint.one_block", knob(rescale="second")),
        Mistake("online.hint.flipped", knob(factor="flipped")),
        Mistake("online.hint.no_exp", knob(factor="no_exp")),
        Mistake("online.hint.crossed", knob(crossed=True)),
        Mistake("online.hint.summed_max", knob(max_of="sum")),
        Mistake("online.hint.min", knob(max_of="min")),
        Mistake("online.hint.normalised", knob(normalise_out=True)),
        Mistake("online.hint.weighted_by_l", knob(weight_by_l=True)),
        Mistake("online.hint.averaged", knob(average=True, rescale="none")),
        Mistake("online.hint.averaged", knob(average=True)),
        Mistake("online.hint.nan", knob(guard=False), nan="match"),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "Boolean value of Tensor" in text:  # Python's max(m1, m2) on tensors
        return t("online.err.python_max")
    return None


def check_online_softmax_merge(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(m1, l1, o1, m2, l2, o2) -> (m, l, o)``.

    Args:
        fn: the reader's merge of two blocks of keys. For each block ``i``:
            ``m_i`` ``(..., 1)`` the largest score of the block (``−inf``
            where all its keys are masked), ``l_i`` ``(..., 1)`` the sum of
            ``exp(score − m_i)`` over its keys, ``o_i`` ``(..., Dv)`` the
            *unnormalised* sum of ``exp(score − m_i) · value`` (0 where
            masked). Returns the same three for the union of the two blocks
            (``m`` its largest score), so that ``o / l`` is the softmax
            attention over both; a row whose keys are all masked gives
            ``−inf, 0, 0``, never NaN. Tensors in the inputs' dtype.
        lang: language of the verdict; None for the current one.

    Tests: random scores, block 2 or block 1 holding every row's maximum,
    heads as a leading axis, rows with one block masked, rows with both
    masked, scores of size ~40, float64.

    Returns:
        True if it matches the summary computed from the full row of scores.
    """
    made = _cases()
    return check(
        "online_softmax_merge", fn, [case for case, _ in made], _reference_for(made), _mistakes(),
        signature="fn(m1, l1, o1, m2, l2, o2)", names=("name.max", "name.sum", "name.acc"),
        atol=1e-5, rtol=1e-4, on_error=_error, fallback="online.fallback", lang=lang,
    )
