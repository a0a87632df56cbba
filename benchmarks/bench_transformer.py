"""Training-step speed: minitransformer.Transformer vs torch.nn.Transformer.

Both models have the same size (default: d_model 256, 8 heads, 3+3 layers,
d_ff 1024, dropout 0.1, post-LN), the same embeddings, sinusoidal positions
and output projection, and are trained with the same Adam step on the same
random batches (64 pairs of length 32, no padding). The two are timed
alternately in one run, so that drift in the machine's speed affects both.

    python benchmarks/bench_transformer.py            # the issue's setting
    python benchmarks/bench_transformer.py --rounds 3 --steps 3   # a quick check

Prints tokens/s (source + target tokens) of each, and their ratio.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import machine
import torch
import torch.nn.functional as F
from torch import nn

import minitransformer as mt


class TorchSeq2Seq(nn.Module):
    """``nn.Transformer`` with the same embeddings, positions and generator as ours."""

    def __init__(self, c: mt.TransformerConfig):
        super().__init__()
        self.d_model = c.d_model
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.pos = mt.SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
        self.transformer = nn.Transformer(
            c.d_model, c.num_heads, c.num_encoder_layers, c.num_decoder_layers, c.d_ff,
            c.dropout, batch_first=True, norm_first=c.norm_first,
        )
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        scale = math.sqrt(self.d_model)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        h = self.transformer(
            self.pos(self.src_embed(src) * scale), self.pos(self.tgt_embed(tgt) * scale),
            tgt_mask=causal, tgt_is_causal=True,
        )
        return self.generator(h)


def train_steps(model, opt, batches) -> float:
    """Run the batches; return seconds."""
    start = time.perf_counter()
    for src, tgt_in, tgt_out in batches:
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--length", type=int, default=32)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--norm-first", action="store_true")
    p.add_argument("--rounds", type=int, default=10, help="alternations of the two models")
    p.add_argument("--steps", type=int, default=10, help="training steps per round")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    machine.report_before_and_after()
    torch.manual_seed(0)

    config = mt.TransformerConfig(
        args.vocab, args.vocab, d_model=args.d_model, num_heads=args.heads,
        num_encoder_layers=args.layers, num_decoder_layers=args.layers, d_ff=args.d_ff,
        dropout=0.1, norm_first=args.norm_first,
    )
    models = {
        "minitransformer": mt.Transformer(config),
        "torch.nn.Transformer": TorchSeq2Seq(config),
    }
    # nn.Transformer always ends both stacks with a LayerNorm (2 x 2 x d_model
    # more parameters); with post-LN the paper (and we) do not.
    n_params = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
    opts = {
        k: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        for k, m in models.items()
    }

    def batch():
        src = torch.randint(1, args.vocab, (args.batch, args.length))
        tgt = torch.randint(1, args.vocab, (args.batch, args.length + 1))
        return src, tgt[:, :-1], tgt[:, 1:]

    batches = [batch() for _ in range(args.steps)]
    tokens = args.steps * args.batch * 2 * args.length
    for name in models:  # warm-up
        train_steps(models[name], opts[name], batches[:2])
    rates: dict[str, list[float]] = {k: [] for k in models}
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(models)[::-1]
        for name in order:
            rates[name].append(tokens / train_steps(models[name], opts[name], batches))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{k} {v[-1]:.0f} tokens/s" for k, v in rates.items()), flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"torch {torch.__version__}, {args.threads} threads, batch {args.batch}x{args.length}, "
          f"{args.rounds}x{args.steps} steps, parameters {n_params}")
    for name, rate in med.items():
        print(f"{name:22s} {rate:9.0f} tokens/s (median of {args.rounds} rounds)")
    print(f"ratio minitransformer / torch.nn.Transformer = "
          f"{med['minitransformer'] / med['torch.nn.Transformer']:.3f}")


if __name__ == "__main__":
    main()
