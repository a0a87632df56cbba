"""The machinery every checker shares: run the reader's function safely on a
list of cases, compare with an independent reference, and name the most
likely mistake.

How a mistake is diagnosed: each checker lists the usual wrong versions of
the function (no scaling, the mask inverted, ...) as :class:`Mistake` objects
that compute the wrong answer. When the reader's output differs from the
reference on some case, the first listed mistake whose output equals the
reader's, on that case and on every case before it, gives the hint. A
mistake whose output is the same as the reference on a case does not tell
anything there; one that differs from the reader's anywhere is ruled out.

How an exception is reported: if the reader's function cannot even be
called with the checker's arguments (``inspect.signature(fn).bind`` fails)
the hint is about its signature; otherwise the verdict quotes the reader's
own line that raised, with a hint about that call when one is known.
``sys.exit`` is reported the same way. Each call runs under the guards of
:mod:`~minitransformer.exercises._guard` (a time limit, the process state put
back, results too large or not on the CPU refused before anything compares
them), so every check ends in a verdict.

No text lives here: messages are ids looked up with
:func:`~minitransformer.exercises._messages.t` in the current language.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from . import _guard
from ._guard import TimeLimitExceeded, call_with_time_limit, preserved_state, result_problem
from ._messages import t, using_language
from ._text import wrap

#: Marks of a pass and a failure (plain symbols: they render in any font).
PASS = "✓"
FAIL = "✗"

#: A message: its id, or (id, format fields).
Msg = str | tuple[str, dict]


def say(message: Msg) -> str:
    """The text of a message id, or of an ``(id, fields)`` pair."""
    if isinstance(message, tuple):
        return t(message[0], **message[1])
    return t(message)


@dataclass
class Case:
    """One call of the reader's function: ``fn(*args, **kwargs)``.

    ``label`` is the id of a message describing the inputs in the reader's
    words (``fields`` fill it in); it is printed when the case fails.
    """

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    fields: dict = field(default_factory=dict)

    def describe(self) -> str:
        return t(self.label, **self.fields)


@dataclass
class Mistake:
    """A typical wrong version of the function and the hint it earns.

    ``hint`` is a message id (or ``(id, fields)``). ``compute`` takes the
    same arguments as the reader's function and returns the wrong answer.
    ``nan``: ``"any"`` treats NaN entries of the wrong answer as "anything
    goes" (the reader may have hidden them differently), ``"match"`` requires
    the reader's NaN in exactly those places. ``explains``, for a family of
    wrong answers no single ``compute`` reproduces (a decay of any wrong
    form): ``explains(case, got)`` says whether the reader's result on that
    case fits the mistake, in place of comparing with ``compute``, which then
    only serves as an example of it (the tests feed it to the checker).
    """

    hint: Msg
    compute: Callable[..., Any]
    nan: str = "any"
    explains: Callable[[Case, Any], bool] | None = None


def generator(seed: int = 0) -> torch.Generator:
    """A private random generator, so that checking never moves the notebook's
    global random state."""
    return torch.Generator().manual_seed(seed)


def normal(g: torch.Generator, draw: torch.dtype = torch.float64) -> Callable[..., Tensor]:
    """A sampler ``r(*shape, dtype=torch.float32, scale=1.0, shift=0.0)`` of
    ``N(shift, scale²)`` tensors from the generator ``g``, drawn in ``draw``
    and cast to ``dtype`` (drawn in float64, a float32 case and a float64 case
    hold the same numbers)."""

    def r(*shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0,
          shift: float = 0.0) -> Tensor:
        return (torch.randn(*shape, generator=g, dtype=draw) * scale + shift).to(dtype)

    return r


def as_number(got: Any) -> float | None:
    """``got`` as a float (a number or a one-element tensor), or None if it is not one."""
    try:
        return float(got)
    except (TypeError, ValueError, RuntimeError):
        return None


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
        return isinstance(b, Tensor) and a.shape == b.shape and a.dtype == b.dtype and bool(
            torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, equal_nan=True))
        )
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(
            _same_tensors(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return all(_same_tensors(a[k], b[k]) for k in a)
    return True


def describe(x: Any) -> str:
    """Short description of a returned value, for messages."""
    if x is None:
        return t("describe.none")
    if isinstance(x, Tensor):
        return t("describe.tensor", shape=tuple(x.shape), dtype=x.dtype)
    if isinstance(x, (tuple, list)):
        return t("describe.sequence", kind=type(x).__name__, n=len(x))
    return t("describe.other", kind=type(x).__name__)


def structure_problem(
    got: Any, expected: Any, names: Sequence[str] = ("name.result",), strict_dtype: bool = True
) -> str | None:
    """Say what is wrong with the *form* of ``got`` (type, length, shape,
    dtype) compared with ``expected``, or None if the form is right.
    ``names`` are message ids naming the returned items."""
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            what = t("harness.list_names").join(t(n) for n in names)
            return t("struct.tuple", names=what, got=describe(got))
        for g, e, n in zip(got, expected, names):
            problem = structure_problem(g, e, (n,), strict_dtype)
            if problem:
                return problem
        return None
    name = t(names[0])
    if isinstance(expected, Tensor):
        if not isinstance(got, Tensor):
            return t("struct.not_tensor", name=name, got=describe(got))
        if got.shape != expected.shape:
            return t("struct.shape", name=name, got=tuple(got.shape),
                     expected=tuple(expected.shape))
        if expected.dtype == torch.bool and got.dtype != torch.bool:
            return t("struct.mask_dtype", name=name, got=got.dtype)
        if expected.dtype != torch.bool and got.dtype == torch.bool:
            return t("struct.bool", name=name, expected=expected.dtype)
        if expected.is_floating_point() and not got.is_floating_point():
            return t("struct.float", name=name, got=got.dtype)
        if expected.dtype in (torch.int64, torch.int32) and got.is_floating_point():
            return t("struct.int", name=name, got=got.dtype, expected=expected.dtype)
        if strict_dtype and expected.is_floating_point() and got.dtype != expected.dtype:
            return t("struct.dtype", name=name, got=got.dtype, expected=expected.dtype)
        return None
    if isinstance(expected, (int, float)) and not isinstance(got, (int, float, Tensor)):
        return t("struct.number", name=name, got=describe(got))
    if isinstance(expected, (int, float)) and isinstance(got, Tensor) and got.numel() != 1:
        return t("struct.number", name=name, got=describe(got))
    return None


def close(got: Any, expected: Any, atol: float, rtol: float, nan: str = "none") -> bool:
    """Compare nested tensors. ``nan``: ``"none"`` (any NaN in ``got`` fails
    unless ``expected`` has NaN there too), ``"any"`` (NaN in ``expected``
    = anything goes there) or ``"match"`` (NaN must be in the same places)."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return False
        return all(close(g, e, atol, rtol, nan) for g, e in zip(got, expected))
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
        value = as_number(got)
        if value is None:
            return False
        if nan == "any" and math.isnan(expected):
            return True
        return math.isclose(value, float(expected), abs_tol=atol, rel_tol=rtol)
    return got == expected


