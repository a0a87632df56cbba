"""The package's public surface."""

import re
from pathlib import Path

import minitransformer as mt


def test_every_exported_name_exists_and_is_documented():
    missing = [n for n in mt.__all__ if not hasattr(mt, n)]
    assert not missing, missing
    undocumented = [
        n for n in mt.__all__ if callable(getattr(mt, n)) and not getattr(mt, n).__doc__
    ]
    assert not undocumented, undocumented


def test_version_matches_pyproject():
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == mt.__version__


PACKAGE = Path(mt.__file__).parent


def test_top_level_shows_the_transformer_and_little_else():
    modules = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 16, modules
    subpackages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert subpackages == [
        "data", "exercises", "instruments", "lm", "results", "rnn", "training", "variants"
    ], subpackages


def test_each_helper_is_defined_once():
    for name in ("count_parameters", "masked_softmax", "evaluate_accuracy", "time_call"):
        defined = [
            str(p.relative_to(PACKAGE))
            for p in PACKAGE.rglob("*.py")
            if re.search(rf"^def {name}\(", p.read_text(), re.M)
        ]
        assert len(defined) == 1, (name, defined)


def test_star_import_gives_exactly_all():
    namespace: dict = {}
    exec("from minitransformer import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(mt.__all__)
