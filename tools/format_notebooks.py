"""Format the chapters' code cells to the width of the book's text column.

    python tools/format_notebooks.py            # reformat notebooks/*.ipynb in place
    python tools/format_notebooks.py --check    # change nothing; list lines that are too long
    python tools/format_notebooks.py notebooks/03_qkv_and_masks.ipynb
    python tools/format_notebooks.py --check --outputs  # also stored outputs wider than it

The web page's code column holds :data:`CODE_COLUMNS` characters of the
theme's monospace font at 1280 px (measured in Chromium on the built book;
``tests/test_browser.py`` checks that no code block scrolls sideways). Each
code cell is run through ``ruff format --line-length CODE_COLUMNS`` (layout
only: the notebooks' freshness stamp hashes code as syntax trees, so a
reformatted notebook stays fresh). The first cell, the canonical Colab cell
(``tools/sync_colab_cell.py``), is hidden on the pages and left as it is; so
is a cell that is not plain Python (an IPython magic). ``ruff`` does not
break comments or strings: ``--check`` lists every line still too long, to be
broken by hand (``tests/test_notebook_conventions.py`` fails on them).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from execute_notebooks import _ends_with_semicolon, normalised_code  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: Characters of code a line of the page's code column shows without scrolling (77 at
#: 1280 px with sphinx-book-theme's monospace font); one kept spare.
CODE_COLUMNS = 76
#: The first line of the canonical Colab cell (tools/sync_colab_cell.py), never reformatted.
COLAB_CELL_START = "# On Colab, install the book's package"


def _ruff() -> str:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        raise SystemExit("ruff is not installed (pip install ruff)")
    return found


def format_source(source: str, width: int = CODE_COLUMNS) -> str | None:
    """``source`` formatted by ruff at ``width`` columns, or None when ruff cannot parse it."""
    result = subprocess.run(
        [_ruff(), "format", "--line-length", str(width), "--stdin-filename", "cell.py", "-"],
        input=source, capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        return None
    # ruff ends a file with a newline; a notebook cell's source has none. It drops a cell's
    # last semicolon, which in a notebook hides the value of the last line: put it back.
    new = result.stdout.rstrip("\n")
    if _ends_with_semicolon(source) and not _ends_with_semicolon(new):
        new += ";"
    return new


def _split_point(body: str, room: int, fstring: bool) -> int | None:
    """Where to cut a string literal's body (after a space, outside f-string braces) so that
    its first part has at most ``room`` characters; None when there is no such place."""
    depth, best, i = 0, None, 0
    while i < len(body) and i < room:
        ch = body[i]
        if fstring and body.startswith(("{{", "}}"), i):
            i += 2
            continue
        if fstring and ch == "{":
            depth += 1
        elif fstring and ch == "}":
            depth -= 1
        elif ch == " " and depth == 0 and 0 < i < len(body) - 1 and body[i - 1] != "\\":
            best = i + 1
        i += 1
    return best


def split_long_strings(source: str, width: int = CODE_COLUMNS) -> str:
    """``source`` with each string literal that runs past ``width`` inside brackets cut into
    adjacent literals (``"ab cd"`` -> ``"ab "`` / ``"cd"`` on the next line, aligned), which
    Python joins again: the syntax tree is the same. Long full-line comments are rewrapped."""
    import io
    import textwrap
    import tokenize

    lines = source.split("\n")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    depth = 0
    cuts: list[tuple[int, int, int, str, str]] = []  # row, start col, end col, prefix, quote
    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif (tok.type == tokenize.STRING and depth > 0 and tok.start[0] == tok.end[0]
              and len(lines[tok.start[0] - 1]) > width):
            cuts.append((tok.start[0], tok.start[1], tok.end[1], "", tok.string))
    for row, start, end, _, text in reversed(cuts):
        prefix = text[: len(text) - len(text.lstrip("rRbBfFuU"))]
        quote = text[len(prefix)]
        if text[len(prefix):].startswith(quote * 3):
            continue
        body = text[len(prefix) + 1 : -1]
        line = lines[row - 1]
        pieces, rest, col = [], body, start
        while col + len(prefix) + 2 + len(rest) + len(line) - end > width:
            cut = _split_point(rest, width - col - len(prefix) - 2, "f" in prefix.lower())
            if cut is None:
                break
            pieces.append(rest[:cut])
            rest = rest[cut:]
            col = start
        if not pieces:
            continue
        pad = " " * start
        literal = [f"{prefix}{quote}{p}{quote}" for p in [*pieces, rest]]
        lines[row - 1] = line[:start] + ("\n" + pad).join(literal) + line[end:]
    # A trailing comment that makes its line too long goes on its own line(s) above.
    for tok in reversed([t for t in tokens if t.type == tokenize.COMMENT]):
        row, col = tok.start
        line = lines[row - 1]
        if len(line) > width and line[:col].strip():
            indent = line[: len(line) - len(line.lstrip())]
            lines[row - 1 : row] = [indent + tok.string, line[:col].rstrip()]
    out = []
    for line in "\n".join(lines).split("\n"):
        stripped = line.lstrip()
        if len(line) > width and stripped.startswith("# "):
            indent = line[: len(line) - len(stripped)]
            out += textwrap.wrap(stripped[2:], width - len(indent) - 2,
                                 initial_indent=indent + "# ", subsequent_indent=indent + "# ",
                                 break_long_words=False, break_on_hyphens=False)
        else:
            out.append(line)
    return "\n".join(out)


def formatted_cells(cells) -> list[int]:
    """Indices of the code cells that :func:`format_source` can reformat (not the Colab cell)."""
    return [i for i, cell in enumerate(cells) if cell.cell_type == "code"
            and not cell.source.lstrip().startswith(COLAB_CELL_START)
            and not cell.source.lstrip().startswith(("%", "!"))]


def long_lines(nb, width: int = CODE_COLUMNS) -> list[tuple[int, str]]:
    """(cell index, line) of every code line longer than ``width`` (the Colab cell aside)."""
    return [(i, line) for i in formatted_cells(nb.cells)
            for line in nb.cells[i].source.splitlines() if len(line) > width]


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font: a wide (East Asian W/F) character two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def wide_outputs(nb, width: int = CODE_COLUMNS) -> list[tuple[int, str]]:
    """(cell index, line) of every line of stored text output wider than ``width`` columns:
    the page wraps them (book/_ext/reading.py), but a table or a verdict reads better broken
    by the code that prints it."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = out.get("text") if out.get("output_type") == "stream" else (
                out.get("data", {}).get("text/plain") if "data" in out else None)
            if not text or "image/png" in out.get("data", {}):
                continue
            text = "".join(text) if isinstance(text, list) else text
            found += [(i, line) for line in text.splitlines() if display_width(line) > width]
    return found


