"""Each 2020s part against its 2017 one, on chapter 11's caption language model.

Issue 24, items 1 and 3 (chapter 12 reads the result with
``load_result("modern_parts")``).

**Same parameter count, same CPU time.** The base is chapter 11's small GPT
(:class:`~minitransformer.LanguageModel`: width 128, 4 heads, 2 layers,
``d_ff`` 256, pre-LN, no dropout, an untied output layer) on Multi30k's
English captions with a 2,000-piece SentencePiece model learnt from the
training captions. Each variant changes one part (or, ``2020s``, all of
them: :data:`~minitransformer.training.presets.ERA_PARTS`) and gets the
feed-forward width that brings it back to the base's parameter count
(:func:`~minitransformer.matched_d_ff`: grouped key/value heads and dropped
biases give their weights to the feed-forward networks). Equal CPU time:
each variant's training speed is measured first (``--timing-seconds`` of
training, ``--rounds`` rounds in turn, one thread, nothing else of this
script running), and each run then makes the steps that its variant makes
in ``--seconds`` at that speed. The runs themselves go two at a time, one
thread each (``--workers``): since the step counts are fixed, a busy machine
makes them slower but not different.

Each run: Adam with the warm-up schedule (the recipe of chapter 11's small
GPT, the same for every variant: tuned for none of them), float32, its own
seed for the initialisation and the order of batches; then the validation
perplexity, ``exp`` of :func:`~minitransformer.evaluate_loss` on the val
captions.

**The key/value cache of grouped-query attention** (item 3, ``--cache``):
a larger untrained model (random weights: the time of a step does not
depend on them) for ``num_kv_heads`` 8, 4, 2, 1 of 8 query heads: the bytes
its cache holds after a context of ``--context`` tokens
(:meth:`~minitransformer.lm.LanguageModelState.num_bytes`; the prompt's
keys and values), and the time
per generated token at that context (best of ``--repeats``, the settings in
turn), one thread.

    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_modern_parts.py
    python benchmarks/bench_modern_parts.py --smoke                 # a quick check of the path

Prints the machine before and after (``benchmarks/machine.py``) and writes
``--out`` (default ``minitransformer/results/modern_parts.json``; ``--smoke``
writes to the temporary folder unless ``--out`` is given). Results:
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import machine
import torch

from minitransformer import (
    LanguageModel,
    LanguageModelConfig,
    count_parameters,
    evaluate_loss,
    fit,
    matched_d_ff,
)
from minitransformer.data import LMBatcher, SubwordTokenizer, load_multi30k
from minitransformer.instruments.summary import model_of
from minitransformer.training import TrainConfig
from minitransformer.training.presets import ERA_PARTS

ROOT = Path(__file__).resolve().parent
RESULT = ROOT.parent / "minitransformer" / "results" / "modern_parts.json"
PIECES = 2000  # chapter 11's English-only subword model
#: chapter 11's small GPT (its WIDTH and gpt_config)
BASE = {"d_model": 128, "num_heads": 4, "num_layers": 2, "d_ff": 256, "dropout": 0.0,
        "norm_first": True, "max_len": 512}
#: each variant: the fields it changes from the 2017 base (whose parts are the defaults)
VARIANTS: dict[str, dict] = {
    "2017": {},
    "rmsnorm": {"norm": "rmsnorm"},
    "gelu": {"feed_forward": "gelu"},
    "swiglu": {"feed_forward": "swiglu"},
    "rope": {"positional": "rope"},
    "no-bias": {"bias": False},
    "gqa-2": {"num_kv_heads": 2},
    "mqa": {"num_kv_heads": 1},
    "2020s": {k: v for k, v in ERA_PARTS["2020s"].items() if k != "norm_first"},
}
MAX_TOKENS = 1024  # tokens per training batch (chapter 11's)
LR, WARMUP = 2e-3, 100
CACHE_MODEL = {"d_model": 512, "num_heads": 8, "num_layers": 4, "d_ff": 2048, "dropout": 0.0,
               "norm_first": True, "max_len": 4096}
SMOKE = {"seconds": 2.0, "timing_seconds": 1.0, "rounds": 1, "seeds": [0], "captions": 2000,
         "context": 64, "repeats": 1, "new_tokens": 4}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0,
                   help="CPU time of each run, one thread, at its variant's measured speed")
    p.add_argument("--timing-seconds", type=float, default=10.0,
                   help="training time of each timing round")
    p.add_argument("--rounds", type=int, default=2, help="timing rounds, the variants in turn")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    p.add_argument("--workers", type=int, default=2, help="runs at a time, one thread each")
    p.add_argument("--captions", type=int, default=None,
                   help="train on the first N captions only (smoke)")
    p.add_argument("--context", type=int, default=1024,
                   help="context of the cache measurement (tokens)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens timed per repeat")
    p.add_argument("--repeats", type=int, default=3, help="repeats of the cache timing")
    p.add_argument("--no-cache", action="store_true", help="skip the cache measurement")
    p.add_argument("--no-train", action="store_true", help="skip the training runs")
    p.add_argument("--pieces", type=int, default=PIECES,
                   help="pieces of the subword model (default chapter 11's; tests shrink it)")
    p.add_argument("--lock", type=Path, default=None,
                   help="a file that exists while a timing phase runs (others may wait on it)")
    p.add_argument("--data-root", type=Path, default=None)
    p.add_argument("--smoke", action="store_true", help=f"a quick check: {SMOKE} unless given")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.smoke:
        given = {a.split("=")[0] for a in (sys.argv[1:] if argv is None else argv)}
        for key, value in SMOKE.items():
            if f"--{key.replace('_', '-')}" not in given:
                setattr(args, key, value)
    if args.out is None:
        args.out = (Path(tempfile.gettempdir()) / "modern_parts_smoke.json" if args.smoke
                    else RESULT)
    for name in ("seconds", "timing_seconds"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    return args


# --------------------------------------------------------------------------- models


def base_config(vocab_size: int) -> LanguageModelConfig:
    return LanguageModelConfig(vocab_size=vocab_size, **BASE)


def variant_config(name: str, vocab_size: int) -> LanguageModelConfig:
    """The base with the variant's parts, at the base's parameter count."""
    base = base_config(vocab_size)
    config = dataclasses.replace(base, **VARIANTS[name])
    if name == "2017":
        return config
    target = count_parameters(model_of(base))
    return dataclasses.replace(config, d_ff=matched_d_ff(config, target))


# --------------------------------------------------------------------------- data

_DATA: dict = {}


def load_data(captions: int | None, data_root: Path | None, pieces: int = PIECES) -> dict:
    """The English captions of Multi30k's train (the first ``captions``) and
    val splits, as ids of a subword model of ``pieces`` learnt from train."""
    train = [en for _, en in load_multi30k("train", root=data_root)][:captions]
    valid = [en for _, en in load_multi30k("val", root=data_root)]
    tok = SubwordTokenizer.train(train, pieces)
    return {"vocab_size": len(tok), "train": [tok.encode(s) for s in train],
            "valid": [tok.encode(s) for s in valid]}


def _init_worker(data: dict) -> None:
    torch.set_num_threads(1)
    _DATA.update(data)


def train_config(seed: int, **budget) -> TrainConfig:
    return TrainConfig(lr=LR, schedule="noam", warmup_steps=WARMUP, label_smoothing=0.0,
                       epochs=None, seed=seed, device="cpu", amp="off", **budget)


def train(name: str, seed: int, steps: int | None = None, seconds: float | None = None) -> dict:
    """One run of variant ``name`` in this process: ``steps`` steps (or
    ``seconds`` of training, for the timing), then, after a fixed step count,
    the validation perplexity."""
    data = _DATA
    config = variant_config(name, data["vocab_size"])
    torch.manual_seed(seed)
    model = LanguageModel(config)
    batches = LMBatcher(data["train"], max_tokens=MAX_TOKENS, shuffle=True, seed=seed)
    budget = {"max_steps": steps} if steps else {"max_minutes": seconds / 60}
    history = fit(model, batches, None, train_config(seed, **budget), progress=False)
    done = history.step[-1] if history.step else 0
    spent = history.seconds[-1] if history.seconds else 0.0
    record = {"variant": name, "seed": seed, "steps": done, "d_ff": config.d_ff,
              "parameters": count_parameters(model), "train_seconds": round(spent, 2),
              "steps_per_second": round(done / spent, 3) if spent else None,
              "tokens_per_second": round(sum(history.tokens) / spent, 1) if spent else None,
              "epochs": round(done / len(batches), 3)}
    if steps:
        valid = list(LMBatcher(data["valid"], max_tokens=4096, shuffle=False))
        loss = evaluate_loss(model, valid, amp="off")
        record.update(valid_loss=round(loss, 4), valid_perplexity=round(math.exp(loss), 3),
                      load_average_end=[round(x, 2) for x in os.getloadavg()])
    return record


# --------------------------------------------------------------------------- phases


def measure_speeds(args: argparse.Namespace) -> dict:
    """Each variant's steps and tokens per second: ``--rounds`` rounds of
    ``--timing-seconds``, the variants in turn; the median of the rounds."""
    torch.set_num_threads(1)
    rounds: dict[str, list[dict]] = {name: [] for name in args.variants}
    for r in range(args.rounds):
        order = args.variants if r % 2 == 0 else args.variants[::-1]
        for name in order:
            rounds[name].append(train(name, seed=0, seconds=args.timing_seconds))
            print(f"timing round {r + 1}: {name:8s} {rounds[name][-1]['steps_per_second']:7.2f} "
                  f"steps/s, {rounds[name][-1]['tokens_per_second']:9,.0f} tokens/s", flush=True)
    return {name: {"steps_per_second": statistics.median(x["steps_per_second"] for x in rs),
                   "tokens_per_second": statistics.median(x["tokens_per_second"] for x in rs),
                   "rounds": [x["steps_per_second"] for x in rs]}
            for name, rs in rounds.items()}


def run_all(args: argparse.Namespace, data: dict, speeds: dict) -> list[dict]:
    jobs = [(name, seed, max(1, round(args.seconds * speeds[name]["steps_per_second"])))
            for seed in args.seeds for name in args.variants]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.workers, mp_context=context, initializer=_init_worker,
                             initargs=(data,)) as pool:
        futures = [pool.submit(train, name, seed, steps) for name, seed, steps in jobs]
        runs = []
        for f in futures:
            runs.append(f.result())
            r = runs[-1]
            print(f"{r['variant']:8s} seed {r['seed']}: {r['steps']} steps "
                  f"({r['epochs']:.2f} epochs), d_ff {r['d_ff']}, {r['parameters']:,} "
                  f"parameters: validation perplexity {r['valid_perplexity']:.2f}", flush=True)
    return runs


def measure_cache(args: argparse.Namespace) -> list[dict]:
    """Cache bytes and time per generated token against ``num_kv_heads``."""
    torch.set_num_threads(1)
    settings = [8, 4, 2, 1]
    models = {}
    for kv in settings:
        torch.manual_seed(0)
        models[kv] = LanguageModel(LanguageModelConfig(
            vocab_size=8000, num_kv_heads=kv, **CACHE_MODEL)).eval()
    prompt = torch.randint(4, 8000, (1, args.context))
    times: dict[int, list[float]] = {kv: [] for kv in settings}
    nbytes = {}
    with torch.inference_mode():
        for r in range(args.repeats):
            for kv in settings if r % 2 == 0 else settings[::-1]:
                model = models[kv]
                state = model.start(1)
                logits, state = model.step(prompt, state)
                token = logits[:, -1:].argmax(-1)
                nbytes[kv] = state.num_bytes()
                start = time.perf_counter()
                for _ in range(args.new_tokens):
                    logits, state = model.step(token, state)
                    token = logits[:, -1:].argmax(-1)
                times[kv].append((time.perf_counter() - start) / args.new_tokens)
    out = []
    for kv in settings:
        c = models[kv].config
        out.append({"num_kv_heads": kv, "num_heads": c.num_heads,
                    "parameters": count_parameters(models[kv]),
                    "cache_bytes": nbytes[kv], "context": args.context,
                    "cache_bytes_formula": 2 * c.num_layers * kv * (c.d_model // c.num_heads)
                    * 4 * args.context,
                    "ms_per_token": round(1000 * min(times[kv]), 3),
                    "ms_per_token_repeats": [round(1000 * t, 3) for t in times[kv]]})
        print(f"num_kv_heads {kv}: cache {nbytes[kv] / 2**20:6.2f} MiB after "
              f"{args.context} tokens; {out[-1]['ms_per_token']:.2f} ms per token", flush=True)
    return out


@contextlib.contextmanager
def _holding(lock: Path | None):
    """``lock`` exists while the block runs (a timing phase)."""
    if lock is not None:
        lock.touch()
    try:
        yield
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)


def spread(values: list[float]) -> dict:
    return {"mean": round(statistics.mean(values), 4), "min": min(values), "max": max(values),
            "n": len(values)}


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    threads = torch.get_num_threads()  # the phases set 1; given back at the end
    try:
        return _main(args)
    finally:
        torch.set_num_threads(threads)


def _main(args: argparse.Namespace) -> dict:
    started = time.time()
    before = machine.print_machine("before")
    record: dict = {
        "what": "issue 24, items 1 and 3: each 2020s part against the 2017 one on chapter 11's "
                "caption language model, at the same parameter count and CPU time; the "
                "key/value cache against num_kv_heads",
        "script": "benchmarks/bench_modern_parts.py", **machine.run_stamp(started),
        "machine_before": before, "smoke": args.smoke,
    }
    if not args.no_train:
        data = load_data(args.captions, args.data_root, args.pieces)
        _init_worker(data)
        base = base_config(data["vocab_size"])
        record.update({
            "seconds": args.seconds, "seeds": args.seeds, "workers": args.workers,
            "data": {"corpus": "Multi30k English captions", "pieces": args.pieces,
                     "train_captions": len(data["train"]), "valid_captions": len(data["valid"]),
                     "max_tokens": MAX_TOKENS},
            "train_config": train_config(0, max_steps=1).to_dict(),
            "base_config": base.to_dict(),
            "variants": {name: {"changes": VARIANTS[name],
                                "d_ff": variant_config(name, data["vocab_size"]).d_ff,
                                "parameters": count_parameters(model_of(
                                    variant_config(name, data["vocab_size"])))}
                         for name in args.variants},
            "mode_note": f"speeds timed first, one thread, {args.rounds} rounds of "
                         f"{args.timing_seconds:g} s; then each run's steps = {args.seconds:g} s "
                         f"x its variant's steps/s, {args.workers} runs at a time, one thread each",
        })
        with _holding(args.lock):
            speeds = record["speeds"] = measure_speeds(args)
        runs = record["runs"] = run_all(args, data, speeds)
        record["summary"] = {
            name: {"valid_perplexity": spread([r["valid_perplexity"] for r in runs
                                               if r["variant"] == name]),
                   "steps": speeds and next(r["steps"] for r in runs if r["variant"] == name),
                   "tokens_per_second": round(speeds[name]["tokens_per_second"], 1),
                   "parameters": record["variants"][name]["parameters"]}
            for name in args.variants}
        for name, s in record["summary"].items():
            p = s["valid_perplexity"]
            print(f"{name:8s} perplexity {p['mean']:.2f} ({p['min']:.2f} to {p['max']:.2f}, "
                  f"{p['n']} seeds); {s['tokens_per_second']:,.0f} tokens/s; {s['steps']} steps")
    if not args.no_cache:
        with _holding(args.lock):
            record["cache"] = measure_cache(args)
        record["cache_model"] = CACHE_MODEL
    record["machine_after"] = machine.print_machine("after")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
