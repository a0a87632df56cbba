"""Peak memory of attention against the length: the full score matrix
(``scaled_dot_product_attention``, written out) against blocks of keys with
the online softmax (``flash_attention``). Memory only, no timing.

The measure: the bytes of the tensors the call allocates that are alive at
once, at their peak (:func:`minitransformer.instruments.memory.peak_bytes`:
a ``TorchDispatchMode`` sees every operator's outputs; a tensor's storage
counts from its allocation until that tensor is freed; the inputs,
allocated before, do not count). Results: ``benchmarks/README.md``,
"Attention memory: full scores against blocks of keys".

    python benchmarks/bench_flash_attention.py [--lengths 128 256 ...] [--block 128]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from machine import report_before_and_after, run_stamp

import minitransformer as mt
from minitransformer.instruments.memory import peak_bytes

RESULT = Path(__file__).parent / "results" / "flash_attention.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    parser.add_argument("--block", type=int, default=128, help="keys per block")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    args = parser.parse_args()
    before = report_before_and_after()
    rows = []
    for length in args.lengths:
        q, k, v = (torch.randn(1, args.heads, length, args.head_dim) for _ in range(3))
        causal = mt.causal_mask(length)  # (L, L) bool: a decoder's mask
        with torch.no_grad():
            full = peak_bytes(mt.scaled_dot_product_attention, q, k, v, causal)
            blocked = peak_bytes(mt.flash_attention, q, k, v, causal, block_size=args.block)
            same = torch.allclose(mt.flash_attention(q, k, v, causal, block_size=args.block),
                                  mt.scaled_dot_product_attention(q, k, v, causal)[0],
                                  atol=1e-5)
        rows.append({"length": length, "full_bytes": full, "blocked_bytes": blocked,
                     "same_output": same})
        print(f"L={length:5d}  full {full / 2**20:8.2f} MiB  blocked {blocked / 2**20:7.2f} MiB"
              f"  same output: {same}")
    RESULT.write_text(json.dumps({**run_stamp(), "machine": before, "block": args.block,
                                  "heads": args.heads, "head_dim": args.head_dim,
                                  "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
