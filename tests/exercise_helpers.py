"""Helpers for the exercise-checker tests: run a checker on a reader's
function and assert its verdict."""

from __future__ import annotations

import re

#: Chinese characters and full-width punctuation: a wrapped verdict may break between them.
_WIDE = "\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"


def run_checker(checker, fn, capsys, **kwargs):
    """(returned bool, printed verdict) of ``checker(fn)``."""
    ok = checker(fn, **kwargs)
    out = capsys.readouterr().out
    assert isinstance(ok, bool)
    assert out.strip(), "a checker must print its verdict"
    return ok, out


def flat(text: str) -> str:
    """Verdicts are wrapped to 88 columns: compare with whitespace collapsed,
    and with no space beside a Chinese character (Chinese lines break between
    characters, which the collapsing would turn into a space)."""
    text = " ".join(text.split())
    return re.sub(f" (?=[{_WIDE}])|(?<=[{_WIDE}]) ", "", text)


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
