"""benchmarks/bench_modern_parts.py: every variant changes only its parts and
keeps the base's parameter count (counted, and for the feed-forward width
against every candidate width); each run makes the steps its variant's
measured speed buys in the budget; a smoke run writes what chapter 12 reads."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from minitransformer import count_parameters
from minitransformer.instruments.summary import model_of
from minitransformer.training.presets import ERA_PARTS

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"


@pytest.fixture(scope="module")
def bench(benchmarks_path):
    import bench_modern_parts

    return bench_modern_parts


@pytest.mark.parametrize("vocab", [2000, 300])
def test_each_variant_changes_its_parts_only_and_keeps_the_parameter_count(bench, vocab):
    base = bench.base_config(vocab)
    target = count_parameters(model_of(base))
    for name, changes in bench.VARIANTS.items():
        config = bench.variant_config(name, vocab)
        differs = {f.name for f in dataclasses.fields(config)
                   if getattr(config, f.name) != getattr(base, f.name)}
        assert differs <= set(changes) | {"d_ff"}, name
        assert {k: getattr(config, k) for k in changes} == changes
        count = count_parameters(model_of(config))
        assert abs(count - target) / target < 0.002, (name, count, target)
        # no other width comes closer
        for d_ff in (config.d_ff - 1, config.d_ff + 1):
            other = count_parameters(model_of(dataclasses.replace(config, d_ff=d_ff)))
            assert abs(other - target) >= abs(count - target)
    modern = bench.variant_config("2020s", vocab)
    parts = {k: v for k, v in ERA_PARTS["2020s"].items() if k != "norm_first"}
    assert {k: getattr(modern, k) for k in parts} == parts and modern.norm_first


@pytest.mark.slow
def test_smoke_run_fixes_the_steps_by_the_measured_speed(bench, tmp_path):
    out = tmp_path / "modern_parts.json"
    record = bench.main(["--smoke", "--data-root", str(FIXTURES), "--pieces", "300",
                         "--variants", "2017", "mqa", "--context", "16", "--out", str(out)])
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(record))
    runs = record["runs"]
    assert [(r["variant"], r["seed"]) for r in runs] == [("2017", 0), ("mqa", 0)]
    for r in runs:
        rate = record["speeds"][r["variant"]]["steps_per_second"]
        assert r["steps"] == max(1, round(record["seconds"] * rate))
        assert r["parameters"] == record["variants"][r["variant"]]["parameters"]
        assert math.isclose(r["valid_perplexity"], math.exp(r["valid_loss"]), rel_tol=1e-3)
        s = record["summary"][r["variant"]]["valid_perplexity"]
        assert s["min"] == s["max"] == r["valid_perplexity"]
    for row in record["cache"]:
        assert row["cache_bytes"] == row["cache_bytes_formula"]
    kv = [row["num_kv_heads"] for row in record["cache"]]
    bytes_ = [row["cache_bytes"] for row in record["cache"]]
    assert all(b * k2 == b2 * k for k, b, k2, b2 in zip(kv, bytes_, kv[1:], bytes_[1:]))