def worst_difference(got: Any, expected: Any) -> str:
    """One line naming the entry where ``got`` is furthest from ``expected``."""
    if isinstance(expected, (tuple, list)):
        for i, (g, e) in enumerate(zip(got, expected)):
            if not close(g, e, 0.0, 0.0):
                return t("harness.in_item", what=worst_difference(g, e), index=i)
        return ""
    if isinstance(expected, Tensor) and isinstance(got, Tensor) and got.shape == expected.shape:
        g = got.detach().to(torch.float64)
        e = expected.detach().to(torch.float64)
        if torch.isnan(g).any() and not torch.isnan(e).any():
            idx = tuple(int(i) for i in torch.nonzero(torch.isnan(g))[0])
            return t("harness.worst_nan", index=idx, expected=f"{e[idx].item():.4g}")
        diff = (g - e).abs().nan_to_num(nan=math.inf)
        flat = int(diff.argmax())
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
        return t("harness.worst", diff=f"{diff[idx].item():.3g}", index=idx,
                 expected=f"{e[idx].item():.5g}", got=f"{g[idx].item():.5g}")
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        try:
            return t("harness.expected_got", expected=f"{float(expected):.6g}",
                     got=f"{float(got):.6g}")
        except (TypeError, ValueError, RuntimeError):
            pass
    return t("harness.expected_got", expected=repr(expected), got=repr(got))