def format_notebook(path: Path, width: int = CODE_COLUMNS) -> bool:
    """Reformat ``path``'s code cells in place; True when something changed."""
    nb = nbformat.read(path, as_version=4)
    changed = False
    for i in formatted_cells(nb.cells):
        old = nb.cells[i].source
        new = format_source(old, width)
        if new is not None:
            split = format_source(split_long_strings(new, width), width)
            # Only layout may change: keep a rewrite whose syntax tree is the old one.
            if split is not None and normalised_code(split) == normalised_code(old):
                new = split
        if new is not None and new != old:
            nb.cells[i].source = new
            changed = True
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="only list lines too long")
    parser.add_argument("--outputs", action="store_true",
                        help="also list stored output lines wider than the column")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    too_long = 0
    for path in paths:
        if not args.check and format_notebook(path):
            print(f"formatted {path}")
        for i, line in long_lines(nbformat.read(path, as_version=4)):
            too_long += 1
            print(f"{path}: cell {i}: {len(line)} > {CODE_COLUMNS}: {line.strip()[:60]}")
        if args.outputs:
            for i, line in wide_outputs(nbformat.read(path, as_version=4)):
                print(f"{path}: cell {i} output: {display_width(line)} > {CODE_COLUMNS}: "
                      f"{line.strip()[:60]}")
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main())
