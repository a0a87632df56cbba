"""benchmarks/bench_rnn_copy.py: early stopping keeps the best weights, and
the record it writes has what chapter 1 reads (checked on the packaged
results too)."""

from __future__ import annotations

import json

import pytest
import torch

from minitransformer.data import make_batch, make_synthetic
from minitransformer.results import load_result
from minitransformer.rnn.models import RNN_MODELS
from minitransformer.training import evaluate_loss


@pytest.fixture(scope="module")
def bench(benchmarks_path):
    import bench_rnn_copy

    return bench_rnn_copy


TINY = ["--max-len", "5", "--hidden", "8", "--emb", "8", "--batch-size", "16",
        "--train-examples", "400", "--valid-examples", "64", "--test-examples", "8",
        "--eval-every", "3", "--patience", "2", "--max-steps", "60", "--lr", "0.01"]


def check_record(record: dict, min_seeds: int) -> None:
    lengths = record["test_lengths"]
    assert lengths == list(range(2, record["settings"]["max_len"] + 1))
    assert set(record["models"]) == set(RNN_MODELS)
    for name, runs in record["models"].items():
        assert len({r["seed"] for r in runs}) == len(runs) >= min_seeds, name
        for r in runs:
            assert r["stop_reason"] in ("converged", "max_steps")
            assert 0 < r["best_step"] <= r["steps"] <= record["settings"]["max_steps"]
            steps = r["valid_curve"]["step"]
            assert steps == sorted(steps) and r["best_step"] in steps
            assert min(r["valid_curve"]["loss"]) == pytest.approx(r["best_valid_loss"], abs=1e-4)
            for length in lengths:
                accs = r["position_accuracy"][str(length)]
                assert len(accs) == length and all(0.0 <= a <= 1.0 for a in accs)
                assert 0.0 <= r["greedy_exact"][str(length)] <= 1.0


@pytest.mark.slow
def test_early_stopping_keeps_the_best_weights(bench):
    args = bench.parse_args(TINY)
    train = make_synthetic("copy", 400, 2, 5, 10, seed=1000, split="train")
    examples = make_synthetic("copy", 64, 2, 5, 10, seed=1, split="valid")
    valid = [make_batch(examples)]
    torch.manual_seed(0)
    model = RNN_MODELS["simple"](bench.model_config(args))
    record = bench.train_until_converged(model, train, valid, args, seed=0)
    # The model holds the weights of the best validation, not the last ones.
    assert evaluate_loss(model, valid) == pytest.approx(record["best_valid_loss"], rel=1e-5)
    losses = record["valid_curve"]["loss"]
    drops = record["lr_drops"]
    assert [lr for _, lr in drops] == pytest.approx(
        [args.lr / args.lr_factor ** (i + 1) for i in range(len(drops))])
    assert [step for step, _ in drops] == sorted(step for step, _ in drops)
    if record["stop_reason"] == "converged":
        # Stopped at the lowest learning rate, after `patience` evaluations none
        # of which improved on the loss before them by the thresholds.
        assert len(drops) == args.lr_drops
        earlier, last = losses[:-args.patience], losses[-args.patience:]
        threshold = max(args.min_delta * max(earlier), args.min_delta_abs)
        assert min(earlier) - min(last) <= threshold + 1e-4
    else:
        assert record["steps"] == args.max_steps


@pytest.mark.slow
def test_benchmark_writes_what_chapter_1_reads(bench, tmp_path, one_thread):
    # one_thread restores the thread count: each run sets torch to one thread for the
    # rest of the process (as a benchmark may); left there, later tests train differently
    out = tmp_path / "rnn_copy.json"
    bench.main(TINY + ["--seeds", "0", "1", "--out", str(out)])
    check_record(json.loads(out.read_text()), min_seeds=2)


def test_packaged_copy_results_have_three_seeds_per_model():
    check_record(load_result("rnn_copy"), min_seeds=3)


def test_the_first_validation_and_large_drops_count_as_improvements(bench):
    args = bench.parse_args(["--min-delta", "0.01", "--min-delta-abs", "0.002"])
    inf = float("inf")
    assert bench.improves(2.5, inf, args)  # the first validation sets the reference
    assert bench.improves(0.98, 1.0, args)  # 2% > 1%
    assert not bench.improves(0.995, 1.0, args)  # 0.5% < 1%
    assert not bench.improves(0.0995, 0.1, args)  # 0.5%, and 0.0005 < 0.002 nats
    assert not bench.improves(0.0985, 0.1, args)  # 1.5% but 0.0015 < 0.002 nats
    assert bench.improves(0.097, 0.1, args)
    assert not bench.improves(1.1, 1.0, args)
