"""Two speed options issue 14 asked to measure: a fused QKV projection and
``torch.compile`` with static shapes (length buckets).

Neither is in the package; this script measures what each would give the
command line's model (``minitransformer.training.presets``) on this CPU,
before anyone changes the model for it.

1. **Fused QKV.** The package's attention projects queries, keys and values
   with three ``(d_model, d_model)`` matrices; ``nn.MultiheadAttention``
   stacks them into one ``(3 d_model, d_model)`` product. Timed: forward and
   backward of the three products against the one stacked product on a
   ``(batch, length, d_model)`` input of the preset's token budget, in
   alternating rounds. The saving per training step is bounded by the
   number of projections a step makes (3 encoder and 3 decoder
   self-attention layers, 3 cross-attention layers counted as whole,
   an overestimate) times the saving per projection, against the measured
   time of a whole eager training step.
2. **torch.compile, static shapes.** One training step (forward, loss,
   backward, Adam) of the preset model on batches padded to fixed lengths,
   eager against ``torch.compile(model, dynamic=False)``: the first call of
   each shape (compilation, paid once per length bucket) and the median of
   the following steps, alternating eager and compiled.

Both run in the preset's precision (bf16 autocast on a CPU with native bf16,
else float32; ``--precision`` overrides). Synthetic batches of random
tokens without padding, so only shapes matter.

    python benchmarks/bench_speed_options.py --threads 2
    python benchmarks/bench_speed_options.py --skip-compile --rounds 5    # fused QKV only

Prints the machine before and after and writes a JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # machine.py

from machine import print_machine, run_stamp  # noqa: E402

from minitransformer.model import Transformer  # noqa: E402
from minitransformer.training import precision  # noqa: E402
from minitransformer.training.presets import CPU_MODEL, CPU_TOKENIZERS, cpu_model_config  # noqa: E402

ROOT = Path(__file__).resolve().parent


def autocast_for(use_bf16: bool):
    return (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if use_bf16 else nullcontext


def timed(fn, repeats: int) -> float:
    """Median seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fused_qkv(args, cast) -> dict:
    """Seconds of forward + backward: three (D, D) projections against one (3D, D)."""
    d = CPU_MODEL["d_model"]
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.length, d, requires_grad=True)
    separate = nn.ModuleList(nn.Linear(d, d) for _ in range(3))
    fused = nn.Linear(d, 3 * d)
    grads = [torch.randn(args.batch, args.length, d) for _ in range(3)]

    def run_separate():
        with cast():
            outs = [lin(x) for lin in separate]
        sum((o.float() * g).sum() for o, g in zip(outs, grads)).backward()

    def run_fused():
        with cast():
            outs = fused(x).chunk(3, dim=-1)
        sum((o.float() * g).sum() for o, g in zip(outs, grads)).backward()

    for fn in (run_separate, run_fused):  # warm-up
        fn()
    sep, fus = [], []
    for _ in range(args.rounds):
        sep.append(timed(run_separate, args.repeats))
        fus.append(timed(run_fused, args.repeats))
    ratios = [s / f for s, f in zip(sep, fus)]
    return {"separate_ms": round(1e3 * statistics.median(sep), 3),
            "fused_ms": round(1e3 * statistics.median(fus), 3),
            "separate_over_fused_median": round(statistics.median(ratios), 3),
            "separate_over_fused_range": [round(min(ratios), 3), round(max(ratios), 3)]}


