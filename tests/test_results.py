"""The stored results chapters read: every listed one loads, every stored one is listed."""

from importlib.resources import files

import pytest

from minitransformer.results import RESULTS, load_result


def test_every_listed_result_is_stored_and_loads():
    for name in RESULTS:
        assert isinstance(load_result(name), dict), name


def test_every_stored_result_is_listed():
    stored = {p.name.removesuffix(".json") for p in files("minitransformer.results").iterdir()
              if p.name.endswith(".json")}
    assert stored == set(RESULTS)


def test_unknown_name_says_which_are_known():
    with pytest.raises(ValueError, match="known: .*vocab_choice"):
        load_result("vocab_choise")
