"""fit() under torchrun: two CPU processes (gloo) give the same model as one
process that sees the same global batches."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest
import torch

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from minitransformer import Transformer, TransformerConfig
    from minitransformer.data import make_batch, make_synthetic
    from minitransformer.training import TrainConfig, fit
    import torch.distributed as dist

    torch.set_num_threads(1)
    mode, out = sys.argv[1], sys.argv[2]
    examples = make_synthetic("reverse", 48, 2, 9, num_symbols=10, seed=3, split="train")
    halves = [(examples[i:i + 6], examples[i + 6:i + 12]) for i in range(0, 48, 12)]
    if mode == "single":  # one process, each global batch in one piece
        batches = [make_batch(a + b) for a, b in halves]
    else:  # batch 2k goes to process 0, batch 2k+1 to process 1
        batches = [make_batch(part) for a, b in halves for part in (a, b)]
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(14, 14, d_model=32, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=64, dropout=0.0))
    config = TrainConfig(lr=3e-3, schedule="noam", warmup_steps=2, epochs=1, device="cpu",
                         amp="off", log_every=1)
    valid = [make_batch(examples[:5]), make_batch(examples[5:12])]  # the same in both modes
    history = fit(model, batches, valid, config=config, progress=False)
    rank = dist.get_rank() if dist.is_initialized() else 0
    if rank == 0:
        torch.save({"state": model.state_dict(), "loss": history.train_loss,
                    "valid": history.valid_loss, "steps": history.step}, out)
    if dist.is_initialized():
        dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_match_one_process_on_the_same_global_batch(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    subprocess.run([sys.executable, str(script), "single", str(tmp_path / "one.pt")],
                   check=True, env=env, timeout=300)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
           str(script), "ddp", str(tmp_path / "two.pt")]
    done = subprocess.run(cmd, env=env, timeout=300, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    one = torch.load(tmp_path / "one.pt", weights_only=True)
    two = torch.load(tmp_path / "two.pt", weights_only=True)
    assert one["steps"] == two["steps"] == [1, 2, 3, 4]
    # Losses are per process in DDP (rank 0's half), so compare the parameters:
    # identical updates need the global token-mean gradient, not a mean of means.
    for name, p in one["state"].items():
        if name.endswith("w_k.bias"):
            # A key bias adds the same q·b to every score of a row, which softmax
            # ignores: its true gradient is 0, the computed one is rounding noise,
            # and Adam scales noise up to full-size steps. Nothing to compare.
            continue
        torch.testing.assert_close(two["state"][name], p, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, n=name: f"{n}: {m}")
    # Evaluation is split between the processes and summed: same validation loss.
    assert two["valid"] == pytest.approx(one["valid"], rel=1e-4)
    changed = any((p != 0).any() for p in one["state"].values())
    assert changed


TIME_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import torch
    import torch.distributed as dist
    from minitransformer import Transformer, TransformerConfig
    from minitransformer.data import make_batch, make_synthetic
    from minitransformer.training import TrainConfig, fit

    torch.set_num_threads(1)
    out = sys.argv[1]
    examples = make_synthetic("reverse", 48, 2, 9, num_symbols=10, seed=3, split="train")
    batches = [make_batch(examples[i:i + 6]) for i in range(0, 48, 6)]
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(14, 14, d_model=32, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=64, dropout=0.0))
    config = TrainConfig(lr=3e-3, schedule="linear", warmup_steps=2, epochs=None,
                         max_minutes=0.25, device="cpu", amp="off")  # setup counts too
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 1:
        time.sleep(1.0)  # this process's clock starts a second later
    history = fit(model, batches, config=config, progress=False)
    torch.save({"state": model.state_dict(), "steps": history.step[-1]}, f"{out}.{rank}")
    dist.destroy_process_group()
    """
)


@pytest.mark.slow
def test_a_time_budget_stops_every_process_at_the_same_step(tmp_path):
    """Each process reads its own clock; fit must share one reading (the
    largest) so that all take the same learning rate and stop together:
    otherwise one would wait forever in an all-reduce the others never join."""
    script = tmp_path / "train_time.py"
    script.write_text(TIME_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
           str(script), str(tmp_path / "out.pt")]
    # Without the shared clock this hangs (measured): the timeout turns that into a failure.
    done = subprocess.run(cmd, env=env, timeout=120, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    a = torch.load(tmp_path / "out.pt.0", weights_only=True)
    b = torch.load(tmp_path / "out.pt.1", weights_only=True)
    assert a["steps"] == b["steps"] > 1
    for name, p in a["state"].items():  # same learning rate at every step: same weights
        torch.testing.assert_close(b["state"][name], p, rtol=0, atol=0, msg=name)
