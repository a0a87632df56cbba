"""benchmarks/bench_short_attention.py runs and records both kernels for every case."""

from __future__ import annotations

import json


def test_the_benchmark_records_both_kernels_for_every_case(benchmarks_path, tmp_path,
                                                             monkeypatch):
    import bench_short_attention as bench

    monkeypatch.setattr(bench, "TRAINING", [(2, 8), (1, 16)])
    monkeypatch.setattr(bench, "DECODING", [(2, 8)])
    monkeypatch.setattr(bench.machine, "matmul_gflops", lambda *a, **k: {"wall": 1.0, "cpu": 1.0})
    out = tmp_path / "short.json"
    bench.main(["--threads", "1", "--rounds", "1", "--repeats", "1", "--out", str(out)])
    record = json.loads(out.read_text())
    assert len(record["cases"]) == 2 * 2 + 1  # two masks per training case, one decoding case
    for case in record["cases"]:
        assert set(case["ms"]) == {"short", "pytorch"} and all(v > 0 for v in case["ms"].values())
        assert case["pytorch_over_short"] == round(case["ms"]["pytorch"] / case["ms"]["short"], 2)
    assert record["short_on_cpu"] == bench.SHORT_ON_CPU and record["command"].startswith("python")