# --------------------------------------------------------------------------- calling
#: Frames in these folders are library code, not the reader's.
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                      for m in (torch, inspect))
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_GUARD_FILE = os.path.abspath(_guard.__file__)


@dataclass
class _Outcome:
    """What one call of the reader's function did."""

    result: Any = None
    error: BaseException | None = None
    unbound: str | None = None  # why the arguments could not bind to fn's signature
    line: str = ""  # the reader's source line that raised
    mutated: bool = False  # an input tensor was changed in place
    model_problem: str | None = None  # message id: the reader changed a model argument
    timed_out: float | None = None  # the time limit (s) the call ran past
    refused: tuple[str, dict] | None = None  # a result that must not be compared, and why


def _bind_error(fn: Callable, args: tuple, kwargs: dict) -> str | None:
    """Why ``fn(*args, **kwargs)`` cannot bind, or None if it can (or if fn's
    signature cannot be read)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc)
    return None


def _reader_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """Frames of the traceback below the harness that are the reader's code
    (not torch's, the standard library's or this package's)."""
    frames = traceback.extract_tb(exc.__traceback__)[1:]  # [0] is _call itself
    return [f for f in frames if not os.path.abspath(f.filename).startswith(
        (*_LIBRARY_DIRS, _PACKAGE_DIR))]


def _modules(args: tuple, kwargs: dict) -> list[nn.Module]:
    return [a for a in (*args, *kwargs.values()) if isinstance(a, nn.Module)]


def _snapshot(module: nn.Module) -> tuple[dict[str, Tensor], list[bool]]:
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    return state, [m.training for m in module.modules()]


def _restore(module: nn.Module, snapshot: tuple[dict[str, Tensor], list[bool]]) -> str | None:
    """Put ``module`` back as it was; return the id of the message describing
    what the reader changed, or None."""
    state, modes = snapshot
    problem = None
    try:
        now = module.state_dict()
        if now.keys() != state.keys() or any(not torch.equal(now[k], v) for k, v in state.items()):
            problem = "harness.model_changed"
        with torch.no_grad():
            module.load_state_dict(state)
    except (RuntimeError, KeyError):
        problem = "harness.model_changed"
    now_modes = [m.training for m in module.modules()]
    if problem is None and now_modes != modes:
        problem = "harness.model_mode"
    for m, training in zip(module.modules(), modes):
        m.train(training)
    return problem


def _call(fn: Callable, case: Case) -> _Outcome:
    """Run ``fn`` on a copy of the case's tensors (modules are shared, but
    restored afterwards and any change to them is reported)."""
    args, kwargs = _clone(case.args), _clone(case.kwargs)
    unbound = _bind_error(fn, args, kwargs)
    if unbound is not None:
        return _Outcome(unbound=unbound)
    modules = _modules(args, kwargs)
    snapshots = [_snapshot(m) for m in modules]
    outcome = _Outcome()
    try:
        with preserved_state():
            outcome.result = call_with_time_limit(fn, args, kwargs, _guard.TIME_LIMIT_S)
        outcome.refused = result_problem(outcome.result)
    except TimeLimitExceeded as exc:
        outcome.timed_out = float(exc.args[0])
    except (Exception, SystemExit) as exc:  # the reader's bug, reported as a hint
        outcome.error = exc
        frames = _reader_frames(exc)
        if frames:
            outcome.line = (frames[-1].line or "").strip()
        elif isinstance(exc, TypeError) and _raised_by_the_call_itself(exc):
            outcome.unbound = str(exc)  # a built-in that cannot take these arguments
    for module, snapshot in zip(modules, snapshots):
        outcome.model_problem = _restore(module, snapshot) or outcome.model_problem
    outcome.mutated = not (_same_tensors(args, case.args) and _same_tensors(kwargs, case.kwargs))
    return outcome


def _raised_by_the_call_itself(exc: BaseException) -> bool:
    """True if no Python frame ran between the call and the exception (a
    built-in given arguments it cannot take): below :func:`_call` only the
    time-limit guard's own frames."""
    frames = traceback.extract_tb(exc.__traceback__)[1:]
    return all(os.path.abspath(f.filename) == _GUARD_FILE for f in frames)


def _first_line(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).strip().splitlines()
    text = text[0] if text else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_KEYWORD_HINTS = {"ddof": "err.ddof", "smoothing": "err.label_smoothing"}
#: ``torch.softmax(x)`` / ``x.softmax()`` without ``dim``, as torch 2.13 words it and as
#: torch 2.11-2.12 (Colab's) do.
_SOFTMAX_WITHOUT_DIM = re.compile(
    r"(log_)?softmax\(\) (missing 1 required positional arguments?: \"dim\""
    r"|received an invalid combination of arguments - got \((Tensor)?\),)")


def common_error(exc: BaseException, line: str) -> str | None:
    """A hint for errors any checker can meet, read from the exception's text."""
    text = str(exc)
    keyword = re.search(r"unexpected keyword argument '(\w+)'", text)
    if keyword:
        name = keyword.group(1)
        if name in _KEYWORD_HINTS:
            return t(_KEYWORD_HINTS[name])
        func = re.match(r"([\w.]+)\(\) got", text)
        return t("err.keyword", func=func.group(1) if func else "this function", arg=name)
    if _SOFTMAX_WITHOUT_DIM.match(text):
        return t("err.softmax_dim")
    if "float" in text and ("tuple of ints" in text or "SymInt" in text):
        return t("err.float_size")
    if "invalid combination of arguments" in text:
        func = text.split("(")[0]
        if func in ("var", "std", "var_mean", "std_mean") and "ddof" in text:
            return t("err.ddof")
        if func in ("max", "maximum") and re.search(r"got \((int|float)", text):
            return t("err.max_relu")
    if "view size is not compatible" in text:
        return t("err.view_contiguous")
    return None


# --------------------------------------------------------------------------- checking
def _matches(mistake: Mistake, case: Case, got: Any, compare, strict_dtype: bool) -> bool:
    """True if the mistake explains the reader's result on this case."""
    if mistake.explains is not None:
        return mistake.explains(case, got)
    try:
        wrong = mistake.compute(*_clone(case.args), **_clone(case.kwargs))
    except Exception:
        return False
    if structure_problem(got, wrong, strict_dtype=strict_dtype) is not None:
        return False
    return compare(got, wrong, case, "match" if mistake.nan == "match" else "any")


def _explain(mistakes: Sequence[Mistake], runs: list[tuple[Case, Any]], index: int, cmp,
             strict_dtype: bool) -> Msg | None:
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
    signature: str,
    names: Sequence[str] = ("name.result",),
    atol: float = 1e-5,
    rtol: float = 1e-4,
    strict_dtype: bool = True,
    compare: Callable[[Any, Any, Case, str], bool] | None = None,
    on_error: Callable[[Case, BaseException, str], str | None] | None = None,
    fallback: Msg | None = None,
    on_pass: Callable[[list[Any]], Msg | None] | None = None,
    random_ok: bool = False,
    lang: str | None = None,
) -> bool:
    """Grade ``fn`` on ``cases`` against ``reference``; print one verdict.

    Args:
        title: what is checked, e.g. "scaled_dot_product_attention".
        fn: the reader's function.
        cases: inputs, simplest first (the first failure is the one reported).
        reference: the right answer, same arguments as ``fn``; it is computed
            before the reader's function runs.
        mistakes: typical wrong versions, most likely first.
        signature: how ``fn`` is called, e.g. "fn(q, k, v, mask=None)".
        names: message ids naming the returned items (for a tuple result).
        compare: ``compare(got, expected, case, nan)`` -> bool, replacing the
            default :func:`close` (used where several answers are right).
        on_error: ``on_error(case, exc, line)`` turns an exception raised by
            the reader's ``line`` into a specific hint (text), or None.
        fallback: advice added to the generic "wrong values" message.
        on_pass: may return a note printed under a pass.
        random_ok: the function is meant to draw at random (BERT's masking):
            different results for the same input are no mistake, ``compare``
            judges a result by its statistics, and a wrong one that no
            mistake explains gets the ``fallback`` alone (no entry of a
            random result is comparable with the reference's).
        lang: language of the verdict; None for the current one.

    Returns:
        True if every case matched, False otherwise.
    """
    with using_language(lang), preserved_state(rng=True):
        torch.set_num_threads(1)  # tiny tensors: threads only add overhead (and contention)
        try:
            return _check(title, fn, cases, reference, mistakes, signature=signature,
                          names=names, atol=atol, rtol=rtol, strict_dtype=strict_dtype,
                          compare=compare, on_error=on_error, fallback=fallback,
                          on_pass=on_pass, random_ok=random_ok)
        except Exception as exc:  # a result nothing here foresaw: still a verdict, never a raise
            print(wrap(f"{FAIL} {title}: " + t("harness.uncomparable",
                                                error=f"{type(exc).__name__}: {_first_line(exc)}")))
            return False


