"""Guards around one call of the reader's function: a time limit, the process
state it may change put back, and a look at what it returned before anything
compares it element by element.

- :func:`call_with_time_limit` runs the call under a watchdog. In the main
  thread (where a notebook's cells run) a ``SIGALRM`` timer interrupts it,
  which stops a Python loop and a wait on a lock or an event; elsewhere, or
  where another timer is already pending, the call runs in a daemon thread
  that is given up after the limit (it cannot be stopped, only left). Either
  way the caller gets :class:`TimeLimitExceeded`, a ``BaseException``, so the
  reader's own ``except Exception`` cannot swallow it.
- :func:`preserved_state` puts back what a reader's function may change
  behind the checker's back: torch's default dtype, grad mode and thread
  count (around every call) and, with ``rng=True``, the random states of
  torch, :mod:`random` and NumPy (around a whole check, so that a reader's
  dropout is still seen to be random from one call to the next).
- :func:`result_problem` refuses results that cannot be compared cheaply:
  a tensor with more than :data:`MAX_NUMEL` elements (an expanded view of
  10⁶ × 10⁶ costs nothing to return and hours to walk), or one that is not
  an ordinary CPU tensor (a meta tensor holds no values).
"""

from __future__ import annotations

import contextlib
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

__all__ = ["MAX_NUMEL", "TIME_LIMIT_S", "TimeLimitExceeded", "call_with_time_limit",
           "preserved_state", "result_problem"]

#: Seconds one call of the reader's function may take (each case's inputs are tiny).
TIME_LIMIT_S = 20.0
#: The most elements a returned tensor may have; every expected result has far fewer.
MAX_NUMEL = 10**7


class TimeLimitExceeded(BaseException):
    """The reader's function ran past the time limit (``args[0]``: the limit in s)."""


def call_with_time_limit(fn: Callable, args: tuple, kwargs: dict, seconds: float | None) -> Any:
    """``fn(*args, **kwargs)``, or :class:`TimeLimitExceeded` after ``seconds``
    (None: no limit)."""
    if seconds is None:
        return fn(*args, **kwargs)
    in_main = threading.current_thread() is threading.main_thread()
    if in_main and hasattr(signal, "setitimer") and signal.getitimer(signal.ITIMER_REAL)[0] == 0:
        return _with_alarm(fn, args, kwargs, seconds)
    return _in_thread(fn, args, kwargs, seconds)


def _with_alarm(fn: Callable, args: tuple, kwargs: dict, seconds: float) -> Any:
    armed = [True]

    def on_alarm(signum, frame):
        if armed[0]:
            raise TimeLimitExceeded(seconds)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args, **kwargs)
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _in_thread(fn: Callable, args: tuple, kwargs: dict, seconds: float) -> Any:
    box: dict[str, Any] = {}
    grad = torch.is_grad_enabled()  # grad mode is per thread: carry the caller's over

    def run() -> None:
        try:
            with torch.set_grad_enabled(grad):
                box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    worker = threading.Thread(target=run, name="exercise-check", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeLimitExceeded(seconds)
    if "error" in box:
        raise box["error"]
    return box["result"]


@contextlib.contextmanager
def preserved_state(rng: bool = False) -> Iterator[None]:
    """Within the block the reader may change torch's default dtype, grad mode
    and threads (and, with ``rng``, the random states); afterwards they are as
    they were."""
    dtype, grad, threads = torch.get_default_dtype(), torch.is_grad_enabled(), \
        torch.get_num_threads()
    states = _random_states() if rng else None
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if states is not None:
            _set_random_states(states)


def _random_states() -> tuple:
    numpy = sys.modules.get("numpy")  # only if the notebook uses it: never imported here
    return (torch.get_rng_state(), random.getstate(),
            numpy.random.get_state() if numpy is not None else None)


def _set_random_states(states: tuple) -> None:
    torch_state, python_state, numpy_state = states
    torch.set_rng_state(torch_state)
    random.setstate(python_state)
    if numpy_state is not None:
        sys.modules["numpy"].random.set_state(numpy_state)


def _tensors(obj: Any, depth: int = 0) -> Iterator[Tensor]:
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)) and depth < 4:
        for item in obj[:100]:
            yield from _tensors(item, depth + 1)
    elif isinstance(obj, dict) and depth < 4:
        for item in list(obj.values())[:100]:
            yield from _tensors(item, depth + 1)


def result_problem(result: Any) -> tuple[str, dict] | None:
    """``(message id, fields)`` if ``result`` holds a tensor that must not be
    compared (too large, meta or on another device), else None. Reads
    metadata only."""
    for x in _tensors(result):
        if x.is_meta or x.device.type != "cpu":
            return "harness.device", {"device": x.device.type}
        if x.numel() > MAX_NUMEL:
            return "harness.huge", {"shape": tuple(x.shape), "numel": f"{x.numel():,}",
                                    "limit": f"{MAX_NUMEL:,}"}
    return None
