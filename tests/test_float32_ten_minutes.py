"""The float32 ten-minute campaign's budget and rule (benchmarks/float32_ten_minutes.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import float32_ten_minutes as f32  # noqa: E402


def test_the_budget_scales_ten_minutes_to_a_120_gflops_machine():
    assert f32.budget_minutes(120) == 10.0
    assert f32.budget_minutes(240) == 5.0
    assert f32.budget_minutes(191) == 6.3


@pytest.mark.parametrize("candidate, expected", [(33.0, "target pieces"),
                                                 (32.5, "target pieces"),
                                                 (32.49, "all pieces")])
def test_the_rule_keeps_the_preset_unless_the_candidate_is_as_good(candidate, expected):
    summary = {"all pieces": {"bleu": {"mean": 32.5}},
               "target pieces": {"bleu": {"mean": candidate}}}
    assert f32.choose(summary) == expected


def test_the_variants_are_train_flags_in_float32():
    from minitransformer.cli import build_parser

    for options in f32.VARIANTS.values():
        args = build_parser().parse_args(["train", "--out", "x", *options])
        assert args.amp == "off"
    assert list(f32.VARIANTS)[0] == "all pieces"  # the preset before the choice comes first


def test_a_busy_machine_is_refused_unless_forced(monkeypatch):
    monkeypatch.setattr(f32.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    with pytest.raises(SystemExit, match="busy"):
        f32._check_load(False)
    assert f32._check_load(True) == 3.0