#: Every case that returned, in order, with the reader's result.
_Runs = list[tuple[Case, Any]]
#: The first wrong case: (index in the runs, got, expected, structure problem).
_FirstBad = tuple[int, Any, Any, str | None]
#: A failed verdict: the message, and the case it failed on (None: not case-specific).
_Failure = tuple[str, Case | None]
#: ``cmp(got, expected, case, nan)`` -> bool: the comparison a check uses.
_Compare = Callable[..., bool]


def _check(title, fn, cases, reference, mistakes, *, signature, names, atol, rtol,
           strict_dtype, compare, on_error, fallback, on_pass, random_ok=False) -> bool:
    cmp = _comparison(compare, atol, rtol)
    if not callable(fn):
        return _fail(title, t("harness.not_callable", got=describe(fn)))
    runs: _Runs = []
    failure, first_bad = _run_cases(fn, cases, reference, runs, cmp, signature=signature,
                                    names=names, strict_dtype=strict_dtype, on_error=on_error)
    if failure is None and first_bad is not None:
        failure = _diagnose(fn, runs, first_bad, mistakes, cmp, strict_dtype, fallback,
                            random_ok)
    if failure is not None:
        return _fail(title, *failure)
    _report_pass(title, cases, [got for _, got in runs], on_pass)
    return True


