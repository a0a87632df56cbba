"""What a chapter's check cells print in another language, for the Chinese edition's outputs.

A *check cell* is a code cell that calls a checker of ``minitransformer.exercises``
(``check_causal_mask(my_causal_mask)``). Its stored output in the English notebook
is the checker's verdict in English; a Chinese chapter sets the checkers'
language (``make_chinese_edition.LANGUAGE_CELL``), so run there the same cell
prints the verdict in Chinese, and that is what the Chinese notebook must store.

:func:`check_cell_outputs` re-runs a notebook's check cells in a language,
without a kernel and without running the rest of the chapter: in one fresh
namespace it runs, in order, the imports and function definitions at the top
level of every code cell (definitions only: no other statement of a cell that
is not a check cell runs), and every check cell in full, capturing what each
check cell prints. The exercise functions the check cells pass are defined
in the check cell itself or in a cell of definitions (chapter 9's solutions),
so they are the notebook's own code (a definition that cannot run on its own,
e.g. one whose default argument is a value computed in the chapter, is
skipped). A check cell that needs a value computed elsewhere in the chapter
raises a NameError, or its function does and fails the check: the generator
compares the verdicts with the stored English ones (:func:`same_verdicts`)
and stops, naming the cell, rather than store a verdict the chapter would not
print.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import warnings
from functools import cache

#: A call of a checker: ``check_causal_mask(``.
CHECK_CALL = re.compile(r"^\s*check_\w+\(", re.MULTILINE)


def is_check_cell(source: str) -> bool:
    """Whether a code cell's ``source`` calls a checker at the start of a line."""
    return bool(CHECK_CALL.search(source))


def _definitions(source: str) -> list[str]:
    """The imports and function definitions at the top level of ``source``, one by one (a
    cell that does not parse as Python, e.g. with ``%magic``, gives none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef)
    return [ast.get_source_segment(source, node) for node in tree.body if isinstance(node, keep)]


@cache
def _run(cells: tuple[tuple[str, str], ...], lang: str) -> dict[str, str]:
    from minitransformer.exercises._messages import using_language

    namespace: dict = {"__name__": "__main__"}
    printed: dict[str, str] = {}
    with using_language(lang), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cell_id, source in cells:
            if not is_check_cell(source):
                for definition in _definitions(source):
                    try:  # e.g. a default argument that names a value of the chapter
                        exec(compile(definition, f"<cell {cell_id}>", "exec"), namespace)
                    except NameError:
                        pass  # a check cell that needs it fails below, and says so
                continue
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(source, f"<cell {cell_id}>", "exec"), namespace)
            except Exception as error:
                raise RuntimeError(
                    f"check cell {cell_id} fails when run on its own ({type(error).__name__}: "
                    f"{error}); tools/exercise_verdicts.py runs only the chapter's imports and "
                    "function definitions before it") from error
            printed[cell_id] = out.getvalue()
    return printed


def check_cell_outputs(nb, lang: str) -> dict[str, str]:
    """What each check cell of ``nb`` (an nbformat notebook) prints with the checkers set to
    ``lang``, by cell id. Results are cached by the cells' code and ``lang``."""
    cells = tuple((c.id, c.source) for c in nb.cells if c.cell_type == "code")
    if not any(is_check_cell(source) for _, source in cells):
        return {}
    return _run(cells, lang)


#: The start of a verdict: its mark and the checker's name (``✗ causal_mask: ``).
VERDICT = re.compile(r"^[✓✗] \w+: ", re.MULTILINE)


def printed(outputs: list) -> str:
    """What a cell's stored ``outputs`` printed to stdout."""
    return "".join(o.get("text", "") if isinstance(o.get("text"), str) else "".join(o["text"])
                   for o in outputs
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")


def same_verdicts(stored: str, rerun: str, cell_id: str) -> None:
    """Raise unless the re-run of check cell ``cell_id`` gave the verdicts of its stored
    output (the same checkers passing and failing, in order), and met no name the chapter
    defines elsewhere (a NameError its stored output does not show): else the re-run is not
    what the chapter prints."""
    if stored and (VERDICT.findall(stored) != VERDICT.findall(rerun)
                   or ("NameError" in rerun and "NameError" not in stored)):
        raise RuntimeError(
            f"check cell {cell_id} gives other verdicts when run on its own than its stored "
            f"output ({VERDICT.findall(rerun)}, stored {VERDICT.findall(stored)}):\n{rerun}"
            "tools/exercise_verdicts.py runs only the chapter's imports and function "
            "definitions before a check cell; define what it needs there")


def with_printed(outputs: list, text: str) -> list:
    """``outputs`` of a cell with what it printed to stdout replaced by ``text``: the first
    stdout stream gets ``text`` (or goes, if ``text`` is empty), later ones go; other
    outputs (stderr, results, figures) stay as they are."""
    new, done = [], False
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            if not done and text:
                replaced = type(output)(output)
                replaced["text"] = text
                new.append(replaced)
            done = True
            continue
        new.append(output)
    return new
