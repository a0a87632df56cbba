"""Attention of short sequences on a CPU: the package's written-out path
(``short_attention``) against PyTorch's kernel (``F.scaled_dot_product_attention``).

``fused_attention`` takes the written-out path for at most ``SHORT_ON_CPU``
queries and keys on a CPU. This measures why and where: one forward and
backward pass of a training batch's attention (batch × length about 1,024
positions, 8 heads of width 32, the preset's shapes) at lengths 16 to 512,
with the two masks the model passes (a causal one with padding, and a key
padding one), and one decoding step (one query against a cache). The two
kernels alternate, each timed as the median of ``--rounds`` rounds.

    python benchmarks/bench_short_attention.py --threads 2
    python benchmarks/bench_short_attention.py --rounds 3 --repeats 5   # quicker

Prints the machine before and after and each case's milliseconds and ratio;
writes ``benchmarks/results/short_attention.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import machine
import torch
import torch.nn.functional as F

from minitransformer.attention import SHORT_ON_CPU, short_attention

ROOT = Path(__file__).resolve().parent
HEADS, HEAD_DIM = 8, 32
#: (batch, length) of the training cases: about 1,024 positions a side, as in
#: the preset's batches of 2,048 source + target tokens.
TRAINING = [(64, 16), (32, 32), (16, 64), (8, 128), (4, 256), (2, 512)]
#: (batch, cached keys) of the decoding cases: one query each.
DECODING = [(1, 16), (1, 64), (1, 256), (128, 16), (128, 64), (128, 256)]
KERNELS = {
    "short": lambda q, k, v, m: short_attention(q, k, v, m),
    "pytorch": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
}


def _masks(batch: int, length: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The causal mask with padding (decoder self-attention) and the key
    padding mask (encoder and cross-attention), True = may attend; each row
    padded to a random length of at least half, the first row not at all."""
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
    lengths[0] = length
    keep = torch.arange(length)[None, :] < lengths[:, None]  # (B, L)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return {"causal": keep[:, None, None, :] & causal, "padding": keep[:, None, None, :]}


def _time(fn, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e3


def _compare(make_call, rounds: int, repeats: int) -> dict:
    calls = {name: make_call(kernel) for name, kernel in KERNELS.items()}
    for call in calls.values():  # warm-up
        call()
        call()
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(_time(call, repeats))
    ms = {name: round(statistics.median(t), 4) for name, t in times.items()}
    return {"ms": ms, "pytorch_over_short": round(ms["pytorch"] / ms["short"], 2),
            "all_ms": times}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=20, help="calls timed per round")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "short_attention.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    before = machine.print_machine("before")
    g = torch.Generator().manual_seed(0)
    cases = []
    for batch, length in TRAINING:
        q, k, v = (torch.randn(batch, HEADS, length, HEAD_DIM, generator=g, requires_grad=True)
                   for _ in range(3))
        grad = torch.randn(batch, HEADS, length, HEAD_DIM, generator=g)
        for name, mask in _masks(batch, length, g).items():
            def make_call(kernel, mask=mask, q=q, k=k, v=v, grad=grad):
                return lambda: kernel(q, k, v, mask).backward(grad)
            row = {"case": "training, forward + backward", "mask": name, "batch": batch,
                   "length": length, **_compare(make_call, args.rounds, args.repeats)}
            cases.append(row)
            print(f"train  {name:8s} B{batch:<4d} L{length:<4d} short {row['ms']['short']:7.3f} "
                  f"ms  pytorch {row['ms']['pytorch']:7.3f} ms  ratio "
                  f"{row['pytorch_over_short']:.2f}", flush=True)
    with torch.no_grad():
        for batch, length in DECODING:
            q = torch.randn(batch, HEADS, 1, HEAD_DIM, generator=g)
            k, v = (torch.randn(batch, HEADS, length, HEAD_DIM, generator=g) for _ in range(2))
            mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)

            def make_call(kernel, q=q, k=k, v=v, mask=mask):
                return lambda: kernel(q, k, v, mask)
            row = {"case": "decoding step, no gradients", "mask": "padding", "batch": batch,
                   "length": length, **_compare(make_call, args.rounds, args.repeats * 5)}
            cases.append(row)
            print(f"decode padding B{batch:<4d} L{length:<4d} short {row['ms']['short']:7.3f} "
                  f"ms  pytorch {row['ms']['pytorch']:7.3f} ms  ratio "
                  f"{row['pytorch_over_short']:.2f}", flush=True)
    after = machine.print_machine("after")
    record = {"short_on_cpu": SHORT_ON_CPU, "heads": HEADS, "head_dim": HEAD_DIM,
              "threads": args.threads, "rounds": args.rounds, "repeats": args.repeats,
              "cases": cases, "machine_before": before, "machine_after": after,
              **machine.run_stamp()}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
