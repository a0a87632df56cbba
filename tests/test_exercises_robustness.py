"""The checkers give a verdict whatever the reader's function does (issue 27,
items 6 and 8): a huge expanded view, ``sys.exit``, meta tensors, a function
that never returns (a time limit with a verdict), a result nothing can compare;
and they put back the process state a function changes (random states,
default dtype, grad mode, threads).
"""

from __future__ import annotations

import random
import signal
import sys
import threading

import numpy as np
import pytest
import torch
from exercise_helpers import flat, run_checker

import minitransformer.exercises as ex
from minitransformer.exercises import _guard, _messages
from minitransformer.positional import sinusoidal_table

CHECKERS = [getattr(ex, name) for name in ex.__all__ if name.startswith("check_")]


def _said(message_id: str, out: str, lang: str = "en") -> bool:
    """True if ``out`` holds the message's text up to its first field."""
    text = _messages.catalogue(lang)[message_id].split("{")[0]
    return flat(text) in flat(out)


def causal_ok(length):
    return torch.ones(length, length, dtype=torch.bool).tril()


# ---------------------------------------------------------------- results that must not be compared
def causal_expanded(length):
    return torch.ones(1, 1, dtype=torch.bool).expand(10**6, 10**6)  # 10^12 elements, no memory


def sdpa_expanded(q, k, v, mask=None):
    huge = q.new_zeros(1, 1).expand(10**6, 10**6)
    return huge, huge


def causal_meta(length):
    return torch.ones(length, length, dtype=torch.bool, device="meta").tril()


def sdpa_meta(q, k, v, mask=None):
    scores = (q @ k.transpose(-2, -1)).to("meta")
    return scores.softmax(-1) @ v.to("meta"), scores.softmax(-1)


@pytest.mark.parametrize("checker, fn, message_id", [
    (ex.check_causal_mask, causal_expanded, "harness.huge"),
    (ex.check_scaled_dot_product_attention, sdpa_expanded, "harness.huge"),
    (ex.check_causal_mask, causal_meta, "harness.device"),
    (ex.check_scaled_dot_product_attention, sdpa_meta, "harness.device"),
], ids=["expanded-mask", "expanded-attention", "meta-mask", "meta-attention"])
def test_huge_and_meta_results_get_a_verdict(checker, fn, message_id, capsys):
    ok, out = run_checker(checker, fn, capsys)
    assert not ok and _said(message_id, out), out


def test_the_huge_verdict_says_the_shape(capsys):
    ok, out = run_checker(ex.check_causal_mask, causal_expanded, capsys)
    assert "(1000000, 1000000)" in out and "1,000,000,000,000" in out


def test_a_result_that_cannot_be_compared_gets_a_verdict(capsys):
    class Odd:
        def __float__(self):
            raise ZeroDivisionError("no value here")

    ok, out = run_checker(ex.check_warmup_schedule, lambda step, d_model, warmup_steps=4000: Odd(),
                          capsys)
    assert not ok and "ZeroDivisionError: no value here" in out, out


# ---------------------------------------------------------------- sys.exit
@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_sys_exit_is_caught_and_reported(checker, capsys):
    def exits(*args, **kwargs):
        sys.exit(3)

    ok, out = run_checker(checker, exits, capsys)
    assert not ok and _said("harness.exit", out) and "SystemExit(3)" in out


def test_sys_exit_is_reported_in_chinese(capsys):
    ok, out = run_checker(ex.check_causal_mask, lambda n: sys.exit(), capsys, lang="zh")
    assert not ok and _said("harness.exit", out, "zh")


# ---------------------------------------------------------------- a function that never returns
@pytest.fixture
def small_time_limit(monkeypatch):
    monkeypatch.setattr(_guard, "TIME_LIMIT_S", 0.2)


@pytest.fixture
def never_set():
    event = threading.Event()
    yield event
    event.set()  # lets a call left running in a thread (see below) finish


def test_a_call_that_never_returns_gets_a_time_limit_verdict(small_time_limit, never_set,
                                                             capsys):
    def waits(length):
        never_set.wait()

    ok, out = run_checker(ex.check_causal_mask, waits, capsys)
    assert not ok and _said("harness.timeout", out) and "0.2 s" in out


def test_an_endless_loop_that_swallows_exceptions_is_still_stopped(small_time_limit, capsys):
    def spins(q, k, v, mask=None):
        while True:
            try:
                pass
            except Exception:  # the time limit is not an Exception: not swallowed here
                pass

    ok, out = run_checker(ex.check_scaled_dot_product_attention, spins, capsys, lang="zh")
    assert not ok and _said("harness.timeout", out, "zh")


def test_the_time_limit_works_outside_the_main_thread(small_time_limit, never_set, capsys):
    """No signals there: the call runs in a thread that is given up."""
    def waits(length):
        never_set.wait()

    verdict = []
    worker = threading.Thread(target=lambda: verdict.append(ex.check_causal_mask(waits)))
    worker.start()
    worker.join()
    out = capsys.readouterr().out
    assert verdict == [False] and _said("harness.timeout", out), out


def test_the_time_limit_leaves_no_alarm_behind(capsys):
    handler = signal.getsignal(signal.SIGALRM)
    assert run_checker(ex.check_causal_mask, causal_ok, capsys)[0]
    assert signal.getsignal(signal.SIGALRM) is handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_right_answer_that_takes_its_time_passes_under_the_limit(capsys):
    """The default limit leaves room: a correct but slow (Python-loop) answer passes."""
    def causal_loops(length):
        mask = torch.zeros(length, length, dtype=torch.bool)
        for i in range(length):
            for j in range(i + 1):
                mask[i, j] = True
        return mask

    assert run_checker(ex.check_causal_mask, causal_loops, capsys)[0]


# ---------------------------------------------------------------- state put back
def test_state_changed_by_the_readers_function_is_put_back(capsys):
    def meddles(length):
        torch.manual_seed(1234)
        random.seed(1234)
        np.random.seed(1234)
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.set_num_threads(1 if torch.get_num_threads() > 1 else 2)
        return causal_ok(length)

    def draws():
        return torch.rand(3).tolist(), random.random(), float(np.random.rand())

    def seed():
        torch.manual_seed(7)
        random.seed(7)
        np.random.seed(7)

    seed()
    expected = draws()
    seed()
    threads = torch.get_num_threads()
    assert run_checker(ex.check_causal_mask, meddles, capsys)[0]
    assert draws() == expected
    assert torch.get_default_dtype() == torch.float32
    assert torch.is_grad_enabled()
    assert torch.get_num_threads() == threads


def test_a_changed_default_dtype_does_not_leak_into_later_cases(capsys):
    """The first call sets float64 as the default; the reference of every later
    case still builds float32 tensors, so a right float32 answer passes."""
    def sets_float64_then_answers(max_len, d_model):
        torch.set_default_dtype(torch.float64)
        return sinusoidal_table(max_len, d_model).float()

    assert run_checker(ex.check_sinusoidal_encoding, sets_float64_then_answers, capsys)[0]
    assert torch.get_default_dtype() == torch.float32


def test_a_random_answer_is_still_seen_to_be_random(capsys):
    """The random states are put back once, after the whole check, so that
    dropout still differs from one call to the next inside it."""
    def dropout_mask(length):
        return causal_ok(length) & (torch.rand(length, length) < 0.5)

    torch.manual_seed(0)
    ok, out = run_checker(ex.check_causal_mask, dropout_mask, capsys)
    assert not ok and _said("harness.random", out), out
