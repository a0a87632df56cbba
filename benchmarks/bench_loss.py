"""The loss over the vocabulary, forward and backward, three ways (issue 28:
a float32 lever outside the matrix products).

- ``package``: :func:`minitransformer.training.loss.label_smoothed_cross_entropy`,
  as ``fit`` calls it today (``log_softmax``, ``gather``, ``mean`` over the
  vocabulary, each with its backward: several passes over ``(B, T, V)``);
- ``torch``: ``F.cross_entropy(..., ignore_index=pad, label_smoothing=ε)``,
  what a PyTorch user writes;
- ``fused``: a candidate, one ``torch.autograd.Function`` that saves the
  logits and their log-sum-exp and writes the gradient in one buffer,
  ``softmax(x) - (1 - ε)·onehot(y) - ε/V``, masked and scaled in place.

The script first checks that the three give the same loss and gradient
(against ``F.cross_entropy``), then times them in alternating rounds on
the shape of one training step of the command line's translator (about
1,000 target positions, 8,000 pieces), float32. Results:
``benchmarks/README.md``, "The loss over the vocabulary".

    python benchmarks/bench_loss.py [--batch 64 --length 16 --vocab 8000 --rounds 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from machine import report_before_and_after, run_stamp

from minitransformer.training.loss import label_smoothed_cross_entropy

RESULT = Path(__file__).parent / "results" / "loss_speed.json"


class FusedSmoothedCrossEntropy(torch.autograd.Function):
    """Sum of the label-smoothed cross-entropy over the kept positions of
    ``logits (N, V)`` and ``target (N,)``; the gradient in one buffer."""

    @staticmethod
    def forward(ctx, logits, target, smoothing, pad_id):
        keep = (target != pad_id) & (target >= 0)  # (N,)
        safe = target.clamp(min=0)
        lse = torch.logsumexp(logits, dim=-1)  # (N,)
        true = logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (N,)
        loss = lse - (1 - smoothing) * true - smoothing * logits.mean(dim=-1)
        ctx.save_for_backward(logits, safe, lse, keep)
        ctx.smoothing = smoothing
        return loss.masked_fill(~keep, 0.0).sum()

    @staticmethod
    def backward(ctx, grad):
        logits, safe, lse, keep = ctx.saved_tensors
        eps, vocab = ctx.smoothing, logits.shape[-1]
        out = torch.sub(logits, lse.unsqueeze(-1)).exp_().sub_(eps / vocab)  # (N, V)
        minus = torch.full_like(lse, -(1 - eps)).unsqueeze(-1)
        out.scatter_add_(-1, safe.unsqueeze(-1), minus)
        out.mul_((keep.to(out.dtype) * grad).unsqueeze(-1))
        return out, None, None, None


def losses(target: torch.Tensor, smoothing: float, pad_id: int) -> dict:
    """The three losses as functions of ``logits (B, T, V)``: each the mean
    over the non-pad positions."""
    vocab_target = target.reshape(-1)
    count = ((target != pad_id) & (target >= 0)).sum().clamp(min=1)

    def package(x):
        return label_smoothed_cross_entropy(x, target, smoothing, pad_id)

    def torch_ce(x):
        return F.cross_entropy(x.reshape(-1, x.shape[-1]), vocab_target,
                               ignore_index=pad_id, label_smoothing=smoothing)

    def fused(x):
        flat = x.reshape(-1, x.shape[-1])
        return FusedSmoothedCrossEntropy.apply(flat, vocab_target, smoothing, pad_id) / count

    return {"package": package, "torch": torch_ce, "fused": fused}


def loss_and_grad(f, x0: torch.Tensor) -> tuple[float, torch.Tensor]:
    x = x0.clone().requires_grad_()
    loss = f(x)
    loss.backward()
    return loss.item(), x.grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=16, help="target positions a row")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--smoothing", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=5, help="forward+backward calls a round")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    before = report_before_and_after()
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(args.batch, args.length, args.vocab, generator=gen)
    target = torch.randint(1, args.vocab, (args.batch, args.length), generator=gen)
    target[:, -2:] = 0  # some padding, as in a batch
    fs = losses(target, args.smoothing, pad_id=0)
    ref_loss, ref_grad = loss_and_grad(fs["torch"], logits)
    checks = {}
    for name, f in fs.items():
        loss, grad = loss_and_grad(f, logits)
        checks[name] = {"loss": loss, "loss_diff": abs(loss - ref_loss),
                        "grad_max_diff": (grad - ref_grad).abs().max().item()}
        if not (abs(loss - ref_loss) < 1e-4 and checks[name]["grad_max_diff"] < 1e-6):
            raise SystemExit(f"{name} differs from F.cross_entropy: {checks[name]}")
        print(f"{name:8s} loss {loss:.6f}, largest gradient difference from "
              f"F.cross_entropy {checks[name]['grad_max_diff']:.1e}")
    times = {name: [] for name in fs}
    for _ in range(args.rounds):
        for name, f in fs.items():
            x = logits.clone().requires_grad_()
            start = time.perf_counter()
            for _ in range(args.calls):
                x.grad = None
                f(x).backward()
            times[name].append((time.perf_counter() - start) / args.calls * 1000)
    summary = {name: {"median_ms": round(statistics.median(t), 2),
                      "min_ms": round(min(t), 2), "max_ms": round(max(t), 2)}
               for name, t in times.items()}
    for name, s in summary.items():
        print(f"{name:8s} forward+backward {s['median_ms']:6.2f} ms (median of "
              f"{args.rounds} rounds, {s['min_ms']:.2f}-{s['max_ms']:.2f})")
    args.out.write_text(json.dumps({
        **run_stamp(), "machine": before, "shape": [args.batch, args.length, args.vocab],
        "smoothing": args.smoothing, "rounds": args.rounds, "calls": args.calls,
        "checks": checks, "ms": summary, "raw_ms": times}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
