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

from ._harness import Case, Mistake, check
from ._messages import t

__all__ = ["check_warmup_schedule", "paper_learning_rate"]


def paper_learning_rate(step: int, d_model: int, warmup_steps: int = 4000) -> float:
    """``d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)``, step >= 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def _lr(step, d_model, warmup_steps=4000, *, combine=min, d_exp=-0.5, w_exp=-1.5, decay=-0.5,
        warmup=None, shift=0, normalised=False):
    """The schedule with one knob turned: the family of wrong answers."""
    w = warmup_steps if warmup is None else warmup
    s = step + shift
    if normalised:  # the shape right, the scale (d_model · warmup)^-0.5 forgotten
        return min(s / w, math.sqrt(w / s))
    return d_model**d_exp * combine(s**decay, s * w**w_exp)


def _knob(**kw):
    def fn(step, d_model, warmup_steps=4000):
        return _lr(step, d_model, warmup_steps, **kw)
    return fn


def _mistakes() -> list[Mistake]:
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