def _comparison(compare: _Compare | None, atol: float, rtol: float) -> _Compare:
    """The check's comparison: ``compare`` if given, else :func:`close`."""
    def cmp(got: Any, expected: Any, case: Case, nan: str = "none") -> bool:
        if compare is not None:
            return compare(got, expected, case, nan)
        return close(got, expected, atol, rtol, nan)
    return cmp


def _fail(title: str, message: str, case: Case | None = None) -> bool:
    """Print a failed verdict (naming the case, if any); False."""
    where = "\n" + t("harness.failed_on", label=case.describe()) if case is not None else ""
    print(wrap(f"{FAIL} {title}: {message}{where}"))
    return False


def _run_cases(fn: Callable, cases: Sequence[Case], reference: Callable[..., Any], runs: _Runs,
               cmp: _Compare, *, signature: str, names: Sequence[str], strict_dtype: bool,
               on_error) -> tuple[_Failure | None, _FirstBad | None]:
    """Run ``fn`` on every case, appending what returned to ``runs``: a failure
    that ends the check at once, or else the first wrong case (if any)."""
    first_bad: _FirstBad | None = None
    for case in cases:
        expected = reference(*_clone(case.args), **_clone(case.kwargs))
        outcome = _call(fn, case)
        if isinstance(outcome.error, NotImplementedError):
            return (t("harness.not_implemented"), None), first_bad
        if outcome.timed_out is not None:
            return (t("harness.timeout", seconds=f"{outcome.timed_out:g}"), case), first_bad
        if outcome.refused is not None:
            return (say(outcome.refused), case), first_bad
        if outcome.unbound is not None or outcome.error is not None:
            if first_bad is not None:
                break  # an earlier case already went wrong: report that one
            if outcome.unbound is not None:
                return (t("harness.signature", signature=signature,
                          error=outcome.unbound), case), first_bad
            return (_error_message(outcome, case, on_error), case), first_bad
        if outcome.model_problem is not None:
            return (t(outcome.model_problem), case), first_bad
        got = outcome.result
        runs.append((case, got))
        if first_bad is not None:
            continue  # keep running: later cases help to name the mistake
        problem = structure_problem(got, expected, names, strict_dtype)
        if problem is not None or not cmp(got, expected, case):
            first_bad = (len(runs) - 1, got, expected, problem)
        elif outcome.mutated:
            return (t("harness.mutated"), case), first_bad
    return None, first_bad


