"""The chapters' checked exercises: the page shows a stub, the solution is
folded, and the folded solution passes its checker.

A checked exercise is a code cell that defines a function whose body is only
``raise NotImplementedError`` and passes it to a checker of
:mod:`minitransformer.exercises` (``check_layer_norm(layer_norm_mine)``); its
solution is a ```` ```python ```` block inside the ``{solution}`` dropdown
that defines a function of the same name. Here every such solution is run
through its checker, so a solution that stops passing (because the package,
the checker or the solution changed) fails CI instead of misleading a
reader; and a function handed to a checker must be a stub, so that no page
prints an answer.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

import minitransformer.exercises as exercises

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Chapters whose stubs do not all have a folded solution yet (issue 13 asks
# for one under every stub). Remove a chapter from this list once it does.
SOLUTIONS_NOT_YET_WRITTEN: set[str] = set()

CHECK_CALL = re.compile(r"\b(check_\w+)\(\s*(\w+)\s*[,)]")
# A {solution} directive fenced with backticks or colons, up to its closing fence.
SOLUTION = re.compile(r"^(?P<fence>`{3,}|:{3,})\{solution\}[^\n]*\n(?P<body>.*?)^(?P=fence)\s*$",
                      re.M | re.S)
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _is_stub(fn: ast.FunctionDef) -> bool:
    """The body is ``raise NotImplementedError`` (optionally with a message),
    after an optional docstring."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    exc = body[0].exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: not an exercise cell
        return {}
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def checked_exercises(path: Path) -> list[dict]:
    """Every function handed to a checker in ``path``: its name, the checker,
    whether the page defines it as a stub, and the solution code (or None)."""
    nb = nbformat.read(path, as_version=4)
    found: dict[str, dict] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        defined = _functions(cell.source)
        for checker, name in CHECK_CALL.findall(cell.source):
            if not hasattr(exercises, checker) or name not in defined:
                continue
            found[name] = {"name": name, "checker": checker,
                           "stub": _is_stub(defined[name]), "solution": None}
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for match in SOLUTION.finditer(cell.source):
            for code in PYTHON_BLOCK.findall(match.group("body")):
                for name in _functions(code):
                    if name in found:
                        found[name]["solution"] = code
    return list(found.values())


CASES = [(path.name, ex) for path in NOTEBOOKS for ex in checked_exercises(path)]


def test_the_exercises_are_found():
    """The parser sees chapter 9's thirteen checked exercises (a guard against
    a regex that silently finds nothing)."""
    names = [ex["name"] for nb, ex in CASES if nb == "09_interview_questions.ipynb"]
    assert len(names) == 13, names


@pytest.mark.parametrize("notebook, exercise", CASES,
                         ids=[f"{nb}:{ex['name']}" for nb, ex in CASES])
def test_the_page_shows_a_stub(notebook, exercise):
    assert exercise["stub"], (
        f"{notebook}: {exercise['name']} is handed to {exercise['checker']} with a body: "
        "the page would print the answer; make it `raise NotImplementedError` and "
        "put the answer in a {solution} dropdown")


@pytest.mark.parametrize("notebook", [p.name for p in NOTEBOOKS])
def test_every_stub_has_a_folded_solution(notebook):
    if notebook in SOLUTIONS_NOT_YET_WRITTEN:
        pytest.skip("solutions not yet written (issue 13)")
    missing = [ex["name"] for nb, ex in CASES if nb == notebook and ex["solution"] is None]
    assert not missing, (
        f"{notebook}: no ```python block in a {{solution}} dropdown defines {missing}")


WITH_SOLUTION = [(nb, ex) for nb, ex in CASES if ex["solution"] is not None]


@pytest.mark.parametrize("notebook, exercise", WITH_SOLUTION,
                         ids=[f"{nb}:{ex['name']}" for nb, ex in WITH_SOLUTION])
def test_the_folded_solution_passes_its_checker(notebook, exercise, capsys):
    namespace = {"math": math, "torch": torch, "F": F, "nn": torch.nn}
    exec(compile(exercise["solution"], f"{notebook}:{exercise['name']}", "exec"), namespace)
    checker = getattr(exercises, exercise["checker"])
    ok = checker(namespace[exercise["name"]])
    verdict = capsys.readouterr().out
    assert ok, f"{notebook}: the solution of {exercise['name']} fails its check:\n{verdict}"
