"""The notebook stamp of tools/execute_notebooks.py: what makes stored outputs stale."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import execute_notebooks as ex  # noqa: E402
from sync_colab_cell import COLAB_CELL  # noqa: E402

MODULE = '''"""A module docstring."""

import math


def area(r):
    """Area of a circle."""
    # pi r squared
    return math.pi * r ** 2
'''


def notebook(*code: str, markdown: str = "Some prose: 0.5.") -> nbformat.NotebookNode:
    cells = [nbformat.v4.new_code_cell(COLAB_CELL), nbformat.v4.new_markdown_cell(markdown)]
    cells += [nbformat.v4.new_code_cell(c) for c in code]
    return nbformat.v4.new_notebook(cells=cells)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    pkg = tmp_path / "minitransformer"
    (pkg / "results").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Package."""\n')
    (pkg / "geometry.py").write_text(MODULE)
    (pkg / "results" / "numbers.json").write_text('{"bleu": 30.8}\n')
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "geometry.cpython-311.pyc").write_bytes(b"\x00junk")
    return pkg


def stamped(nb, package: Path):
    nb.metadata[ex.STAMP_KEY] = {**ex.stamp(nb, package), "seconds": 1.0}
    return nb


def test_code_hash_ignores_comments_layout_prose_and_the_colab_cell():
    base = ex.code_hash(notebook("x = f(1, 2)\nprint(x)"))
    same = [
        notebook("# a comment\nx = f(1,\n      2)  # why\n\nprint(x)"),
        notebook("x = f(1, 2)\nprint(x)", markdown="Other prose: 0.7."),
    ]
    for nb in same:
        assert ex.code_hash(nb) == base
    other_colab = notebook("x = f(1, 2)\nprint(x)")
    other_colab.cells[0].source = COLAB_CELL.replace("@v0.1.0", "@v9.9.9")
    assert ex.code_hash(other_colab) == base
    different = [
        notebook("x = f(1, 3)\nprint(x)"),
        notebook("x = f(1, 2)\nprint(x);"),  # the semicolon hides the cell's value
        notebook("x = f(1, 2)", "print(x)"),  # cut into two cells: two outputs
        notebook("x = f(1, 2)\nprint(x)", "pass"),
    ]
    for nb in different:
        assert ex.code_hash(nb) != base
    # a cell that does not parse (an IPython magic) is hashed as text
    assert ex.code_hash(notebook("%time f(1)")) != ex.code_hash(notebook("%time f(2)"))


def test_package_hash_ignores_docstrings_and_comments_but_not_code_or_data(package: Path):
    base = ex.package_hashes(package=package)
    assert sorted(base) == ["minitransformer/__init__.py", "minitransformer/geometry.py",
                            "minitransformer/results/numbers.json"]  # no __pycache__
    as_text = ex.package_hashes(as_text=True, package=package)
    module = package / "geometry.py"
    module.write_text(MODULE.replace("Area of a circle.", "The area of a disc.")
                      .replace("# pi r squared", "# r squared times pi"))
    assert ex.package_hashes(package=package) == base
    assert ex.package_hashes(as_text=True, package=package) != as_text
    module.write_text(MODULE.replace("r ** 2", "r * r"))
    changed = ex.package_hashes(package=package)
    assert [p for p in base if base[p] != changed[p]] == ["minitransformer/geometry.py"]
    module.write_text(MODULE)
    (package / "results" / "numbers.json").write_text('{"bleu": 30.9}\n')
    changed = ex.package_hashes(package=package)
    assert [p for p in base if base[p] != changed[p]] == ["minitransformer/results/numbers.json"]


def test_a_function_left_with_only_a_docstring_still_parses(package: Path):
    (package / "geometry.py").write_text('def f():\n    """Only a docstring."""\n')
    assert ex.package_hashes(package=package)["minitransformer/geometry.py"]


