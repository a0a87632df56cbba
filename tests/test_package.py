"""The package's public surface."""

import re
from pathlib import Path

import minitransformer as mt


def test_every_exported_name_exists_and_is_documented():
    missing = [n for n in mt.__all__ if not hasattr(mt, n)]
    assert not missing, missing
    undocumented = [
        n for n in mt.__all__ if callable(getattr(mt, n)) and not getattr(mt, n).__doc__
    ]
    assert not undocumented, undocumented


def test_version_matches_pyproject():
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == mt.__version__
