"""Execute notebooks top to bottom on a fresh kernel and store their outputs.

    python tools/execute_notebooks.py                     # every chapter
    python tools/execute_notebooks.py notebooks/03_*.ipynb

Each notebook runs with ``notebooks/`` as its working directory, as in
Jupyter, nbval and Colab. Prints the wall time of each so chapters can be
kept within their time budgets.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def execute(path: Path, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    resources = {"metadata": {"path": str(path.parent)}}
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources=resources)
    client.execute()
    seconds = time.perf_counter() - start
    nbformat.write(nb, path)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = parser.parse_args()
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        seconds = execute(path.resolve(), args.timeout)
        print(f"{path.name}: {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
