"""Helpers for the exercise-checker tests: run a checker on a reader's
function and assert its verdict."""

from __future__ import annotations


def run_checker(checker, fn, capsys, **kwargs):
    """(returned bool, printed verdict) of ``checker(fn)``."""
    ok = checker(fn, **kwargs)
    out = capsys.readouterr().out
    assert isinstance(ok, bool)
    assert out.strip(), "a checker must print its verdict"
    return ok, out


def flat(text: str) -> str:
    """Verdicts are wrapped to 88 columns: compare with whitespace collapsed."""
    return " ".join(text.split())


def assert_passes(checker, fn, capsys):
    ok, out = run_checker(checker, fn, capsys)
    assert ok, out
    assert "✓" in out and "✗" not in out


def assert_hint(checker, fn, fragment, capsys):
    """The checker rejects ``fn`` and its hint contains ``fragment``."""
    ok, out = run_checker(checker, fn, capsys)
    assert not ok, out
    assert "✗" in out
    assert flat(fragment) in flat(out), f"expected a hint containing {fragment!r}, got:\n{out}"
