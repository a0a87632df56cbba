"""Ten minutes of float32 training on a 120 GFLOP/s machine (issue 28): choose on
validation, then score the test split once.

Issue 28 asks what ``train``'s defaults give in ten minutes of float32 on a
laptop-class CPU without fast bf16: a machine whose 1024² float32 matmul
measures about 120 GFLOP/s with 2 threads (the project's AVX2 machine: 119 on
2026-12-01). On a faster machine each run trains for ``10 × 120 / G`` minutes,
``G`` the matmul measured here (``budget``), in float32 (``--amp off``).

    python benchmarks/float32_ten_minutes.py budget
    python benchmarks/float32_ten_minutes.py choose --minutes M   # validation only
    python benchmarks/float32_ten_minutes.py test --minutes M     # the defaults, test once

``choose``: the target side's pieces (``--target-pieces all``, every piece of
the joint model, against ``seen``, the pieces of the training targets: a
smaller output layer, so more steps in the same time), seeds 0, 1, 2, each run
``train --minutes M --amp off`` then ``evaluate --split val --beam 4``.
:data:`RULE`, fixed before the runs. Writes ``results/float32_choice.json``.

``test``: ``train``'s defaults (after the choice) with ``--amp off``, each
run for ``--minutes M`` (the record's runs: the choice's budget) or, without
it, ``10 × 120 / G`` minutes with ``G`` measured just before each run (median
of three; a first try, stopped: on this drifting machine one reading is a poor
guide), seeds 0, 1, 2, each scored on validation and **once** on
test_2016_flickr (beam 4 and greedy). Writes ``results/float32_ten_minutes.json``
and chapter 10's copy of both steps, ``minitransformer/results/float32_ten_minutes.json``
(``{"choice": ..., "test": ...}``).

Both print the machine before and after, and refuse to start on a busy
machine (load average above 1.5; ``--force`` runs anyway, and the record says so):
a time budget measures the machine as much as the model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import machine
from campaign_translator import run_config, run_quietly, score_checkpoint, source_commit

from minitransformer.data import load_multi30k

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
BOOK_COPY = ROOT / "minitransformer" / "results" / "float32_ten_minutes.json"
#: The laptop-class machine of issue 28: GFLOP/s of a 1024² float32 matmul, 2 threads.
REFERENCE_GFLOPS = 120.0
SEEDS = (0, 1, 2)
#: The configurations ``choose`` compares (train flags), the preset's first.
VARIANTS = {
    "all pieces": ["--amp", "off", "--target-pieces", "all"],
    "target pieces": ["--amp", "off", "--target-pieces", "seen"],
}
RULE = ("'target pieces' replaces 'all pieces' if its mean validation beam-4 cased BLEU over "
        "seeds 0, 1, 2 is at least that of 'all pieces' (it computes the same kind of model "
        "with a smaller output layer, so more steps fit in the budget; it must not cost "
        "quality); spreads reported beside")
MAX_LOAD = 1.5


def budget_minutes(gflops: float) -> float:
    """``10 × 120 / gflops`` minutes, rounded to 0.1."""
    return round(10 * REFERENCE_GFLOPS / gflops, 1)


def _check_load(force: bool) -> float:
    load = os.getloadavg()[0]
    if load > MAX_LOAD and not force:
        sys.exit(f"load average {load:.2f} > {MAX_LOAD}: the machine is busy, and a time budget "
                 "would measure that (--force runs anyway, and the record says so)")
    return load


def _summary(runs: list[dict], key) -> dict:
    values = [key(r) for r in runs]
    return {"mean": round(statistics.mean(values), 2), "min": min(values), "max": max(values),
            "values": values}


def tokens_per_second(folder: Path) -> float:
    """A run's training speed from its ``history.json``: the non-pad source +
    target tokens of every step over the training seconds (validation excluded)."""
    history = json.loads((folder / "history.json").read_text())
    return round(sum(history["tokens"]) / history["seconds"][-1], 1)


def choose(summary: dict[str, dict]) -> str:
    """The variant :data:`RULE` picks from ``{name: {"bleu": {"mean": ...}}}``."""
    preset, candidate = list(VARIANTS)
    better = summary[candidate]["bleu"]["mean"] >= summary[preset]["bleu"]["mean"]
    return candidate if better else preset


def cmd_budget(args) -> None:
    gflops = machine.matmul_gflops()["wall"]
    print(f"1024² float32 matmul, 2 threads: {gflops:.0f} GFLOP/s; budget "
          f"10 × {REFERENCE_GFLOPS:.0f} / {gflops:.0f} = {budget_minutes(gflops)} minutes")


def _args_for_runs(args) -> argparse.Namespace:
    return argparse.Namespace(minutes=args.minutes, smoke=False, out_dir=args.out_dir,
                              keep_runs=None)


def cmd_choose(args) -> None:
    load = _check_load(args.force)
    before = machine.print_machine("before")
    valid = load_multi30k("val")
    runs = []
    for seed in SEEDS:  # seed by seed: a stop leaves whole comparisons
        for name, options in VARIANTS.items():
            runs.append(run_config(name, options, seed, _args_for_runs(args), valid))
            runs[-1]["tokens_per_second"] = tokens_per_second(Path(runs[-1]["folder"]))
    after = machine.print_machine("after")
    summary = {name: {"bleu": _summary([r for r in runs if r["name"] == name],
                                       lambda r: r["val_beam4"]["bleu"]),
                      "steps": _summary([r for r in runs if r["name"] == name],
                                        lambda r: r["steps"])}
               for name in VARIANTS}
    chosen = choose(summary)
    for name, s in summary.items():
        print(f"{name}: validation BLEU {s['bleu']['mean']:.2f} ({s['bleu']['min']:.2f}-"
              f"{s['bleu']['max']:.2f}), steps {s['steps']['values']}")
    print(f"chosen: {chosen} ({RULE})")
    record = {"issue": 28, "rule": RULE, "minutes": args.minutes,
              "reference_gflops": REFERENCE_GFLOPS, "variants": VARIANTS, "runs": runs,
              "summary": summary, "chosen": chosen, "load_at_start": round(load, 2),
              "forced": args.force, "machine_before": before, "machine_after": after,
              "commit": source_commit(), **machine.run_stamp()}
    _write(args.result or RESULTS / "float32_choice.json", record)


def _write(out: Path, record: dict) -> None:
    """Write ``record`` as the JSON file ``out`` and say so."""
    out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def cmd_test(args) -> None:
    load = _check_load(args.force)
    before = machine.print_machine("before")
    pairs = {split: load_multi30k(split) for split in ("val", "test_2016_flickr")}
    runs = []
    for seed in SEEDS:
        out = args.out_dir / f"defaults_seed{seed}"
        # the machine's speed drifts between runs: each run's budget from its own measurement
        gflops = statistics.median(machine.matmul_gflops()["wall"] for _ in range(3))
        minutes = args.minutes or budget_minutes(gflops)
        print(f"\n1024² float32 matmul just before (median of 3): {gflops:.0f} GFLOP/s; "
              f"budget {minutes:g} minutes", flush=True)
        train = [sys.executable, "-m", "minitransformer", "train", "--out", str(out),
                 "--overwrite", "--minutes", f"{minutes:g}", "--amp", "off",
                 "--seed", str(seed), "--no-bleu", "--quiet"]
        print(f"\n== seed {seed}: {' '.join(train[3:])}", flush=True)
        t0 = time.perf_counter()
        printed = run_quietly(train).strip()
        print(printed, flush=True)
        history = json.loads((out / "history.json").read_text())
        run = {"seed": seed, "command": " ".join(train[1:]), "printed": printed,
               "steps": history["step"][-1], "valid_loss": history["valid_loss"][-1],
               "seconds": round(time.perf_counter() - t0, 1), "matmul_gflops_before": gflops,
               "minutes": minutes, "tokens_per_second": tokens_per_second(out)}
        for split, beam in (("val", 4), ("test_2016_flickr", 4), ("test_2016_flickr", 1)):
            scores = score_checkpoint(out, split, beam, out / f"{split}_beam{beam}.txt",
                                      _args_for_runs(args), pairs[split])
            run[f"{split}_beam{beam}"] = scores
            print(f"   {split} beam {beam}: BLEU {scores['bleu']:.2f} cased, "
                  f"{scores['bleu_lc']:.2f} lower-cased, chrF {scores['chrf']:.2f}", flush=True)
        runs.append(run)
    after = machine.print_machine("after")
    summary = {key: _summary(runs, lambda r, k=key: r[k]["bleu"])
               for key in ("val_beam4", "test_2016_flickr_beam4", "test_2016_flickr_beam1")}
    summary["steps"] = _summary(runs, lambda r: r["steps"])
    print(json.dumps(summary))
    record = {"issue": 28, "minutes": args.minutes, "reference_gflops": REFERENCE_GFLOPS,
              "runs": runs, "summary": summary, "load_at_start": round(load, 2),
              "forced": args.force, "machine_before": before, "machine_after": after,
              "commit": source_commit(), **machine.run_stamp()}
    _write(args.result or RESULTS / "float32_ten_minutes.json", record)
    if args.result is None:  # the real record: chapter 10's copy, with the choice behind it
        choice = json.loads((RESULTS / "float32_choice.json").read_text(encoding="utf-8"))
        book = {"choice": choice, "test": record}
        BOOK_COPY.write_text(json.dumps(book, indent=1, ensure_ascii=False) + "\n",
                             encoding="utf-8")
        print(f"wrote {BOOK_COPY}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("budget", help="measure the matmul and print the budget")
    for name, help_text in (("choose", "the target pieces on validation"),
                            ("test", "train's defaults in float32, then the test split")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--minutes", type=float, required=name == "choose",
                       help="each run's budget (`budget` prints 10 x 120 / measured GFLOP/s; "
                       "test without it: 10 x 120 / the matmul measured before each run)")
        p.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "float32")
        p.add_argument("--result", type=Path, default=None, help="the JSON record's path")
        p.add_argument("--force", action="store_true", help="run on a busy machine")
    args = parser.parse_args(argv)
    {"budget": cmd_budget, "choose": cmd_choose, "test": cmd_test}[args.command](args)


if __name__ == "__main__":
    main()
