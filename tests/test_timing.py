"""time_call (instruments/timing.py), on a fake clock that each call of the
timed function moves forward by a scripted duration: no real time is read."""

from __future__ import annotations

import time

import pytest

from minitransformer.instruments import timing
from minitransformer.instruments.timing import time_call


class FakeWork:
    """A clock, and a function whose n-th call takes ``durations[n]`` seconds on it."""

    def __init__(self, durations):
        self.durations = list(durations)
        self.now = 100.0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def __call__(self) -> None:
        self.now += self.durations[self.calls]
        self.calls += 1


def test_returns_the_fastest_measurement_and_skips_the_warmup():
    work = FakeWork([0.5, 3.0, 1.0, 2.0])  # warm-up fastest of all, then 3 measurements
    assert time_call(work, repeats=3, clock=work.clock) == pytest.approx(1.0)
    assert work.calls == 4


def test_without_warmup_every_call_is_measured():
    work = FakeWork([4.0, 6.0])
    assert time_call(work, repeats=2, warmup=0, clock=work.clock) == pytest.approx(4.0)
    assert work.calls == 2


def test_several_warmup_calls():
    work = FakeWork([9.0, 9.0, 9.0, 2.0])
    assert time_call(work, repeats=1, warmup=3, clock=work.clock) == pytest.approx(2.0)
    assert work.calls == 4


def test_min_seconds_times_enough_calls_and_divides_by_them():
    # the warm-up takes 0.01 s, so 0.05 s needs 5 calls per measurement
    work = FakeWork([0.01] + [0.02] * 5 + [0.01] * 4 + [0.03] + [0.03] * 5)
    seconds = time_call(work, repeats=3, min_seconds=0.05, clock=work.clock)
    assert work.calls == 1 + 3 * 5
    assert seconds == pytest.approx((4 * 0.01 + 0.03) / 5)  # the second measurement


def test_a_clock_that_does_not_move_asks_for_a_bounded_number_of_calls():
    work = FakeWork([0.0] * 5000)
    assert time_call(work, repeats=1, min_seconds=2e-3, clock=work.clock) == 0.0
    assert abs(work.calls - (1 + 2e-3 / timing.MIN_CALL_SECONDS)) <= 1  # not millions


def test_default_clock_is_perf_counter():
    assert time_call.__kwdefaults__["clock"] is time.perf_counter


@pytest.mark.parametrize("kwargs, message", [
    ({"repeats": 0}, "repeats must be an int >= 1"),
    ({"warmup": -1}, "warmup must be an int >= 0"),
    ({"min_seconds": -0.1}, "min_seconds must be >= 0"),
    ({"min_seconds": 0.1, "warmup": 0}, "min_seconds needs warmup >= 1"),
])
def test_bad_arguments_say_what_was_expected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        time_call(lambda: None, **kwargs)


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        time_call(3)
