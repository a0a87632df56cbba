"""Every chapter's stored outputs come from its current code and package.

``tools/execute_notebooks.py`` stamps a notebook when it executes it (a hash
of its code cells and of the package; see that tool's docstring for what
counts). A notebook whose stamp no longer matches shows outputs of other
code: re-execute it with the command the failure prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import execute_notebooks as ex  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 11


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_are_fresh(path: Path):
    message = ex.describe_stale(path, nbformat.read(path, as_version=4))
    assert message is None, message

