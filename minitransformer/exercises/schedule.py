"""Checker for the warm-up learning-rate schedule of the paper.

Vaswani et al. (2017), section 5.3:

    lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5),

a linear rise for ``warmup_steps`` steps to the peak
``(d_model · warmup_steps)^-0.5``, then a decay as ``1/√step``; steps count
from 1. The reference is that closed form, written here; the tests also
compare :func:`minitransformer.training.learning_rate` with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ._harness import Case, Mistake, as_number, check
from ._messages import t

__all__ = ["check_warmup_schedule", "paper_learning_rate"]


def paper_learning_rate(step: int, d_model: int, warmup_steps: int = 4000) -> float:
    """``d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)``, step >= 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def _lr(step, d_model, warmup_steps=4000, *, combine=min, d_exp=-0.5, w_exp=-1.5, decay=-0.5,
        warmup=None, shift=0, normalised=False, precedence="", step_factor=True, digits=None):
    """The schedule with one knob turned: the family of wrong answers.

    ``precedence``: the terms, of "d", "s" and "w", whose exponent was written
    ``** -1/2`` (or ``** -3/2``), which Python reads as ``(x ** -1) / 2``.
    ``step_factor``: False drops the step from the warm-up term.
    ``digits``: the rate rounded, ``round(lr, digits)``.
    """
    w = warmup_steps if warmup is None else warmup
    s = step + shift
    if normalised:  # the shape right, the scale (d_model · warmup)^-0.5 forgotten
        return min(s / w, math.sqrt(w / s))
    d_term = d_model**-1 / 2 if "d" in precedence else d_model**d_exp
    s_term = s**-1 / 2 if "s" in precedence else s**decay
    w_term = w**-3 / 2 if "w" in precedence else w**w_exp
    lr = d_term * combine(s_term, (s if step_factor else 1) * w_term)
    return lr if digits is None else round(lr, digits)


def _knob(**kw):
    def fn(step, d_model, warmup_steps=4000):
        return _lr(step, d_model, warmup_steps, **kw)
    return fn


def _decays_wrongly(case: Case, got) -> bool:
    """The warm-up right, the decay after it of some other form: equal to the
    paper's rate up to ``warmup_steps``, positive and at most the peak after."""
    step, d_model = case.args
    warmup = case.kwargs.get("warmup_steps", 4000)
    value = as_number(got)
    if value is None:
        return False
    right = paper_learning_rate(step, d_model, warmup)
    if step <= warmup:
        return math.isclose(value, right, rel_tol=1e-5)
    return 0 < value <= paper_learning_rate(warmup, d_model, warmup) * (1 + 1e-6)


def _rounded(case: Case, got) -> bool:
    """The paper's rate rounded, to some number of decimals (``round(lr, n)``)
    or of significant digits (``f"{lr:.3g}"``)."""
    value = as_number(got)
    if value is None:
        return False
    right = paper_learning_rate(*case.args, **case.kwargs)
    return any(value == round(right, n) for n in range(17)) or any(
        value == float(f"{right:.{n}g}") for n in range(1, 17))


def _exponential_decay(step, d_model, warmup_steps=4000):
    """An example of a decay of the wrong form: exponential after the peak."""
    if step <= warmup_steps:
        return paper_learning_rate(step, d_model, warmup_steps)
    peak = paper_learning_rate(warmup_steps, d_model, warmup_steps)
    return peak * math.exp(-(step - warmup_steps) / warmup_steps)


def _mistakes() -> list[Mistake]:
    slips = ["d", "s", "w", "ds", "dw", "sw", "dsw"]  # terms written ** -1/2 (** -3/2)
    return [
        Mistake("warmup.hint.max", _knob(combine=max)),
        Mistake("warmup.hint.d_exp", _knob(d_exp=0.5)),
        Mistake("warmup.hint.d_exp", _knob(d_exp=-1.0)),
        Mistake("warmup.hint.no_d", _knob(d_exp=0.0)),
        Mistake("warmup.hint.warmup_exp", _knob(w_exp=-0.5)),
        Mistake("warmup.hint.warmup_exp", _knob(w_exp=1.5)),
        Mistake("warmup.hint.warmup_exp", _knob(w_exp=-1.0)),
        Mistake("warmup.hint.decay", _knob(decay=-1.0)),
        Mistake("warmup.hint.decay", _knob(decay=0.5)),
        Mistake("warmup.hint.fixed_warmup", _knob(warmup=4000)),
        Mistake("warmup.hint.off_by_one", _knob(shift=1)),
        Mistake("warmup.hint.normalised", _knob(normalised=True)),
        *(Mistake("warmup.hint.precedence", _knob(precedence=p)) for p in slips),
        Mistake("warmup.hint.no_step", _knob(step_factor=False)),
        Mistake("warmup.hint.rounded", _knob(digits=6), explains=_rounded),
        Mistake("warmup.hint.decay_form", _exponential_decay, explains=_decays_wrongly),
    ]


def _cases() -> list[Case]:
    def case(step, d, w=None):
        kwargs = {} if w is None else {"warmup_steps": w}
        fields = {"step": step, "d": d, "w": 4000 if w is None else w}
        return Case("warmup.case.default" if w is None else "warmup.case.values", (step, d),
                    kwargs, fields)

    return [
        case(1, 512),
        case(100, 512, 4000),
        case(4000, 512, 4000),
        case(4001, 512, 4000),
        case(100_000, 512, 4000),
        case(50, 256, 100),
        case(1000, 64, 100),
        case(1, 16, 1),
        case(10**6, 1024),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    if isinstance(exc, ZeroDivisionError):
        return t("warmup.err.zero_step")
    return None


def check_warmup_schedule(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(step, d_model, warmup_steps=4000) -> learning_rate``.

    Args:
        fn: the reader's schedule: ints ``step`` (counted from 1), ``d_model``
            and ``warmup_steps``; returns the learning rate
            ``d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)`` as a
            number (a float, or a one-element tensor).
        lang: language of the verdict; None for the current one.

    Tests: the first step with the default warm-up of 4000, steps during the
    warm-up, at its end and just after, long after (10⁵ and 10⁶ steps),
    other widths and warm-ups, a warm-up of one step.

    Returns:
        True if it matches the paper's closed form.
    """
    return check(
        "warmup_schedule", fn, _cases(), paper_learning_rate, _mistakes(),
        signature="fn(step, d_model, warmup_steps=4000)", names=("name.lr",),
        atol=0.0, rtol=1e-5, on_error=_error, fallback="warmup.fallback", lang=lang,
    )