def _diagnose(fn: Callable, runs: _Runs, first_bad: _FirstBad, mistakes: Sequence[Mistake],
              cmp: _Compare, strict_dtype: bool, fallback: Msg | None,
              random_ok: bool = False) -> _Failure:
    """The verdict on the first wrong case: a random answer, the hint of a
    known mistake, the structure problem, or the worst difference (with
    ``random_ok``: no test for randomness, and the fallback instead of the
    worst difference)."""
    index, got, expected, problem = first_bad
    case = runs[index][0]
    # a random answer (dropout, sampling) is wrong differently each time
    for _ in range(0 if random_ok else 3):
        again = _call(fn, case)
        if again.error is None and again.timed_out is None and again.refused is None \
                and not _same_tensors(got, again.result):
            return t("harness.random"), case
    hint = _explain(mistakes, runs, index, cmp, strict_dtype)
    if hint is not None:
        return say(hint), case
    if problem is not None:
        return problem, case
    if random_ok and fallback:
        return say(fallback), case
    message = t("harness.wrong_values", where=worst_difference(got, expected))
    if fallback:
        message += "\n" + say(fallback)
    return message, case


def _report_pass(title: str, cases: Sequence[Case], results: list[Any],
                 on_pass: Callable[[list[Any]], Msg | None] | None) -> None:
    """Print the pass verdict, the cases tested, and ``on_pass``'s note if any."""
    note = on_pass(results) if on_pass is not None else None
    labels = t("harness.list_cases").join(c.describe() for c in cases)
    print(wrap(f"{PASS} {title}: {t('harness.passed', count=len(cases))}\n"
               f"{t('harness.tested', labels=labels)}"))
    if note:
        print(wrap(t("harness.note", note=say(note)), first="   "))


def _error_message(outcome: _Outcome, case: Case, on_error) -> str:
    """The verdict for an exception: a specific hint if one is known, and the
    reader's own line that raised."""
    exc = outcome.error
    error = f"{type(exc).__name__}: {_first_line(exc)}"
    line = outcome.line if len(outcome.line) <= 100 else outcome.line[:99] + "…"
    if isinstance(exc, SystemExit):
        error = f"SystemExit({exc.code!r})"
        specific = t("harness.exit")
    else:
        specific = on_error(case, exc, outcome.line) if on_error is not None else None
    specific = specific or common_error(exc, outcome.line)
    raised = (t("harness.raised_at", line=line, error=error) if line
              else t("harness.raised", error=error))
    return f"{specific}\n({raised})" if specific else raised
