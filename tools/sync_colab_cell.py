"""Make the first cell of every chapter the canonical Colab install cell.

    python tools/sync_colab_cell.py            # rewrite notebooks/*.ipynb in place
    python tools/sync_colab_cell.py --check    # only report (exit 1 if any differs)
    python tools/sync_colab_cell.py notebooks/03_qkv_and_masks.ipynb

``COLAB_CELL`` is the one source of the cell's text (CONTRIBUTING.md shows
the same text, and ``tests/test_notebook_conventions.py`` checks both). On
Colab it installs the package from the repository at the tag ``REF`` the
book is published from; elsewhere (a local clone with the package
installed) it does nothing.

A notebook whose first cell is already a Colab cell (a code cell mentioning
``google.colab``) has that cell's source replaced and its outputs cleared;
otherwise the cell is inserted at the top. Placeholder chapters (no code
cell yet) are left alone. Re-run ``tools/execute_notebooks.py`` afterwards
only if you want fresh execution counts; the cell prints nothing locally.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
#: The GitHub repository the book and the package live in (as in _config.yml).
REPOSITORY = "https://github.com/minitransformer/minitransformer"
#: The git tag Colab installs: ``v`` + the package version in pyproject.toml.
REF = "v0.1.0"

#: ``REPOSITORY`` cut after its host (``https://github.com/`` and ``owner/name``): the
#: cell writes the URL as two adjacent string literals, so that no line of it is wider
#: than the page's code column (76 characters, tools/format_notebooks.py).
_HOST, _PATH = REPOSITORY.rsplit("/", 2)[0] + "/", "/".join(REPOSITORY.rsplit("/", 2)[1:])

COLAB_CELL = f"""\
# On Colab, install the book's package; elsewhere (a local clone) this
# does nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q",
         "minitransformer @ git+{_HOST}"
         "{_PATH}@{REF}"],
        check=True,
    )"""


def is_colab_cell(cell) -> bool:
    return cell.cell_type == "code" and "google.colab" in cell.source


def is_placeholder(nb) -> bool:
    """A chapter not written yet: no code cell at all."""
    return not any(cell.cell_type == "code" for cell in nb.cells)


def sync(nb) -> bool:
    """Put ``COLAB_CELL`` first in ``nb``; return True if ``nb`` changed."""
    if is_placeholder(nb):
        return False
    if nb.cells and is_colab_cell(nb.cells[0]):
        cell = nb.cells[0]
        if cell.source == COLAB_CELL and not cell.outputs:
            return False
        cell.source = COLAB_CELL
        cell.outputs = []
        return True
    nb.cells.insert(0, nbformat.v4.new_code_cell(COLAB_CELL))
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--check", action="store_true", help="report only; exit 1 on a difference")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    differ = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if sync(nb):
            differ.append(path)
            if not args.check:
                nbformat.write(nb, path)
    verb = "differ" if args.check else "rewritten"
    for path in differ:
        print(f"{path}: {verb}")
    print(f"{len(differ)} of {len(paths)} notebooks {verb}")
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
