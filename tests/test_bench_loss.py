"""benchmarks/bench_loss.py: the fused label-smoothed loss candidate equals
``F.cross_entropy`` (loss and gradient), and the script writes its record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench(benchmarks_path):
    import bench_loss

    return bench_loss


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_fused_loss_and_gradient_equal_torch_cross_entropy(bench, smoothing):
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, 11, generator=gen, dtype=torch.float64)
    target = torch.randint(1, 11, (3, 5), generator=gen)
    target[0, 3:] = 0  # padding
    target[2, 0] = -100  # IGNORE_ID
    fused = bench.losses(target, smoothing, pad_id=0)["fused"]
    x = logits.clone().requires_grad_()
    fused(x).backward()
    y = logits.clone().requires_grad_()
    flat = target.reshape(-1).masked_fill(target.reshape(-1) < 0, 0)
    ref = F.cross_entropy(y.reshape(-1, 11), flat, ignore_index=0, label_smoothing=smoothing)
    ref.backward()
    assert torch.allclose(fused(logits), ref, atol=1e-12)
    assert torch.allclose(x.grad, y.grad, atol=1e-12)
    assert torch.autograd.gradcheck(fused, (logits.clone().requires_grad_(),))


def test_script_checks_then_times_and_writes_its_record(tmp_path):
    out = tmp_path / "loss.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_loss.py"),
                    "--batch", "2", "--length", "3", "--vocab", "17", "--rounds", "2",
                    "--calls", "1", "--out", str(out)], check=True, capture_output=True)
    record = json.loads(out.read_text())
    assert set(record["ms"]) == {"package", "torch", "fused"}
    assert record["shape"] == [2, 3, 17] and len(record["raw_ms"]["fused"]) == 2
    assert all(c["grad_max_diff"] < 1e-6 for c in record["checks"].values())
