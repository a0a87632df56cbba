"""The machinery every checker shares: run the reader's function safely on a
list of cases, compare with the package's answer, and name the most likely
mistake.

How a mistake is diagnosed: each checker lists the usual wrong versions of
the function (no scaling, the mask inverted, ...) as :class:`Mistake` objects
that compute the wrong answer. When the reader's output differs from the
reference on some case, the first listed mistake whose output equals the
reader's, on that case and on every case before it, gives the hint. A
mistake whose output is the same as the reference on a case does not tell
anything there; one that differs from the reader's anywhere is ruled out.
"""

from __future__ import annotations

import functools
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

#: Marks of a pass and a failure (plain symbols: they render in any font).
PASS = "✓"
FAIL = "✗"

#: Printed when the reader's cell still raises NotImplementedError.
NOT_IMPLEMENTED = (
    "Not implemented yet: replace `raise NotImplementedError` with your code, "
    "run the cell, then run the check again."
)


@dataclass
class Case:
    """One call of the reader's function: ``fn(*args, **kwargs)``.

    ``label`` describes the inputs in the reader's words; it is printed when
    the case fails.
    """

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)


@dataclass
class Mistake:
    """A typical wrong version of the function and the hint it earns.

    ``compute`` takes the same arguments as the reader's function and returns
    the wrong answer. ``nan``: ``"any"`` treats NaN entries of the wrong
    answer as "anything goes" (the reader may have hidden them differently),
    ``"match"`` requires the reader's NaN in exactly those places.
    """

    hint: str
    compute: Callable[..., Any]
    nan: str = "any"


def wrap(text: str, width: int = 88, first: str = "") -> str:
    """Wrap each line of a verdict to ``width`` columns (book pages do not wrap
    code output); lines after the first are indented by three spaces."""
    lines = text.split("\n")
    fill = functools.partial(textwrap.fill, width=width, subsequent_indent="   ",
                             break_on_hyphens=False, break_long_words=False)
    out = [fill(lines[0].strip(), initial_indent=first)]
    out += [fill(line.strip(), initial_indent="   ") for line in lines[1:]]
    return "\n".join(out)


def generator(seed: int = 0) -> torch.Generator:
    """A private random generator, so that checking never moves the notebook's
    global random state."""
    return torch.Generator().manual_seed(seed)


