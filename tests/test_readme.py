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


def test_readme_language_model_snippet_runs():
    """The second snippet (a GPT from the same layers) continues the first."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2, "README has no language-model snippet"
    namespace: dict = {}
    for block in blocks[:2]:
        exec(compile(block, "README.md", "exec"), namespace)
    src = namespace["src"]
    assert tuple(namespace["logits"].shape) == (*src.shape, 100)  # (8, 12, 100)
    ids = namespace["ids"]
    assert tuple(ids.shape) == (src.shape[0], 3 + 20)
    assert (ids[:, :3] == src[:, :3]).all()  # the prompt comes first


def test_every_make_command_the_docs_name_is_a_target():
    makefile = (README.parent / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    readme = set(re.findall(r"\bmake ([a-z][\w-]*)", README.read_text(encoding="utf-8")))
    assert {"book", "test"} <= readme, "the README names the two commands"
    contributing = (README.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    named = readme | set(re.findall(r"\bmake ([a-z][\w-]*)", contributing))
    assert named <= targets, sorted(named - targets)