def make_step(model: nn.Module, forward, cast, vocab: int):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step(src, tgt_in, tgt_out):
        with cast():
            logits = forward(src, tgt_in)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tgt_out.reshape(-1),
                               label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def batch(args, length: int, vocab: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    rows = max(1, args.tokens // (2 * length))  # source + target tokens per batch
    src = torch.randint(4, vocab, (rows, length), generator=g)
    tgt = torch.randint(4, vocab, (rows, length + 1), generator=g)
    return src, tgt[:, :-1], tgt[:, 1:]


def compile_buckets(args, cast, vocab: int) -> dict:
    """Eager against torch.compile(dynamic=False), one training step per call."""
    config = cpu_model_config(vocab, vocab)
    torch.manual_seed(0)
    eager_model = Transformer(config)
    compiled_model = Transformer(config)
    compiled_model.load_state_dict(eager_model.state_dict())
    compiled_forward = torch.compile(compiled_model, dynamic=False)
    eager = make_step(eager_model, eager_model, cast, vocab)
    compiled = make_step(compiled_model, compiled_forward, cast, vocab)
    out = {}
    for length in args.buckets:
        b = batch(args, length, vocab, seed=length)
        eager(*b)  # warm-up
        t0 = time.perf_counter()
        compiled(*b)  # compiles this shape
        first = time.perf_counter() - t0
        e, c = [], []
        for _ in range(args.rounds):
            e.append(timed(lambda b=b: eager(*b), args.steps))
            c.append(timed(lambda b=b: compiled(*b), args.steps))
        ratios = [x / y for x, y in zip(e, c)]
        tokens = b[0].numel() + b[1].numel()
        out[str(length)] = {
            "batch_rows": b[0].shape[0], "tokens_per_step": tokens,
            "first_compiled_call_s": round(first, 1),
            "eager_ms": round(1e3 * statistics.median(e), 1),
            "compiled_ms": round(1e3 * statistics.median(c), 1),
            "eager_over_compiled_median": round(statistics.median(ratios), 3),
            "eager_over_compiled_range": [round(min(ratios), 3), round(max(ratios), 3)],
        }
        r = out[str(length)]
        print(f"  length {length:3d} ({r['batch_rows']} rows, {tokens:,} tokens): first compiled "
              f"call {first:.1f} s; eager {r['eager_ms']:.1f} ms, compiled {r['compiled_ms']:.1f} "
              f"ms a step; eager / compiled {r['eager_over_compiled_median']:.2f} "
              f"({r['eager_over_compiled_range'][0]:.2f}-{r['eager_over_compiled_range'][1]:.2f})",
              flush=True)
    return out


def eager_step_ms(args, cast, vocab: int) -> float:
    config = cpu_model_config(vocab, vocab)
    torch.manual_seed(0)
    model = Transformer(config)
    step = make_step(model, model, cast, vocab)
    b = batch(args, args.length, vocab, seed=1)
    step(*b)
    return 1e3 * timed(lambda: step(*b), args.steps * 2)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--precision", choices=["preset", "fp32", "bf16"], default="preset")
    p.add_argument("--tokens", type=int, default=2048,
                   help="source + target tokens per batch (the preset's budget)")
    p.add_argument("--batch", type=int, default=64, help="fused QKV: rows")
    p.add_argument("--length", type=int, default=16, help="fused QKV: tokens per row")
    p.add_argument("--buckets", type=int, nargs="+", default=[16, 32],
                   help="compile: padded lengths (one compilation each)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=20, help="fused QKV: calls per round")
    p.add_argument("--steps", type=int, default=5, help="compile: steps per round")
    p.add_argument("--skip-compile", action="store_true")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "speed_options.json")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.time()
    before = print_machine("before")
    if args.precision == "preset":
        use_bf16, said = precision(torch.device("cpu"), "native")
    else:
        use_bf16, said = args.precision == "bf16", args.precision
    cast = autocast_for(use_bf16)
    vocab = CPU_TOKENIZERS["vocab_size"]
    print(f"precision: {said}; vocabulary {vocab:,}; "
          f"share_embeddings {CPU_MODEL['share_embeddings']}, tie_output {CPU_MODEL['tie_output']}",
          flush=True)

    qkv = fused_qkv(args, cast)
    step_ms = eager_step_ms(args, cast, vocab)
    # attention layers: encoder self-attention, decoder self- and cross-attention
    projections = CPU_MODEL["num_encoder_layers"] + 2 * CPU_MODEL["num_decoder_layers"]
    bound = projections * (qkv["separate_ms"] - qkv["fused_ms"]) / step_ms
    print(f"fused QKV, ({args.batch}, {args.length}, {CPU_MODEL['d_model']}): three products "
          f"{qkv['separate_ms']:.3f} ms, one stacked {qkv['fused_ms']:.3f} ms "
          "(forward + backward); "
          f"separate / fused {qkv['separate_over_fused_median']:.2f} "
          f"({qkv['separate_over_fused_range'][0]:.2f}-{qkv['separate_over_fused_range'][1]:.2f})",
          flush=True)
    print(f"an eager training step of the same tokens: {step_ms:.1f} ms; fusing all "
          f"{projections} attention layers' projections would save at most {100 * bound:.1f}% "
          "of it", flush=True)
    record = {
        "what": "speed options for the command line's model: fused QKV, torch.compile buckets",
        "script": "benchmarks/bench_speed_options.py", **run_stamp(started),
        "machine_before": before, "precision": said, "tokens_per_batch": args.tokens,
        "fused_qkv": {**qkv, "shape": [args.batch, args.length, CPU_MODEL["d_model"]],
                      "eager_step_ms": round(step_ms, 1), "attention_layers": projections,
                      "step_saving_upper_bound": round(bound, 4)},
    }
    if not args.skip_compile:
        print("torch.compile(dynamic=False), one training step:", flush=True)
        record["compile"] = compile_buckets(args, cast, vocab)
    record["machine_after"] = print_machine("after")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
