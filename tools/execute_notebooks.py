"""Execute notebooks on a fresh kernel, store their outputs and stamp what produced them.

    python tools/execute_notebooks.py                        # every chapter
    python tools/execute_notebooks.py notebooks/03_*.ipynb   # some chapters
    python tools/execute_notebooks.py --check                # list stale chapters (exit 1 if any)
    python tools/execute_notebooks.py --stale                # execute only the stale ones
    python tools/execute_notebooks.py --quick notebooks/04_*.ipynb  # smoke run, left unstamped

(``make execute``, ``make execute NOTEBOOKS=notebooks/03_qkv_and_masks.ipynb``,
``make execute-stale`` and ``make stale`` run the same.) Each notebook runs
top to bottom with ``notebooks/`` as its working directory, as in Jupyter,
nbval and Colab, with a progress bar over its code cells; a notebook whose
execution fails is left as it was and the tool moves on to the next one (exit
status 1 at the end). ``MINITRANSFORMER_QUICK`` is refused: stored outputs
come from the full run.

**The stamp.** After a successful run the notebook's metadata gets
``"minitransformer": {"code": ..., "package": {...}, "seconds": ...}``: a
hash of its code cells, a hash per file of the package, and the run's wall
time. A notebook is *stale* when either hash no longer matches the working
tree, and ``tests/test_notebook_freshness.py`` then fails, naming the
notebook and the command that refreshes it. What is hashed decides what
forces a re-run, so it is meant to be strict where outputs can change and
blind where they cannot:

- **Code cells**: each cell's syntax tree (``ast``), so comments, blank lines
  and line wrapping do not count, but any change to what runs does; plus a
  final ``;`` (it hides the cell's value). The Colab install cell is left
  out: it does nothing outside Colab. Markdown cells are left out: prose does
  not change outputs (``tools/check_prose_numbers.py`` checks the prose
  against them instead).
- **The package**: every file under ``minitransformer/``. Python modules are
  hashed as their syntax tree without docstrings, so editing a docstring or a
  comment does not force re-running twelve minutes of chapter 10, while any
  change to code does, in any module (``import minitransformer`` loads nearly
  all of them, so a finer import analysis would buy little). Every other
  file there (``results/*.json``, the plotting style ``book.mplstyle``) is
  data the chapters read and is hashed byte for byte. Exception: a notebook
  whose code calls ``inspect.getsource`` prints package source, comments and
  docstrings included, so for it the modules are hashed as text.
- **Not hashed**: the installed libraries, the machine, the Multi30k corpus,
  ``tests/``, ``benchmarks/`` and ``tools/``. The syntax tree is written out
  in a form that does not depend on the Python version (``_canonical``), so
  a stamp made on Python 3.11 holds on 3.13 (Colab's) and back.

Re-execute on an otherwise idle machine when a chapter measures time. After
a run the Chinese edition is regenerated (``tools/make_chinese_edition.py``):
its notebooks carry the same outputs.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import os
import sys
import time
import tokenize
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from tqdm.auto import tqdm

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minitransformer"
NOTEBOOKS = ROOT / "notebooks"
#: Key of the stamp in a notebook's metadata.
STAMP_KEY = "minitransformer"
_DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync_colab_cell import is_colab_cell  # noqa: E402


def _digest(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:16]


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, _DOC_OWNERS) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def _ends_with_semicolon(source: str) -> bool:
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE,
                                    tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)]
    except (tokenize.TokenError, SyntaxError):
        return source.rstrip().endswith(";")
    return bool(tokens) and tokens[-1].string == ";"


def normalised_code(source: str, docstrings: bool = True) -> str:
    """``source`` as its syntax tree written out (comments and layout gone).

    With ``docstrings=False`` docstrings go too. Source that does not parse
    (e.g. an IPython magic) is returned as it is.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    if not docstrings:
        tree = _strip_docstrings(tree)
    return _canonical(tree) + (";" if _ends_with_semicolon(source) else "")


def _canonical(node: object) -> str:
    """A syntax tree as text that every Python from 3.10 on spells the same: each node's
    type and its fields that are not empty. (``ast.unparse`` quotes f-strings differently
    from 3.12 on, and ``ast.dump`` shows or omits empty fields depending on the version.)"""
    if isinstance(node, ast.AST):
        fields = ", ".join(f"{name}={_canonical(value)}" for name, value in ast.iter_fields(node)
                           if value is not None and value != [])
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ", ".join(_canonical(item) for item in node) + "]"
    return repr(node)


def code_hash(nb) -> str:
    """Hash of a notebook's code cells (see the module docstring for what counts)."""
    cells = [normalised_code(c.source) for c in nb.cells
             if c.cell_type == "code" and not is_colab_cell(c)]
    return _digest("\n\x00\n".join(cells))


def prints_package_source(nb) -> bool:
    """Whether the notebook's code shows package source (``inspect.getsource``)."""
    return any(c.cell_type == "code" and "getsource" in c.source for c in nb.cells)


