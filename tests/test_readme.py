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


def test_every_make_command_the_docs_name_is_a_target():
    makefile = (README.parent / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    readme = set(re.findall(r"\bmake ([a-z][\w-]*)", README.read_text(encoding="utf-8")))
    assert {"book", "test"} <= readme, "the README names the two commands"
    contributing = (README.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    named = readme | set(re.findall(r"\bmake ([a-z][\w-]*)", contributing))
    assert named <= targets, sorted(named - targets)
