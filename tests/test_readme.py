"""The README's Python snippet runs and does what its comments say."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_snippet_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "README has no python snippet"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert tuple(namespace["logits"].shape) == (8, 10, 100)


def test_readme_has_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert "make book" in text and "make test" in text
    assert (README.parent / "Makefile").read_text().count("\nbook:") == 1
