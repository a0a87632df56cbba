"""Time one call of a function, the way the chapters' timings do.

A time on a shared machine is noisy upward only (other work can slow a run
down, nothing speeds it up), so the chapters report the fastest of a few
measurements, after a warm-up call that pays for first-call costs (memory
allocation, kernel selection). Print the machine beside it
(:func:`~minitransformer.instruments.machine.describe_machine`).

    from minitransformer.instruments.timing import time_call
    seconds = time_call(lambda: model(x), repeats=5)
    cpu_seconds = time_call(lambda: model(x), clock=time.process_time)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["time_call"]

#: The shortest warm-up time :func:`time_call` divides by when it sizes a
#: measurement (a clock too coarse to see one call would otherwise ask for
#: millions of calls).
MIN_CALL_SECONDS = 1e-6


def time_call(
    fn: Callable[[], object],
    *,
    repeats: int = 5,
    warmup: int = 1,
    min_seconds: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Seconds one call of ``fn()`` takes: the fastest of ``repeats``
    measurements, after ``warmup`` calls that are not counted.

    Args:
        fn: called with no arguments; its result is discarded (wrap a call
            with arguments in a ``lambda``).
        repeats: measurements to take the fastest of (at least 1).
        warmup: calls before the first measurement (0 for none).
        min_seconds: each measurement calls ``fn`` as many times as make it
            last at least this long (estimated from the fastest warm-up call,
            so it needs ``warmup >= 1``) and counts the time per call; 0
            times each call alone.
        clock: seconds as a float: :func:`time.perf_counter` (wall time, the
            default), :func:`time.process_time` (CPU time of this process) or
            :func:`time.thread_time` (CPU time of this thread), which count
            less of the time other programs take on a busy machine.

    Returns: seconds per call (a float >= 0).
    """
    if not callable(fn):
        raise TypeError(f"time_call: fn must be callable, got {type(fn).__name__}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"time_call: repeats must be an int >= 1, got {repeats!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"time_call: warmup must be an int >= 0, got {warmup!r}")
    if not min_seconds >= 0:
        raise ValueError(f"time_call: min_seconds must be >= 0, got {min_seconds!r}")
    if min_seconds > 0 and warmup < 1:
        raise ValueError("time_call: min_seconds needs warmup >= 1 (the warm-up calls "
                         "estimate how many calls last min_seconds)")
    fastest_warmup = math.inf
    for _ in range(warmup):
        start = clock()
        fn()
        fastest_warmup = min(fastest_warmup, clock() - start)
    calls = 1
    if min_seconds > 0:
        calls = max(1, math.ceil(min_seconds / max(fastest_warmup, MIN_CALL_SECONDS)))
    best = math.inf
    for _ in range(repeats):
        start = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - start) / calls)
    return max(best, 0.0)