def package_hashes(as_text: bool = False, package: Path = PACKAGE) -> dict[str, str]:
    """``{path relative to the repository: hash}`` for every file of the package.

    Modules are hashed as their syntax tree without docstrings (as text with
    ``as_text=True``), other files byte for byte.
    """
    hashes = {}
    for path in sorted(package.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        data = path.read_bytes()
        if path.suffix == ".py" and not as_text:
            data = normalised_code(data.decode(), docstrings=False).encode()
        hashes[path.relative_to(package.parent).as_posix()] = _digest(data)
    return hashes


def stamp(nb, package: Path = PACKAGE) -> dict:
    """The stamp ``nb`` would get if it were executed now (without ``seconds``)."""
    return {"code": code_hash(nb),
            "package": package_hashes(prints_package_source(nb), package)}


def stale_reasons(nb, package: Path = PACKAGE) -> list[str]:
    """Why ``nb``'s stored outputs are out of date; empty when they are fresh."""
    old = nb.metadata.get(STAMP_KEY)
    if not old or "code" not in old or "package" not in old:
        return ["it has no stamp: it was not executed by tools/execute_notebooks.py "
                "since stamps were introduced (or with --quick)"]
    new = stamp(nb, package)
    reasons = []
    if old["code"] != new["code"]:
        reasons.append("its code cells changed")
    changed = sorted(p for p in old["package"].keys() | new["package"].keys()
                     if old["package"].get(p) != new["package"].get(p))
    if changed:
        more = f" and {len(changed) - 6} more" if len(changed) > 6 else ""
        shown = ", ".join(changed[:6]) + more
        reasons.append(f"package files changed: {shown}")
    return reasons


def refresh_command(path: Path) -> str:
    """The command that re-executes one notebook and stamps it."""
    try:
        path = path.resolve().relative_to(ROOT)
    except ValueError:
        pass
    return f"make execute NOTEBOOKS={path.as_posix()}"


def describe_stale(path: Path, nb) -> str | None:
    """One paragraph saying why ``path`` is stale and how to refresh it; None if fresh."""
    reasons = stale_reasons(nb)
    if not reasons:
        return None
    seconds = nb.metadata.get(STAMP_KEY, {}).get("seconds")
    last = f" (the last full run took {seconds:.0f} s)" if seconds else ""
    return (f"{path.name}: stored outputs are stale: {'; '.join(reasons)}.\n"
            f"  refresh on an idle machine: {refresh_command(path)}{last}")


def execute(path: Path, timeout: int, quick: bool = False) -> float:
    """Run ``path`` top to bottom, write it back with its outputs and stamp; return seconds.

    Raises nbclient's ``CellExecutionError`` (or a timeout or dead-kernel error)
    and leaves the file untouched if a cell fails.
    """
    nb = nbformat.read(path, as_version=4)
    before = stamp(nb)
    code_cells = sum(c.cell_type == "code" for c in nb.cells)
    bar = tqdm(total=code_cells, desc=path.stem, unit="cell", leave=False, file=sys.stderr)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            on_cell_executed=lambda **_: bar.update())
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    nb.metadata.pop(STAMP_KEY, None)
    if quick:
        print(f"  {path.name}: quick run, left without a stamp (so it counts as stale)")
    elif stamp(nb) != before:
        print(f"  {path.name}: the package changed during the run; left without a stamp")
    else:
        nb.metadata[STAMP_KEY] = {**before, "seconds": round(seconds, 1)}
    nbformat.write(nb, path)
    return seconds


def _minutes(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="execute nothing; list stale notebooks and exit 1 if there are any")
    mode.add_argument("--stale", action="store_true", help="execute only the stale notebooks")
    mode.add_argument("--quick", action="store_true",
                      help="run with MINITRANSFORMER_QUICK=1 and leave the notebooks unstamped")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")

    if args.check or args.stale:
        stale = []
        for path in paths:
            message = describe_stale(path, nbformat.read(path, as_version=4))
            if message:
                stale.append(path)
                if args.check:
                    print(message)
        if args.check:
            print(f"{len(stale)} of {len(paths)} notebooks stale" if stale
                  else f"all {len(paths)} notebooks fresh")
            return 1 if stale else 0
        if not stale:
            print(f"all {len(paths)} notebooks fresh; nothing to execute")
            return 0
        paths = stale

    if args.quick:
        os.environ["MINITRANSFORMER_QUICK"] = "1"
    elif os.environ.get("MINITRANSFORMER_QUICK") == "1":
        parser.error("MINITRANSFORMER_QUICK=1 is set: stored outputs must come from the full run; "
                     "unset it, or pass --quick for an unstamped smoke run")
    failed, total = [], 0.0
    for i, path in enumerate(paths, 1):
        print(f"[{i}/{len(paths)}] {path.name} ...", flush=True)
        try:
            seconds = execute(path, args.timeout, quick=args.quick)
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
            failed.append(path.name)
            summary = str(error).strip().splitlines()
            print(f"  {path.name}: FAILED, left unchanged:\n    " + "\n    ".join(summary[-6:]),
                  flush=True)
            continue
        total += seconds
        print(f"  {path.name}: {_minutes(seconds)}", flush=True)
    done = len(paths) - len(failed)
    print(f"executed {done} of {len(paths)} notebooks in {_minutes(total)}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    if done:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import make_chinese_edition

        make_chinese_edition.main([])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
