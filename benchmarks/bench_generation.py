"""Generation with and without the key/value cache: time per token against length.

A :class:`minitransformer.LanguageModel` of chapter 11's size (width 256, 8
heads, ``--layers`` layers, feed-forward ``--d-ff``, an 8,000-piece
vocabulary, pre-LN; random weights: the time of a step does not depend on
what the weights are) extends a prompt of ``--prompt-len`` tokens by
``--new-tokens`` tokens, one row, greedily, with
:func:`minitransformer.generate` ``use_cache=True`` (each step feeds one
token through the cache) and ``use_cache=False`` (each step runs the whole
sequence again). The two alternate for ``--rounds`` rounds each, so a change
in the machine's load affects both alike, and must produce the same tokens.

Measured per round: the wall time of the whole ``generate`` call (its time
per new token, the headline; issue 23's target is the cached path at least
3x faster per token at 256 new tokens), and the time of each model call
inside it (the model's ``step`` with the cache, its ``forward`` without),
read at the positions ``--at`` (the median of the few calls ending there).
Then the cache's memory: ``2 · layers · d_model`` float32 numbers (4 bytes)
per token per row in closed form, checked against
:meth:`LanguageModelState.num_bytes` of the tensors after a prompt of
``--prompt-len + --new-tokens`` tokens.

    python benchmarks/bench_generation.py --threads 2
    python benchmarks/bench_generation.py --rounds 1 --new-tokens 16 --at 8 16 --out /tmp/g.json

Prints the machine before and after (``benchmarks/machine.py``) and writes
every round's times to ``--out`` (default
``benchmarks/results/generation_cache.json``); the results are in
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import machine
import torch

from minitransformer import LanguageModel, LanguageModelConfig, count_parameters, generate

ROOT = Path(__file__).resolve().parent
BYTES_PER_FLOAT32 = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4, help="layers of the model (default 4)")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--prompt-len", type=int, default=4, help="tokens of the prompt")
    p.add_argument("--new-tokens", type=int, default=256, help="tokens generated per call")
    p.add_argument("--at", type=int, nargs="+", default=[32, 64, 128, 256],
                   help="new-token positions at which the per-step time is reported")
    p.add_argument("--window", type=int, default=4,
                   help="model calls ending at each --at position whose median is reported")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each path (alternating)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "generation_cache.json")
    args = p.parse_args(argv)
    if any(not 1 <= a <= args.new_tokens for a in args.at):
        p.error(f"--at positions must be in 1..--new-tokens ({args.new_tokens})")
    return args


def build(args: argparse.Namespace) -> LanguageModel:
    """The model of the chapter's size, random weights, in eval mode."""
    torch.manual_seed(args.seed)
    config = LanguageModelConfig(
        vocab_size=args.vocab, d_model=args.d_model, num_heads=args.heads,
        num_layers=args.layers, d_ff=args.d_ff, dropout=0.0, norm_first=True,
        max_len=args.prompt_len + args.new_tokens,
    )
    return LanguageModel(config).eval()


def timed_calls(model: LanguageModel, name: str) -> tuple[list[float], Callable[[], None]]:
    """Wrap ``model.<name>`` (``step`` or ``forward``) so that each call's
    wall time is appended to the returned list; the second value undoes it."""
    inner, seconds = getattr(model, name), []

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        out = inner(*a, **k)
        seconds.append(time.perf_counter() - t0)
        return out

    setattr(model, name, wrapper)
    return seconds, lambda: delattr(model, name)


def one_round(model: LanguageModel, prompt: torch.Tensor, new_tokens: int,
              use_cache: bool) -> tuple[torch.Tensor, float, list[float]]:
    """``(ids (1, P + N), wall seconds of generate, seconds of each new
    token's model call)``. With the cache, call 0 is the prompt's pass and
    call ``i`` feeds new token ``i`` (producing token ``i + 1``); the last
    new token needs no call. Without it, call ``i`` runs ``P + i`` tokens to
    produce new token ``i + 1``. Returned: the time to produce each new token
    ``1..N`` from the call that produced it."""
    calls, undo = timed_calls(model, "step" if use_cache else "forward")
    try:
        t0 = time.perf_counter()
        ids = generate(model, prompt, new_tokens, temperature=0, use_cache=use_cache)
        wall = time.perf_counter() - t0
    finally:
        undo()
    if len(calls) != new_tokens:
        raise RuntimeError(f"expected {new_tokens} model calls, timed {len(calls)}")
    return ids, wall, calls


def at_positions(per_token: list[float], positions: list[int], window: int) -> dict[str, float]:
    """Median seconds of the ``window`` tokens ending at each position (1-based)."""
    return {str(p): statistics.median(per_token[max(0, p - window):p]) for p in positions}


