"""Every number a chapter's prose states is shown by that chapter's outputs.

``tools/check_prose_numbers.py`` says what counts as a measured number, how
loosely it matches (rounding, percentages, thousands separators) and how to
mark a literature constant: ``<!-- not measured: 28.4 (the paper's Table 2) -->``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import check_prose_numbers as prose  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_prose_numbers_come_from_outputs(path: Path):
    violations, _ = prose.check_notebook(path)
    assert not violations, (
        f"{len(violations)} number(s) in {path.name}'s prose are not shown by its outputs "
        "(print them, or mark a literature constant with <!-- not measured: N (reason) -->; "
        "see tools/check_prose_numbers.py):\n" + "\n".join(map(str, violations))
    )