def _clone(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj.clone()
    if isinstance(obj, tuple):
        return tuple(_clone(o) for o in obj)
    if isinstance(obj, list):
        return [_clone(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    return obj


def _same_tensors(a: Any, b: Any) -> bool:
    """True if every tensor inside ``a`` equals the one in ``b`` (NaN == NaN)."""
    if isinstance(a, Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, equal_nan=True))
        )
    if isinstance(a, (tuple, list)):
        return all(_same_tensors(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict):
        return all(_same_tensors(a[k], b[k]) for k in a)
    return True


def describe(x: Any) -> str:
    """Short description of a returned value, for messages."""
    if isinstance(x, Tensor):
        return f"a tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} items"
    return f"a {type(x).__name__}"


def structure_problem(
    got: Any, expected: Any, names: Sequence[str] = ("your result",), strict_dtype: bool = True
) -> str | None:
    """Say what is wrong with the *form* of ``got`` (type, length, shape,
    dtype) compared with ``expected``, or None if the form is right."""
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            what = ", ".join(names)
            return f"your function should return a tuple ({what}); it returned {describe(got)}."
        for g, e, n in zip(got, expected, names, strict=False):
            problem = structure_problem(g, e, (n,), strict_dtype)
            if problem:
                return problem
        return None
    name = names[0]
    if isinstance(expected, Tensor):
        if not isinstance(got, Tensor):
            return f"{name} should be a torch.Tensor; it is {describe(got)}."
        if got.shape != expected.shape:
            return (
                f"{name} has shape {tuple(got.shape)}; expected {tuple(expected.shape)}."
            )
        if expected.dtype == torch.bool and got.dtype != torch.bool:
            return (
                f"{name} has dtype {got.dtype}; a mask must be torch.bool "
                "(True = may attend)."
            )
        if expected.dtype != torch.bool and got.dtype == torch.bool:
            return f"{name} has dtype torch.bool; expected {expected.dtype}."
        if expected.is_floating_point() and not got.is_floating_point():
            return f"{name} has dtype {got.dtype}; expected a floating-point tensor."
        if expected.dtype in (torch.int64, torch.int32) and got.is_floating_point():
            return f"{name} has dtype {got.dtype}; expected integer ids ({expected.dtype})."
        if strict_dtype and expected.is_floating_point() and got.dtype != expected.dtype:
            return (
                f"{name} has dtype {got.dtype}; expected {expected.dtype}, the dtype of "
                "the inputs (don't hard-code float32 or float64)."
            )
        return None
    if isinstance(expected, (int, float)) and not isinstance(got, (int, float, Tensor)):
        return f"{name} should be a number; it is {describe(got)}."
    return None


def close(got: Any, expected: Any, atol: float, rtol: float, nan: str = "none") -> bool:
    """Compare nested tensors. ``nan``: ``"none"`` (any NaN in ``got`` fails
    unless ``expected`` has NaN there too), ``"any"`` (NaN in ``expected``
    = anything goes there) or ``"match"`` (NaN must be in the same places)."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return False
        return all(close(g, e, atol, rtol, nan) for g, e in zip(got, expected, strict=False))
    if isinstance(expected, Tensor):
        if not isinstance(got, Tensor) or got.shape != expected.shape:
            return False
        if expected.dtype == torch.bool or not expected.is_floating_point():
            if got.is_floating_point() and not expected.is_floating_point():
                return False
            return bool(torch.equal(got.to(expected.dtype), expected))
        g = got.detach().to(torch.float64)
        e = expected.detach().to(torch.float64)
        if nan == "any":
            keep = ~torch.isnan(e)
            if not bool(keep.any()):  # the wrong answer is non-finite: so must the reader's be
                return not bool(torch.isfinite(g).all())
            g, e = g[keep], e[keep]
        return bool(torch.allclose(g, e, atol=atol, rtol=rtol, equal_nan=True))
    if isinstance(expected, (int, float)):
        try:
            value = float(got)
        except (TypeError, ValueError, RuntimeError):
            return False
        return math.isclose(value, float(expected), abs_tol=atol, rel_tol=rtol)
    return got == expected


def worst_difference(got: Any, expected: Any) -> str:
    """One line naming the entry where ``got`` is furthest from ``expected``."""
    if isinstance(expected, (tuple, list)):
        for i, (g, e) in enumerate(zip(got, expected, strict=False)):
            if not close(g, e, 0.0, 0.0):
                return worst_difference(g, e) + f" (in item {i} of the returned tuple)"
        return ""
    if isinstance(expected, Tensor) and isinstance(got, Tensor) and got.shape == expected.shape:
        g = got.detach().to(torch.float64)
        e = expected.detach().to(torch.float64)
        if torch.isnan(g).any() and not torch.isnan(e).any():
            idx = tuple(int(i) for i in torch.nonzero(torch.isnan(g))[0])
            return f"your result has NaN, e.g. at index {idx} (expected {e[idx].item():.4g})"
        diff = (g - e).abs().nan_to_num(nan=math.inf)
        flat = int(diff.argmax())
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
        return (
            f"largest difference {diff[idx].item():.3g} at index {idx}: "
            f"expected {e[idx].item():.5g}, got {g[idx].item():.5g}"
        )
    return f"expected {expected!r}, got {got!r}"


def _call(fn: Callable, case: Case) -> tuple[Any, BaseException | None, bool]:
    """Run ``fn`` on a copy of the case; return (result, exception, mutated)."""
    args, kwargs = _clone(case.args), _clone(case.kwargs)
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # the reader's bug, reported as a hint
        return None, exc, False
    mutated = not (_same_tensors(args, case.args) and _same_tensors(kwargs, case.kwargs))
    return result, None, mutated


def _matches(mistake: Mistake, case: Case, got: Any, compare, strict_dtype: bool) -> bool:
    """True if the mistake explains the reader's result on this case."""
    try:
        wrong = mistake.compute(*_clone(case.args), **_clone(case.kwargs))
    except Exception:
        return False
    if structure_problem(got, wrong, strict_dtype=strict_dtype) is not None:
        return False
    if mistake.nan == "match":
        return compare(got, wrong, case, "match")
    return compare(got, wrong, case, "any")


def _explain(mistakes: Sequence[Mistake], runs: list[tuple[Case, Any]], index: int, cmp,
             strict_dtype: bool) -> str | None:
    """The hint of the first mistake that reproduces the reader's results on
    every case run; failing that, on the cases up to the first wrong one."""
    for upto in (len(runs), index + 1):
        for mistake in mistakes:
            if all(_matches(mistake, c, g, cmp, strict_dtype) for c, g in runs[:upto]):
                return mistake.hint
    return None


def check(
    title: str,
    fn: Callable,
    cases: Sequence[Case],
    reference: Callable[..., Any],
    mistakes: Sequence[Mistake] = (),
    *,
    names: Sequence[str] = ("your result",),
    atol: float = 1e-5,
    rtol: float = 1e-4,
    strict_dtype: bool = True,
    compare: Callable[[Any, Any, Case, str], bool] | None = None,
    on_error: Callable[[Case, BaseException], str | None] | None = None,
    fallback: str = "",
    on_pass: Callable[[list[Any]], str | None] | None = None,
) -> bool:
    """Grade ``fn`` on ``cases`` against ``reference``; print one verdict.

    Args:
        title: what is checked, e.g. "scaled_dot_product_attention".
        fn: the reader's function.
        cases: inputs, simplest first (the first failure is the one reported).
        reference: the package's answer, same arguments as ``fn``.
        mistakes: typical wrong versions, most likely first.
        names: names of the returned items (for a tuple result).
        compare: ``compare(got, expected, case, nan)`` -> bool, replacing the
            default :func:`close` (used where several answers are right).
        on_error: turns an exception raised on a case into a specific hint.
        fallback: advice added to the generic "wrong values" message.
        on_pass: may return a note printed under a pass.

    Returns:
        True if every case matched, False otherwise.
    """

    def cmp(got: Any, expected: Any, case: Case, nan: str = "none") -> bool:
        if compare is not None:
            return compare(got, expected, case, nan)
        return close(got, expected, atol, rtol, nan)

    def fail(message: str, case: Case | None = None) -> bool:
        where = f"\n(failed on: {case.label})" if case is not None else ""
        print(wrap(f"{FAIL} {title}: {message}{where}"))
        return False

    if not callable(fn):
        return fail(f"expected a function, got {describe(fn)}.")

    runs: list[tuple[Case, Any]] = []  # every case that returned, in order
    first_bad: tuple[int, Any, Any, str | None] | None = None  # (index, got, expected, problem)
    for case in cases:
        got, exc, mutated = _call(fn, case)
        if isinstance(exc, NotImplementedError):
            return fail(NOT_IMPLEMENTED)
        if exc is not None:
            if first_bad is not None:
                break  # an earlier case already went wrong: report that one
            specific = on_error(case, exc) if on_error is not None else None
            message = f"your function raised {type(exc).__name__}: {exc}"
            if specific:
                message = f"{specific}\n   ({message})"
            return fail(message, case)
        expected = reference(*_clone(case.args), **_clone(case.kwargs))
        runs.append((case, got))
        if first_bad is not None:
            continue  # keep running: later cases help to name the mistake
        problem = structure_problem(got, expected, names, strict_dtype)
        if problem is not None or not cmp(got, expected, case):
            first_bad = (len(runs) - 1, got, expected, problem)
        elif mutated:
            return fail(
                "your function changed one of its input tensors in place (a method "
                "ending in _, like masked_fill_ or div_, or an indexed assignment). "
                "Work on new tensors so the caller's inputs stay as they were.",
                case,
            )

    if first_bad is not None:
        index, got, expected, problem = first_bad
        hint = _explain(mistakes, runs, index, cmp, strict_dtype)
        if hint is None:
            hint = problem or f"wrong values: {worst_difference(got, expected)}."
            if problem is None and fallback:
                hint += f"\n   {fallback}"
        return fail(hint, runs[index][0])

    results = [got for _, got in runs]
    note = on_pass(results) if on_pass is not None else None
    tested = "Tested: " + "; ".join(c.label for c in cases) + "."
    print(wrap(f"{PASS} {title}: correct on all {len(cases)} tests.\n{tested}"))
    if note:
        print(wrap(f"Note: {note}", first="   "))
    return True