def cache_memory(model: LanguageModel, prompt_len: int, new_tokens: int) -> dict:
    """The closed form of the cache's bytes per token per row against the
    tensors after ``prompt_len + new_tokens`` tokens (1 and 2 rows)."""
    c = model.config
    closed = 2 * c.num_layers * c.d_model * BYTES_PER_FLOAT32  # keys and values, every layer
    length = prompt_len + new_tokens
    measured = {}
    for rows in (1, 2):
        state = model.start(rows)
        tokens = torch.randint(4, c.vocab_size, (rows, length))
        with torch.inference_mode():
            _, state = model.step(tokens, state)
        measured[str(rows)] = {"tokens": length, "num_bytes": state.num_bytes(),
                               "bytes_per_token_per_row": state.num_bytes() / (rows * length)}
    agree = all(m["bytes_per_token_per_row"] == closed for m in measured.values())
    return {"closed_form": "2 * layers * d_model * 4 bytes", "bytes_per_token_per_row": closed,
            "measured_by_rows": measured, "agree": agree,
            "bytes_at_new_tokens": closed * length}


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.time()
    print(f"torch.get_num_threads() = {torch.get_num_threads()}", flush=True)
    before = machine.print_machine("before")
    model = build(args)
    prompt = torch.randint(4, args.vocab, (1, args.prompt_len),
                           generator=torch.Generator().manual_seed(args.seed))
    print(f"LanguageModel: {args.layers} layers, d_model {args.d_model}, {args.heads} heads, "
          f"d_ff {args.d_ff}, vocabulary {args.vocab:,}, {count_parameters(model):,} "
          f"parameters; prompt {args.prompt_len} tokens, {args.new_tokens} new, greedy", flush=True)
    one_round(model, prompt, min(8, args.new_tokens), True)  # warm-up: allocator, kernels
    one_round(model, prompt, min(8, args.new_tokens), False)
    paths = {"cached": True, "uncached": False}
    rounds: dict[str, list[dict]] = {name: [] for name in paths}
    outputs = {}
    for r in range(args.rounds):
        for name in (list(paths) if r % 2 == 0 else list(paths)[::-1]):
            ids, wall, per_token = one_round(model, prompt, args.new_tokens, paths[name])
            outputs[name] = ids
            rounds[name].append({
                "wall_seconds": round(wall, 5),
                "ms_per_token": round(1000 * wall / args.new_tokens, 4),
                # of which in the model's calls (the rest: sampling, concatenation, checks)
                "model_ms_per_token": round(1000 * sum(per_token) / args.new_tokens, 4),
                "ms_per_step_at": {k: round(1000 * v, 4) for k, v in
                                   at_positions(per_token, args.at, args.window).items()},
                "ms_per_step": [round(1000 * s, 4) for s in per_token],
            })
        print(f"round {r + 1}: " + ", ".join(
            f"{n} {x[-1]['ms_per_token']:.2f} ms/token ({x[-1]['model_ms_per_token']:.2f} in "
            "the model)" for n, x in rounds.items()), flush=True)
    same = torch.equal(outputs["cached"], outputs["uncached"])
    median_ms = {n: statistics.median(x["ms_per_token"] for x in rs) for n, rs in rounds.items()}
    speedups = [u["wall_seconds"] / c["wall_seconds"]
                for c, u in zip(rounds["cached"], rounds["uncached"], strict=True)]
    at = {n: {str(p): statistics.median(x["ms_per_step_at"][str(p)] for x in rs)
              for p in args.at} for n, rs in rounds.items()}
    print(f"\nms per step at new-token position (median of {args.rounds} rounds, each the "
          f"median of {args.window} steps):")
    print(f"{'position':>10s} {'cached':>10s} {'uncached':>10s} {'ratio':>7s}")
    for p in args.at:
        c, u = at["cached"][str(p)], at["uncached"][str(p)]
        print(f"{p:10d} {c:10.3f} {u:10.3f} {u / c:7.2f}")
    memory = cache_memory(model, args.prompt_len, args.new_tokens)
    speedup = statistics.median(speedups)
    print(f"\n{args.new_tokens} new tokens: cached {median_ms['cached']:.3f} ms/token, uncached "
          f"{median_ms['uncached']:.3f} ms/token: cached {speedup:.2f}x faster (median of rounds; "
          f"range {min(speedups):.2f}-{max(speedups):.2f}; target >= 3); same tokens: {same}")
    print(f"cache memory: {memory['bytes_per_token_per_row']:,} bytes per token per row "
          f"(2 x {args.layers} layers x {args.d_model} x 4 bytes); the tensors hold "
          + ", ".join(f"{m['num_bytes']:,} bytes for {rows} row(s) x {m['tokens']} tokens"
                      for rows, m in memory["measured_by_rows"].items())
          + f": {'agree' if memory['agree'] else 'DISAGREE'}")
    after = machine.print_machine("after")
    record = {
        "what": "issue 23: time per generated token with and without the key/value cache, "
                "and the cache's memory per token",
        "script": "benchmarks/bench_generation.py",
        **machine.run_stamp(started),
        "machine_before": before, "machine_after": after,
        "torch_threads": torch.get_num_threads(),
        "model_config": model.config.to_dict(), "parameters": count_parameters(model),
        "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "batch": 1,
        "decoding": "greedy (temperature 0), no EOS", "rounds": args.rounds,
        "positions": args.at, "window": args.window,
        "same_tokens": same,
        "median_ms_per_token": {n: round(v, 4) for n, v in median_ms.items()},
        "median_ms_per_step_at": at,
        "speedup_per_token": {"median": round(speedup, 3), "min": round(min(speedups), 3),
                              "max": round(max(speedups), 3), "target": 3.0,
                              "met": speedup >= 3.0},
        "cache_memory": memory,
        "per_round": rounds,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