def test_notebooks_that_print_package_source_hash_it_as_text(package: Path):
    printing = stamped(notebook("import inspect\nprint(inspect.getsource(area))"), package)
    plain = stamped(notebook("print(area(1))"), package)
    module = package / "geometry.py"
    module.write_text(MODULE.replace("Area of a circle.", "The area of a disc."))
    assert ex.stale_reasons(plain, package) == []
    assert ex.stale_reasons(printing, package) == [
        "package files changed: minitransformer/geometry.py"]


def test_stale_reasons(package: Path):
    nb = notebook("print(1)")
    assert "no stamp" in ex.stale_reasons(nb, package)[0]
    stamped(nb, package)
    assert ex.stale_reasons(nb, package) == []
    nb.cells[1].source = "New prose."
    nb.cells[2].source = "print(1)  # one"
    assert ex.stale_reasons(nb, package) == []
    nb.cells[2].source = "print(2)"
    assert ex.stale_reasons(nb, package) == ["its code cells changed"]
    nb.cells[2].source = "print(1)"
    (package / "new_module.py").write_text("X = 1\n")
    (package / "geometry.py").unlink()
    assert ex.stale_reasons(nb, package) == [
        "package files changed: minitransformer/geometry.py, minitransformer/new_module.py"]


def test_describe_stale_names_the_notebook_and_the_command():
    path = ROOT / "notebooks" / "03_qkv_and_masks.ipynb"
    message = ex.describe_stale(path, notebook("print(1)"))
    assert message.startswith("03_qkv_and_masks.ipynb: stored outputs are stale: it has no stamp")
    assert "make execute NOTEBOOKS=notebooks/03_qkv_and_masks.ipynb" in message


@pytest.mark.slow
def test_execute_stamps_and_check_reports(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.delenv("MINITRANSFORMER_QUICK", raising=False)
    path = tmp_path / "notebooks" / "01_tiny.ipynb"
    path.parent.mkdir()
    nbformat.write(notebook("import os\nprint(os.getcwd() == os.path.abspath('.'), 6 * 7)"), path)
    pristine = path.read_text()
    assert ex.main(["--check", str(path)]) == 1
    assert ex.main(["--stale", str(path)]) == 0
    out = capsys.readouterr().out
    assert "[1/1] 01_tiny.ipynb" in out and "executed 1 of 1 notebooks" in out
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[2].outputs[0]["text"] == "True 42\n"
    assert nb.metadata[ex.STAMP_KEY]["code"] == ex.code_hash(nb)
    assert nb.metadata[ex.STAMP_KEY]["seconds"] > 0
    assert ex.main(["--check", str(path)]) == 0
    assert "all 1 notebooks fresh" in capsys.readouterr().out
    assert ex.main(["--stale", str(path)]) == 0
    assert "nothing to execute" in capsys.readouterr().out
    # the file is plain nbformat JSON (one-space indent, trailing newline), like the input
    assert path.read_text().endswith("}\n") and json.loads(pristine)["cells"]

    # a failing cell leaves the notebook as it was and fails the run
    shutil.copy(path, tmp_path / "before.ipynb")
    nb.cells[2].source = "raise RuntimeError('boom')"
    nbformat.write(nb, path)
    failing = path.read_text()
    assert ex.main([str(path)]) == 1
    assert "FAILED, left unchanged" in capsys.readouterr().out
    assert path.read_text() == failing

    # a quick run leaves no stamp, so the notebook counts as stale
    nbformat.write(nbformat.read(tmp_path / "before.ipynb", as_version=4), path)
    assert ex.main(["--quick", str(path)]) == 0
    assert ex.STAMP_KEY not in nbformat.read(path, as_version=4).metadata
    assert ex.main(["--check", str(path)]) == 1


def test_quick_mode_is_refused_for_stored_outputs(monkeypatch, capsys):
    monkeypatch.setenv("MINITRANSFORMER_QUICK", "1")
    with pytest.raises(SystemExit):
        ex.main([str(ROOT / "notebooks" / "00_overview.ipynb")])
    assert "must come from the full run" in capsys.readouterr().err
