"""Choose the translator's vocabulary size and tying on the validation split.

Phase one of ``benchmarks/campaign_translator.sh`` (run it on an otherwise
idle machine). Each configuration is trained by the command line
(``python -m minitransformer train``, the preset's settings otherwise) for
the same budget, then translates the **validation** split with beam 4; the
score is sacreBLEU's cased BLEU (lower-cased BLEU and chrF are recorded
beside it). The test split is never looked at here.

1. Joint BPE vocabularies of ``--sizes`` pieces, three-way tied (seed 0).
2. At the best size: untied, and shared embeddings with an untied output
   layer (``--tyings``); and the word-level model (the former defaults) for
   reference (``--no-words`` skips it).
3. The two best configurations again with seeds 1 and 2.

Rule: the best mean over three seeds wins; a configuration whose mean is
within the spread (max − min over seeds) of the best is preferred if it has
a smaller vocabulary, then if it ties all three matrices (fewer parameters,
the paper's choice).

    python benchmarks/campaign_translator.py choose --minutes 10 --out-dir runs/campaign
    python benchmarks/campaign_translator.py apply                 # edit the preset
    python benchmarks/campaign_translator.py choose --minutes 0.2 --sizes 4000 8000 --smoke

Writes ``benchmarks/results/campaign_choice.json`` (every run: command,
steps, validation cross-entropy, scores; the summary and the choice).
``apply`` writes the choice into ``minitransformer/training/presets.py`` (the
lines marked "provisional") and a summary for chapter 10 into
``minitransformer/results/vocab_choice.json``; review and commit both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import machine

from minitransformer.data import load_multi30k
from minitransformer.metrics import corpus_scores
from minitransformer.training.presets import CPU_MODEL, CPU_TOKENIZERS

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "campaign_choice.json"
PRESETS = ROOT / "minitransformer" / "training" / "presets.py"
BOOK_COPY = ROOT / "minitransformer" / "results" / "vocab_choice.json"
RULE = ("the best mean over three seeds wins; a configuration whose mean is within the "
        "spread (max - min over seeds) of the best is preferred if it has a smaller "
        "vocabulary, then if it ties all three matrices")

#: tying name → train options
TYING = {
    "three-way": ["--share-embeddings", "--tie-output"],
    "shared embeddings": ["--share-embeddings", "--no-tie-output"],
    "untied": ["--no-share-embeddings", "--no-tie-output"],
}


def run_config(name: str, options: list[str], seed: int, args, valid) -> dict:
    """Train one configuration with the command line, translate the
    validation split with beam 4, score it; returns the record."""
    out = args.out_dir / f"{name.replace(' ', '_')}_seed{seed}"
    train = [sys.executable, "-m", "minitransformer", "train", "--out", str(out), "--overwrite",
             "--minutes", f"{args.minutes:g}", "--seed", str(seed), "--no-bleu", "--quiet",
             *options]
    hyp_file = out / "val_beam4.txt"
    evaluate = [sys.executable, "-m", "minitransformer", "evaluate", "--checkpoint", str(out),
                "--split", "val", "--beam", "4", "--output", str(hyp_file), "--overwrite"]
    if args.smoke:
        evaluate += ["--limit", "50"]
    print(f"\n== {name}, seed {seed}: {' '.join(train[3:])}", flush=True)
    t0 = time.perf_counter()
    log = subprocess.run(train, check=True, capture_output=True, text=True).stdout
    print(log.strip(), flush=True)
    subprocess.run(evaluate, check=True, capture_output=True, text=True)
    hyps = hyp_file.read_text(encoding="utf-8").split("\n")[:-1]
    refs = [t for _, t in valid][: len(hyps)]
    scores = corpus_scores(hyps, refs)
    history = json.loads((out / "history.json").read_text())
    record = {
        "name": name, "seed": seed, "options": options, "command": " ".join(train[1:]),
        "folder": str(out), "steps": history["step"][-1],
        "valid_loss": history["valid_loss"][-1], "minutes": round(time.perf_counter() - t0, 1),
        "val_beam4": {"bleu": round(scores.bleu.score, 2),
                      "bleu_lc": round(scores.bleu_lc.score, 2),
                      "chrf": round(scores.chrf.score, 2)},
        "signature": scores.bleu.signature,
    }
    print(f"   {record['steps']} steps, validation cross-entropy {record['valid_loss']:.3f}; "
          f"val beam 4: BLEU {scores.bleu.score:.2f} cased, {scores.bleu_lc.score:.2f} "
          f"lower-cased, chrF {scores.chrf.score:.2f}", flush=True)
    return record


def summarise(runs: list[dict]) -> dict[str, dict]:
    by_name: dict[str, list[float]] = {}
    for r in runs:
        by_name.setdefault(r["name"], []).append(r["val_beam4"]["bleu"])
    return {name: {"mean": round(statistics.mean(v), 2), "min": min(v), "max": max(v),
                   "seeds": len(v)} for name, v in by_name.items()}


def choose(summary: dict[str, dict], configs: dict[str, dict]) -> str:
    """The rule of the module docstring, among configurations with 3 seeds
    (or all, if none has 3)."""
    pool = {n: s for n, s in summary.items() if s["seeds"] >= 3} or summary
    best = max(pool, key=lambda n: pool[n]["mean"])
    spread = pool[best]["max"] - pool[best]["min"]
    close = [n for n in pool if pool[n]["mean"] >= pool[best]["mean"] - spread]
    return min(close, key=lambda n: (configs[n]["vocab_size"] or 10**9,
                                     configs[n]["tying"] != "three-way", -pool[n]["mean"]))


def cmd_choose(args) -> None:
    started = time.time()
    before = machine.print_machine("before")
    valid = load_multi30k("val")
    configs: dict[str, dict] = {}
    runs: list[dict] = []

    def add(name: str, vocab_size: int | None, tying: str, seed: int) -> None:
        options = (["--tokenizer", "words", "--no-tie-output"] if vocab_size is None else
                   ["--tokenizer", "subword", "--vocab-size", str(vocab_size), *TYING[tying]])
        configs[name] = {"vocab_size": vocab_size, "tying": tying, "options": options}
        runs.append(run_config(name, options, seed, args, valid))

    for size in args.sizes:
        add(f"bpe{size} three-way", size, "three-way", 0)
    best_size = max(args.sizes, key=lambda v: summarise(runs)[f"bpe{v} three-way"]["mean"])
    for tying in args.tyings:
        add(f"bpe{best_size} {tying}", best_size, tying, 0)
    if args.words:
        add("words untied", None, "untied", 0)
    first = summarise(runs)
    top_two = sorted((n for n in first if n != "words untied"),
                     key=lambda n: -first[n]["mean"])[:2]
    for name in top_two:
        for seed in (1, 2):
            c = configs[name]
            add(name, c["vocab_size"], c["tying"], seed)
    summary = summarise(runs)
    chosen = choose(summary, configs)
    print("\nvalidation, beam 4, cased BLEU: mean (min to max, seeds)")
    for name, s in sorted(summary.items(), key=lambda kv: -kv[1]["mean"]):
        print(f"  {name:28s} {s['mean']:6.2f} ({s['min']:.2f} to {s['max']:.2f}, {s['seeds']})")
    print(f"chosen: {chosen} (preset now: vocab_size {CPU_TOKENIZERS['vocab_size']}, "
          f"share_embeddings {CPU_MODEL['share_embeddings']}, "
          f"tie_output {CPU_MODEL['tie_output']})")
    record = {
        "what": "vocabulary size and tying of the translator, chosen on the validation split "
                "(beam 4, cased sacreBLEU) after equal training budgets",
        "script": "benchmarks/campaign_translator.py",
        **machine.run_stamp(started),
        "minutes_per_run": args.minutes, "smoke": args.smoke,
        "machine_before": before, "machine_after": machine.print_machine("after"),
        "runs": runs, "summary": summary, "configs": configs, "chosen": chosen,
        "chosen_config": configs[chosen],
        "chosen_folders": [r["folder"] for r in runs if r["name"] == chosen],
    }
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
    print(f"wrote {args.result}")


def cmd_apply(args) -> None:
    """Write the chosen vocabulary size and tying into the preset."""
    choice = json.loads(args.result.read_text())["chosen_config"]
    if choice["vocab_size"] is None:
        sys.exit("apply: the word-level model won; change the preset by hand (kind='words')")
    text = PRESETS.read_text()
    tied = {"three-way": (True, True), "shared embeddings": (True, False),
            "untied": (False, False)}[choice["tying"]]
    for key, value in (("share_embeddings", tied[0]), ("tie_output", tied[1]),
                       ("vocab_size", choice["vocab_size"])):
        text, n = re.subn(rf'("{key}": )[^,]+,', rf"\g<1>{value},", text, count=1)
        if n != 1:
            sys.exit(f"apply: no line for {key!r} in {PRESETS}")
    PRESETS.write_text(text)
    print(f"{PRESETS}: vocab_size {choice['vocab_size']}, share_embeddings {tied[0]}, "
          f"tie_output {tied[1]} (review and commit)")
    write_book_copy(json.loads(args.result.read_text()))


def write_book_copy(record: dict) -> None:
    """The part of the record chapter 10 prints, as a package result
    (``minitransformer/results/vocab_choice.json``; installed with the
    package, so the chapter runs without the benchmarks folder)."""
    keep = ("what", "script", "command", "date", "minutes_per_run", "summary", "chosen",
            "chosen_config")
    copy = {k: record[k] for k in keep}
    copy["rule"] = RULE
    copy["machine_before"] = {k: record["machine_before"][k]
                              for k in ("cpu", "torch_threads", "matmul_1024_gflops",
                                        "load_average_1_5_15")
                              if k in record["machine_before"]}
    copy["runs"] = [{k: r[k] for k in ("name", "seed", "steps", "valid_loss", "val_beam4")}
                    for r in record["runs"]]
    BOOK_COPY.write_text(json.dumps(copy, indent=1, ensure_ascii=False) + "\n",
                         encoding="utf-8")
    print(f"wrote {BOOK_COPY}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("choose", help="train and score every configuration on validation")
    c.add_argument("--minutes", type=float, default=10.0, help="training budget of each run")
    c.add_argument("--sizes", type=int, nargs="+", default=[4000, 8000, 12000],
                   help="joint BPE vocabulary sizes to compare")
    c.add_argument("--tyings", nargs="*", default=["untied", "shared embeddings"],
                   choices=["untied", "shared embeddings"],
                   help="the other tyings to try at the best size (seed 0)")
    c.add_argument("--no-words", dest="words", action="store_false",
                   help="skip the word-level reference run")
    c.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "campaign")
    c.add_argument("--smoke", action="store_true", help="score 50 validation sentences only")
    for q in (c, sub.add_parser("apply", help="write the choice into the preset")):
        q.add_argument("--result", type=Path, default=RESULT)
    args = p.parse_args()
    if hasattr(args, "out_dir"):
        args.out_dir = args.out_dir.resolve()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    {"choose": cmd_choose, "apply": cmd_apply}[args.command](args)


if __name__ == "__main__":
    main()
