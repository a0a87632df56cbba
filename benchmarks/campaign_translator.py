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

The subcommands ``recipe``, ``recipe-apply`` and ``recipe-test`` choose the
training settings the same way (issue 25): :data:`RECIPE_DOC` below, and
``--help`` of each.
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
from minitransformer.training.presets import CPU_MODEL, CPU_TOKENIZERS, CPU_TRAINING

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "campaign_choice.json"
PRESETS = ROOT / "minitransformer" / "training" / "presets.py"
BOOK_COPY = ROOT / "minitransformer" / "results" / "vocab_choice.json"
RULE = ("the best mean over three seeds wins; a configuration whose mean is within the "
        "spread (max - min over seeds) of the best is preferred if it has a smaller "
        "vocabulary, then if it ties all three matrices")

#: tying name → train options
TYING = {
    "three-way": ["--share-embeddings", "--tie-output", "--target-pieces", "all"],
    "shared embeddings": ["--share-embeddings", "--no-tie-output", "--target-pieces", "all"],
    "untied": ["--no-share-embeddings", "--no-tie-output"],
}


def run_config(name: str, options: list[str], seed: int, args, valid, *,
               averages: tuple[float, ...] = (), score_averages: bool = False,
               resume: bool = False) -> dict:
    """Train one configuration with the command line, translate the
    validation split with beam 4, score it; returns the record.

    ``averages``: moving averages of the weights kept beside the run
    (:func:`train_with_averages`, the same training otherwise); with
    ``score_averages`` each is scored too, as are the trained weights
    (``"0"``) and the run's own average at its last step (``last.pt``):
    ``record["averages"]``. ``resume``: a folder whose ``result.json`` holds
    a finished record of the same options, budget and averages is not run
    again (:func:`finished_record`); every finished run writes one."""
    out = run_folder(args, name, seed)
    budget, kept = budget_of(args), getattr(args, "keep_runs", None)
    if resume and (done := finished_record(out, options, budget, args.smoke, averages,
                                           score_averages, kept)) is not None:
        print(f"\n== {name}, seed {seed}: finished before ({done['_from']}), not re-run",
              flush=True)
        del done["_from"]
        return done
    train = [sys.executable, "-m", "minitransformer", "train", "--out", str(out), "--overwrite",
             *budget_flags(budget), "--seed", str(seed), "--no-bleu", "--quiet", *options]
    launch = train if not averages else [
        sys.executable, str(Path(__file__).resolve()), "train-with-averages",
        "--decays", ",".join(f"{d:g}" for d in averages), *train[4:]]
    print(f"\n== {name}, seed {seed}: {' '.join(train[3:])}"
          + (f" (averages {', '.join(f'{d:g}' for d in averages)} kept beside)"
             if averages else ""), flush=True)
    t0 = time.perf_counter()
    for stale in ("result.json", "averages.json"):  # of an earlier run in this folder
        (out / stale).unlink(missing_ok=True)
    drop_average_files(out)
    print(run_quietly(launch).strip(), flush=True)
    scores = score_checkpoint(out, "val", 4, out / "val_beam4.txt", args, valid)
    signature = scores.pop("signature")
    history = json.loads((out / "history.json").read_text())
    record = {
        "name": name, "seed": seed, "options": options, "command": " ".join(train[1:]),
        "folder": str(out), "steps": history["step"][-1],
        "valid_loss": history["valid_loss"][-1], "seconds": round(time.perf_counter() - t0, 1),
        "val_beam4": scores, "signature": signature,
    }
    if averages:
        record["averages_kept"] = [float(d) for d in averages]
        record["averages_overhead"] = json.loads((out / "averages.json").read_text())
    if score_averages:
        record["averages"] = {}
        for label, file in average_files(out, averages).items():
            s = score_checkpoint(file, "val", 4, out / f"val_beam4_ema{label}.txt", args, valid)
            s.pop("signature")
            record["averages"][label] = s
    record["budget"], record["smoke"] = budget, args.smoke
    if "minutes" in budget:
        record["minutes_budget"] = budget["minutes"]
    record["preset"] = preset_values()
    record["cpu"], record["date"] = machine.cpu_model(), machine.run_stamp()["date"]
    record["commit"] = source_commit()
    bleu = record["val_beam4"]
    print(f"   {record['steps']} steps, validation cross-entropy {record['valid_loss']:.3f}; "
          f"val beam 4: BLEU {bleu['bleu']:.2f} cased, {bleu['bleu_lc']:.2f} "
          f"lower-cased, chrF {bleu['chrf']:.2f}", flush=True)
    for label, s in record.get("averages", {}).items():
        print(f"   EMA {label:>5} at the last step: BLEU {s['bleu']:.2f} cased, "
              f"{s['bleu_lc']:.2f} lower-cased, chrF {s['chrf']:.2f}", flush=True)
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    (out / "result.json").write_text(text, encoding="utf-8")
    if kept is not None and not args.smoke:  # committed: a later session resumes from it
        kept.mkdir(parents=True, exist_ok=True)
        (kept / f"{out.name}.json").write_text(text, encoding="utf-8")
    return record


def source_commit() -> str | None:
    """The checkout's commit (``+`` if the package has uncommitted changes), or
    None outside git: records made in several sessions say which code made them."""
    git = ["git", "-C", str(ROOT)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "minitransformer"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+" if dirty else "")


def budget_of(args) -> dict:
    """A run's training budget: ``{"steps": N, "amp": "off"}`` (``--steps``:
    N optimiser steps in float32, the same on every machine and under any
    load) or ``{"minutes": M}`` (``--minutes`` of wall time)."""
    steps = getattr(args, "steps", None)
    return {"steps": steps, "amp": "off"} if steps else {"minutes": args.minutes}


def budget_flags(budget: dict) -> list[str]:
    """``train``'s flags for ``budget`` (a step budget lifts the time limit)."""
    if "steps" in budget:
        return ["--max-steps", str(budget["steps"]), "--minutes", "100000",
                "--amp", budget["amp"]]
    return ["--minutes", f"{budget['minutes']:g}"]


def budget_text(budget: dict) -> str:
    """``"1000 float32 steps"`` or ``"10 minutes"``."""
    if "steps" in budget:
        return f"{budget['steps']} {'float32 ' if budget['amp'] == 'off' else ''}steps"
    return f"{budget['minutes']:g} minutes"


def run_quietly(command: list[str]) -> str:
    """Run ``command``; its stdout, or its stderr printed and an error raised."""
    # this checkout's package, whatever the folder it runs from
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path})
    if done.returncode != 0:
        print(done.stdout[-2000:] + done.stderr[-4000:], file=sys.stderr, flush=True)
        raise subprocess.CalledProcessError(done.returncode, command)
    return done.stdout


def score_checkpoint(checkpoint: Path, split: str, beam: int, hyp_file: Path, args,
                     pairs: list[tuple[str, str]]) -> dict:
    """``evaluate`` a checkpoint (file or run folder) on ``split`` (the first
    50 sentences with ``args.smoke``), scored against ``pairs``: cased BLEU,
    lower-cased BLEU, chrF (rounded to 0.01) and the cased signature."""
    evaluate = [sys.executable, "-m", "minitransformer", "evaluate", "--checkpoint",
                str(checkpoint), "--split", split, "--beam", str(beam), "--output",
                str(hyp_file), "--overwrite"]
    if args.smoke:
        evaluate += ["--limit", "50"]
    run_quietly(evaluate)
    hyps = hyp_file.read_text(encoding="utf-8").split("\n")[:-1]
    refs = [t for _, t in pairs][: len(hyps)]
    scores = corpus_scores(hyps, refs)
    return {"bleu": round(scores.bleu.score, 2), "bleu_lc": round(scores.bleu_lc.score, 2),
            "chrf": round(scores.chrf.score, 2), "signature": scores.bleu.signature}


def finished_record(out: Path, options: list[str], budget: dict | float, smoke: bool,
                    averages: tuple[float, ...] = (), score_averages: bool = False,
                    kept: Path | None = None) -> dict | None:
    """The record in ``out/result.json``, or else in ``kept/<out's name>.json``
    (the committed copy, :data:`RECIPE_RUNS`), if that run finished with these
    options, budget (:func:`budget_of`; a number is minutes), smoke setting and
    averages (then it is not re-run; ``record["_from"]`` names the file);
    else None (no file, a damaged one, or other settings: the run is redone)."""
    if not isinstance(budget, dict):
        budget = {"minutes": budget}
    for file in [out / "result.json"] + ([kept / f"{out.name}.json"] if kept else []):
        try:
            record = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        same = (record.get("options") == list(options)
                and record.get("budget", {"minutes": record.get("minutes_budget")}) == budget
                and record.get("smoke") == smoke
                and record.get("averages_kept", []) == [float(d) for d in averages]
                and (not score_averages or "averages" in record)
                and record.get("preset") == preset_values())
        if same:
            return {**record, "_from": str(file)}
    return None


def preset_values() -> dict:
    """The preset's settings a run's flags leave to it: a finished run made
    under other defaults (before ``apply`` or ``recipe-apply``) is redone."""
    return {**{k: CPU_MODEL[k] for k in ("dropout", "share_embeddings", "tie_output")},
            **{k: CPU_TRAINING[k] for k in ("lr", "schedule", "warmup_steps",
                                            "label_smoothing", "ema_decay")},
            "vocab_size": CPU_TOKENIZERS["vocab_size"]}


def summarise(runs: list[dict], metrics: tuple[str, ...] = ("bleu",)) -> dict[str, dict]:
    """Per name: mean, min, max and seeds of the cased BLEU (validation,
    beam 4); each other of ``metrics`` ("bleu_lc", "chrf") adds its
    ``<metric>_mean``."""
    by_name: dict[str, list[dict]] = {}
    for r in runs:
        by_name.setdefault(r["name"], []).append(r["val_beam4"])
    summary = {}
    for name, scores in by_name.items():
        v = [s["bleu"] for s in scores]
        summary[name] = {"mean": round(statistics.mean(v), 2), "min": min(v), "max": max(v),
                         "seeds": len(v)}
        for metric in metrics:
            if metric != "bleu":
                summary[name][f"{metric}_mean"] = round(
                    statistics.mean(s[metric] for s in scores), 2)
    return summary


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


# --------------------------------------------------------------------------- recipe
# Issue 25, item 3: the training settings behind the reported test score,
# chosen on the validation split (the module's second docstring: RECIPE_DOC).

RECIPE_DOC = """The recipe on validation: ``recipe``, ``recipe-apply``, ``recipe-test``.

``recipe`` re-makes, on the validation split only, the choices that
``benchmarks/README.md`` ("Settings tried", "Weight averaging") once made
on test_2016_flickr: one factor at a time from the current preset
(:func:`recipe_candidates`), each alternative given as ``train`` flags,
seeds 0, 1 and 2 each, every run ``--minutes`` of ``train``, scored like
``choose``'s (beam 4 on validation: cased sacreBLEU, lower-cased BLEU, chrF).
The default alternatives: dropout 0.1 (the preset has 0), label smoothing
0 (the preset has 0.1), the linear schedule (the preset has noam), the
peak learning rate x2 and x0.5; and the decay of the weight average
without runs of its own: every run keeps averages of decay 0.99, 0.995
and 0.998 beside its own 0.98 (:func:`train_with_averages`, ``fit``'s
``on_step``; the same training otherwise, and the same small cost in steps
for every run), and on the preset's runs each average at the last step,
the 0.98 one (``last.pt``) and the trained weights ("ema 0") are scored.

Rule (fixed before any run; :data:`RECIPE_RULE`, :func:`decide`): per
factor, an alternative replaces the preset's setting only if its mean
over the seeds beats the preset's mean by more than the larger of the two
spreads (max - min over seeds), with at least as many seeds; of several
that do, the highest mean (the first listed on an exact tie); otherwise
the preset's setting is kept. Why: three seeds give no standard error
worth the name, and their range is the noise actually seen; a gap larger
than either range means every seed ordering agrees on average, and the
preset stays unless a change is clearly better (a change costs a
re-execution of every chapter, and four or five comparisons at once
would otherwise pick up noise). The factors are chosen independently and
their winners combined: interactions are not measured; ``recipe-test``
trains the combination with three seeds and scores it on validation too.

``recipe-apply`` writes the chosen settings into
``minitransformer/training/presets.py`` (only those that changed) and
chapter 10's copy ``minitransformer/results/recipe_choice.json``; it
refuses a smoke result or fewer than three seeds. ``recipe-test`` trains
the chosen recipe with plain ``train`` (seeds 0, 1, 2; no extra averages),
scores validation beam 4 and test_2016_flickr greedy and beam 4 once,
and writes ``benchmarks/results/recipe_test.json``.

A run whose folder holds a finished ``result.json`` of the same options,
budget and averages is not run again: an interrupted campaign resumes
where it stopped.

    python benchmarks/campaign_translator.py recipe --minutes 10 --dry-run   # plan, estimate
    python benchmarks/campaign_translator.py recipe --minutes 10
    python benchmarks/campaign_translator.py recipe-apply
    python benchmarks/campaign_translator.py recipe-test
    python benchmarks/campaign_translator.py recipe --smoke --only preset "lr x2"
"""

RECIPE_RESULT = ROOT / "benchmarks" / "results" / "recipe_choice.json"
RECIPE_TEST = ROOT / "benchmarks" / "results" / "recipe_test.json"
RECIPE_BOOK_COPY = ROOT / "minitransformer" / "results" / "recipe_choice.json"
RECIPE_RULE = ("one factor at a time against the preset, on validation beam-4 cased BLEU: an "
               "alternative replaces the preset's setting only if its mean over the seeds "
               "beats the preset's mean by more than the larger of the two spreads (max - min "
               "over seeds), with at least as many seeds; of several, the highest mean (the "
               "first listed on an exact tie); otherwise the preset's setting is kept. The "
               "decay of the weight average is compared the same way among the averages kept "
               "beside the preset's own runs, each at the last step")
#: decays of the averages kept beside every recipe run (the preset's own is fit's)
EXTRA_DECAYS = (0.99, 0.995, 0.998)
#: minutes per run beyond its budget (start, tokenizer, validation beam 4), and
#: per extra average scored: from the choose campaign (618-623 s per 600 s run)
RUN_OVERHEAD_MINUTES, DECODE_MINUTES = 0.4, 0.3
RECIPE_SEEDS = (0, 1, 2)
#: the finished recipe runs' records, committed (the run folders under runs/
#: are not): a campaign with a step budget can be split over sessions and
#: machines, each resuming from what the last committed
RECIPE_RUNS = ROOT / "benchmarks" / "results" / "recipe_runs"
#: float32 steps a minute on 2 cores, for the estimate when no run has
#: finished yet (1,254 in ten minutes on the AMX Xeon, 960 on the AVX2 machine)
FLOAT32_STEPS_PER_MINUTE = 110
MODEL_FIELDS = ("dropout",)


def recipe_candidates(model=CPU_MODEL, training=CPU_TRAINING,
                      decays: tuple[float, ...] = EXTRA_DECAYS) -> list[dict]:
    """The preset and one alternative per row, built from the preset's
    values: ``name``, ``factor`` (the preset field it changes; None for the
    preset), ``options`` (``train`` flags), ``settings`` ({field: value}
    for ``recipe-apply``), ``source`` ("train": runs of its own;
    "averages": an average kept beside the preset's runs) and ``baseline``
    (the preset's own value of its factor)."""
    rows = [{"name": "preset", "factor": None, "options": [], "settings": {},
             "source": "train", "baseline": True}]

    def add(factor: str, name: str, flag: str, value, shown: str | None = None,
            source: str = "train", baseline: bool = False) -> None:
        rows.append({"name": name, "factor": factor,
                     "options": [flag, shown if shown is not None else f"{value:g}"],
                     "settings": {factor: value}, "source": source, "baseline": baseline})

    dropout = 0.1 if model["dropout"] == 0 else 0.0
    add("dropout", f"dropout {dropout:g}", "--dropout", dropout)
    smoothing = 0.0 if training["label_smoothing"] else 0.1
    add("label_smoothing", f"label smoothing {smoothing:g}", "--label-smoothing", smoothing)
    for schedule in ("noam", "linear"):
        if schedule != training["schedule"]:
            add("schedule", f"schedule {schedule}", "--schedule", schedule, schedule)
    for factor in (2, 0.5):
        add("lr", f"lr x{factor:g}", "--lr", training["lr"] * factor)
    own = training["ema_decay"] or 0.0
    for decay in sorted({0.0, own, *decays}):
        add("ema_decay", f"ema {decay:g}", "--ema", decay if decay else None, f"{decay:g}",
            "averages", decay == own)
    return rows


def train_with_averages(decays: list[float], train_argv: list[str]) -> int:
    """``python -m minitransformer train`` (``train_argv``) with a moving
    average of each of ``decays`` kept beside the run, updated after every
    optimiser step by ``fit``'s ``on_step`` (bench_averaging's way; the
    training itself is unchanged, only the time the updates take is not
    spent training). At the end writes ``avg<decay>.pt`` for each, ``avg0.pt``
    (the trained weights of ``last.pt``, no average) and ``averages.json``
    (decays, the file of each, the seconds the updates took)."""
    from minitransformer import cli
    from minitransformer.training.averaging import ExponentialMovingAverage
    from minitransformer.training.checkpoint import build_model, load_checkpoint, save_checkpoint

    plain_fit = cli.fit

    def fit_keeping_averages(model, train_batches, valid_batches=None, config=None,
                             progress=True, **kwargs):
        averages = {d: ExponentialMovingAverage(model, d) for d in decays}
        spent = {"seconds": 0.0, "updates": 0}

        def update(report) -> None:
            t0 = time.perf_counter()
            for average in averages.values():
                average.update(report.model)
            spent["seconds"] += time.perf_counter() - t0
            spent["updates"] += 1

        history = plain_fit(model, train_batches, valid_batches, config, progress,
                            on_step=update, **kwargs)
        out = Path(config.checkpoint_dir)
        ckpt = load_checkpoint(out / "last.pt")
        holder = build_model(ckpt, average=False)  # the weights as trained, last step
        keep = {"vocabs": ckpt["vocabs"], "train_config": ckpt["train_config"], "rng": False}
        save_checkpoint(out / "avg0.pt", holder, extra={"weights": "as trained"}, **keep)
        files = {"0": "avg0.pt"}
        for decay, average in averages.items():
            average.copy_to(holder)
            save_checkpoint(out / f"avg{decay:g}.pt", holder,
                            extra={"weights": f"moving average, decay {decay:g}"}, **keep)
            files[f"{decay:g}"] = f"avg{decay:g}.pt"
        if config.ema_decay:
            files[f"{config.ema_decay:g}"] = "last.pt"  # fit's own average, last step
        (out / "averages.json").write_text(json.dumps({
            "decays": [float(d) for d in decays], "own_decay": config.ema_decay,
            "files": files, "updates": spent["updates"],
            "seconds": round(spent["seconds"], 2),
            "ms_per_update": round(1e3 * spent["seconds"] / max(spent["updates"], 1), 3),
        }, indent=1) + "\n")
        return history

    cli.fit = fit_keeping_averages
    return cli.main(["train", *train_argv])


def average_files(out: Path, decays: tuple[float, ...] = ()) -> dict[str, Path]:
    """{decay label: checkpoint file} of the averages a run kept
    (``averages.json``), ``"0"`` the trained weights."""
    files = json.loads((out / "averages.json").read_text())["files"]
    return {label: out / name for label, name in sorted(files.items(), key=lambda kv:
                                                         float(kv[0]))}


def drop_average_files(out: Path) -> None:
    """Remove a run's ``avg*.pt`` (40 MB each) once they are not to be scored."""
    for file in out.glob("avg*.pt"):
        file.unlink()


def recipe_rows(runs: list[dict]) -> list[dict]:
    """The runs, and each scored average as a row ``"ema <decay>"`` of the
    same seed (for :func:`summarise`)."""
    rows = []
    for r in runs:
        rows.append(r)
        for label, scores in r.get("averages", {}).items():
            rows.append({"name": f"ema {label}", "seed": r["seed"], "val_beam4": scores})
    return rows


def decide(summary: dict[str, dict], candidates: list[dict]) -> dict[str, dict]:
    """:data:`RECIPE_RULE`, per factor: ``{factor: {"baseline", "chosen",
    "compared": [{name, margin, needed, seeds, beats_preset}], "note"?}}``."""
    decisions: dict[str, dict] = {}
    for factor in dict.fromkeys(c["factor"] for c in candidates if c["factor"]):
        members = [c for c in candidates if c["factor"] == factor]
        base = next((c["name"] for c in members if c["baseline"]), "preset")
        entry: dict = {"baseline": base, "chosen": base, "compared": []}
        decisions[factor] = entry
        b = summary.get(base)
        if b is None:
            entry["note"] = "the preset's setting was not measured: kept"
            continue
        best = None
        for c in members:
            a = summary.get(c["name"])
            if c["name"] == base or a is None:
                continue
            margin = round(a["mean"] - b["mean"], 2)
            needed = round(max(a["max"] - a["min"], b["max"] - b["min"]), 2)
            beats = a["seeds"] >= b["seeds"] and margin > needed
            entry["compared"].append({"name": c["name"], "margin": margin, "needed": needed,
                                      "seeds": a["seeds"], "beats_preset": beats})
            if beats and (best is None or a["mean"] > summary[best]["mean"]):
                best = c["name"]
        if best is not None:
            entry["chosen"] = best
    return decisions


def chosen_recipe(decisions: dict[str, dict], candidates: list[dict]) -> tuple[dict, list[str]]:
    """The settings that change ({field: value}) and their ``train`` flags."""
    by_name = {c["name"]: c for c in candidates}
    settings: dict = {}
    options: list[str] = []
    for entry in decisions.values():
        if entry["chosen"] != entry["baseline"]:
            settings.update(by_name[entry["chosen"]]["settings"])
            options += by_name[entry["chosen"]]["options"]
    return settings, options


def recipe_plan(args, candidates: list[dict]) -> list[tuple[dict, int]]:
    """(candidate, seed) of every run ``recipe`` makes, seed by seed (an
    interrupted campaign then has every configuration at the first seeds)."""
    trained = [c for c in candidates if c["source"] == "train"]
    if args.only:
        wanted = {name.replace("_", " ") for name in args.only}
        unknown = sorted(wanted - {c["name"] for c in candidates})
        if unknown:
            sys.exit(f"recipe: no candidate {', '.join(unknown)}; the candidates: "
                     + ", ".join(c["name"] for c in candidates))
        if any(c["name"] in wanted and c["source"] == "averages" for c in candidates):
            wanted.add("preset")  # the averages are scored on the preset's runs
        trained = [c for c in trained if c["name"] in wanted]
    return [(c, seed) for seed in args.seeds for c in trained]


def recipe_estimate(args, plan: list[tuple[dict, int]]) -> dict:
    """Runs still to make and the minutes they should take (budget plus
    :data:`RUN_OVERHEAD_MINUTES` each, :data:`DECODE_MINUTES` per average
    scored)."""
    budget, kept = budget_of(args), getattr(args, "keep_runs", None)
    todo = [(c, s) for c, s in plan
            if finished_record(run_folder(args, c["name"], s), c["options"], budget,
                               args.smoke, EXTRA_DECAYS, c["name"] == "preset", kept) is None]
    decodes = sum(len(EXTRA_DECAYS) + 2 for c, _ in todo if c["name"] == "preset")
    per_run = (budget["minutes"] if "minutes" in budget
               else budget["steps"] / FLOAT32_STEPS_PER_MINUTE)
    minutes = len(todo) * (per_run + RUN_OVERHEAD_MINUTES) + decodes * DECODE_MINUTES
    return {"runs": len(plan), "to_run": len(todo), "minutes_per_run": round(per_run, 1),
            "budget": budget, "average_decodes": decodes,
            "estimated_minutes": round(minutes)}


def run_folder(args, name: str, seed: int) -> Path:
    return args.out_dir / f"{name.replace(' ', '_')}_seed{seed}"


def cmd_recipe(args) -> None:
    candidates = recipe_candidates()
    plan = recipe_plan(args, candidates)
    estimate = recipe_estimate(args, plan)
    print(f"recipe: {estimate['runs']} runs of {budget_text(budget_of(args))} "
          f"({estimate['runs'] - estimate['to_run']} finished before), "
          f"{estimate['average_decodes']} averages to score: about "
          f"{estimate['estimated_minutes']} minutes "
          f"({estimate['estimated_minutes'] / 60:.1f} h)", flush=True)
    if args.dry_run:
        for c, seed in plan:
            print(f"  {c['name']:18s} seed {seed}: train {' '.join(c['options']) or '(preset)'}")
        return
    started = time.time()
    before = machine.print_machine("before")
    valid = load_multi30k("val")
    runs = []
    for c, seed in plan:
        scored = c["name"] == "preset"
        runs.append(run_config(c["name"], c["options"], seed, args, valid,
                               averages=EXTRA_DECAYS, score_averages=scored, resume=True))
        if not scored:
            drop_average_files(Path(runs[-1]["folder"]))
    summary = summarise(recipe_rows(runs), metrics=("bleu", "bleu_lc", "chrf"))
    decisions = decide(summary, candidates)
    settings, options = chosen_recipe(decisions, candidates)
    print("\nvalidation, beam 4, cased BLEU: mean (min to max, seeds)")
    for name, s in summary.items():
        print(f"  {name:18s} {s['mean']:6.2f} ({s['min']:.2f} to {s['max']:.2f}, {s['seeds']})")
    for factor, entry in decisions.items():
        said = "; ".join(f"{x['name']} {x['margin']:+.2f} (needed > {x['needed']:.2f})"
                         for x in entry["compared"]) or entry.get("note", "")
        print(f"  {factor}: {entry['chosen']}  [{said}]")
    print(f"chosen: {settings or 'the preset unchanged'}; train flags: {' '.join(options)}")
    record = {
        "what": "the translator's training settings (dropout, label smoothing, schedule, peak "
                "learning rate, weight-average decay), one factor at a time against the "
                "preset, chosen on the validation split (beam 4, cased sacreBLEU) after equal "
                "training budgets (issue 25, item 3)",
        "script": "benchmarks/campaign_translator.py",
        **machine.run_stamp(started),
        "budget": budget_of(args), "minutes_per_run": args.minutes, "smoke": args.smoke,
        "seeds": list(args.seeds), "rule": RECIPE_RULE, "extra_decays": list(EXTRA_DECAYS),
        "estimate": estimate,
        "preset": {"model": {k: CPU_MODEL[k] for k in MODEL_FIELDS},
                   "training": {k: CPU_TRAINING[k] for k in
                                ("lr", "schedule", "warmup_steps", "label_smoothing",
                                 "ema_decay")}},
        "machine_before": before, "machine_after": machine.print_machine("after"),
        "candidates": candidates, "runs": runs, "summary": summary, "decisions": decisions,
        "chosen_settings": settings, "chosen_options": options,
    }
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
    print(f"wrote {args.result}")


def set_preset_field(text: str, preset: str, key: str, value) -> str:
    """``text`` (presets.py) with ``"key": value,`` replaced inside the dict
    of the module-level ``preset`` (e.g. ``CPU_TRAINING``) only."""
    start = text.find(f"\n{preset}: ")
    end = text.find("\n})", start)
    if start < 0 or end < 0:
        sys.exit(f"recipe-apply: no {preset} in {PRESETS}")
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    body, n = re.subn(rf'("{key}": )[^,\n]+,', lambda m: f"{m.group(1)}{shown},",
                      text[start:end], count=1)
    if n != 1:
        sys.exit(f"recipe-apply: no line for {key!r} in {preset} of {PRESETS}")
    return text[:start] + body + text[end:]


def cmd_recipe_apply(args) -> None:
    """Write the chosen settings into the preset, and chapter 10's copy."""
    record = json.loads(args.result.read_text())
    if (record.get("smoke") or len(record.get("seeds", [])) < 3) and not args.force:
        sys.exit(f"recipe-apply: {args.result} is a smoke run or has fewer than three seeds "
                 "(--force to apply it anyway)")
    text = PRESETS.read_text()
    for key, value in record["chosen_settings"].items():
        text = set_preset_field(text, "CPU_MODEL" if key in MODEL_FIELDS else "CPU_TRAINING",
                                key, value)
    PRESETS.write_text(text)
    print(f"{PRESETS}: {record['chosen_settings'] or 'nothing changed'} (review and commit)")
    keep = ("what", "script", "command", "date", "budget", "minutes_per_run", "seeds", "rule",
            "summary", "decisions", "chosen_settings", "chosen_options", "preset")
    copy = {k: record[k] for k in keep if k in record}
    copy["machine_before"] = {k: record["machine_before"][k]
                              for k in ("cpu", "torch_threads", "matmul_1024_gflops",
                                        "load_average_1_5_15")
                              if k in record["machine_before"]}
    copy["runs"] = [{k: r[k] for k in ("name", "seed", "steps", "valid_loss", "val_beam4",
                                       "averages") if k in r} for r in record["runs"]]
    args.book_copy.write_text(json.dumps(copy, indent=1, ensure_ascii=False) + "\n",
                              encoding="utf-8")
    print(f"wrote {args.book_copy}")


def cmd_recipe_test(args) -> None:
    """Train the chosen recipe (plain ``train``, three seeds), score
    validation beam 4 and test_2016_flickr greedy and beam 4, once."""
    choice = json.loads(args.result.read_text())
    if args.minutes is None and args.steps is None:  # the recipe's own budget
        chosen_budget = choice.get("budget", {"minutes": choice["minutes_per_run"]})
        args.steps, args.minutes = chosen_budget.get("steps"), chosen_budget.get("minutes")
    per_run = args.minutes or args.steps / FLOAT32_STEPS_PER_MINUTE
    options = choice["chosen_options"]
    started = time.time()
    before = machine.print_machine("before")
    valid, test = load_multi30k("val"), load_multi30k("test_2016_flickr")
    print(f"recipe-test: {len(args.seeds)} runs of {budget_text(budget_of(args))} with "
          f"{' '.join(options) or 'the preset'}; about "
          f"{len(args.seeds) * (per_run + RUN_OVERHEAD_MINUTES + 2 * DECODE_MINUTES):.0f}"
          " minutes", flush=True)
    runs = []
    for seed in args.seeds:
        r = run_config("recipe", options, seed, args, valid, resume=True)
        for beam in (1, 4):
            scores = score_checkpoint(Path(r["folder"]), "test_2016_flickr", beam,
                                      Path(r["folder"]) / f"test_beam{beam}.txt", args, test)
            r["test_signature"] = scores.pop("signature")
            r[f"test_beam{beam}"] = scores
            print(f"   test, {'greedy' if beam == 1 else 'beam 4'}: BLEU {scores['bleu']:.2f} "
                  f"cased, {scores['bleu_lc']:.2f} lower-cased, chrF {scores['chrf']:.2f}")
        runs.append(r)
    summary = {}
    for key in ("val_beam4", "test_beam1", "test_beam4"):
        summary[key] = {}
        for metric in ("bleu", "bleu_lc", "chrf"):
            v = [r[key][metric] for r in runs]
            summary[key][metric] = {"mean": round(statistics.mean(v), 2), "min": min(v),
                                    "max": max(v), "seeds": len(v)}
    for key, s in summary.items():
        b = s["bleu"]
        print(f"{key}: cased BLEU {b['mean']:.2f} ({b['min']:.2f} to {b['max']:.2f}, "
              f"{b['seeds']} seeds)")
    record = {
        "what": "the recipe chosen on validation (recipe_choice.json), trained by plain train "
                "with three seeds, scored once on test_2016_flickr (issue 25, item 3)",
        "script": "benchmarks/campaign_translator.py", **machine.run_stamp(started),
        "budget": budget_of(args), "minutes_per_run": args.minutes, "smoke": args.smoke,
        "choice": str(args.result),
        "chosen_settings": choice["chosen_settings"], "options": options,
        "machine_before": before, "machine_after": machine.print_machine("after"),
        "runs": runs, "summary": summary,
    }
    args.test_result.parent.mkdir(parents=True, exist_ok=True)
    args.test_result.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n",
                                encoding="utf-8")
    print(f"wrote {args.test_result}")
    if args.book_copy.exists() and not args.smoke:
        copy = json.loads(args.book_copy.read_text())
        copy["test"] = {"date": record["date"], "options": options, "summary": summary,
                        "runs": [{k: r[k] for k in ("seed", "steps", "valid_loss", "val_beam4",
                                                    "test_beam1", "test_beam4")}
                                 for r in runs]}
        args.book_copy.write_text(json.dumps(copy, indent=1, ensure_ascii=False) + "\n",
                                  encoding="utf-8")
        print(f"wrote {args.book_copy} (its test scores)")


def main() -> None:
    if sys.argv[1:2] == ["train-with-averages"]:  # run_config's child: train's own flags follow
        if sys.argv[2:3] != ["--decays"] or len(sys.argv) < 4:
            sys.exit("usage: campaign_translator.py train-with-averages --decays D,D,... "
                     "TRAIN_FLAGS...")
        sys.exit(train_with_averages([float(d) for d in sys.argv[3].split(",")], sys.argv[4:]))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog=RECIPE_DOC.splitlines()[0])
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
    r = sub.add_parser("recipe", help="the training settings, one factor at a time, on "
                       "validation (issue 25)", description=RECIPE_DOC.split("\n\n")[1],
                       epilog=f"Rule (fixed before the runs): {RECIPE_RULE}.")
    r.add_argument("--only", nargs="+", metavar="NAME",
                   help="run these candidates only (names as in --dry-run; 'ema ...' runs "
                        "the preset)")
    r.add_argument("--dry-run", action="store_true", help="print the plan and estimate only")
    a = sub.add_parser("recipe-apply", help="write the recipe's choice into the preset")
    a.add_argument("--force", action="store_true", help="apply a smoke or short result too")
    t = sub.add_parser("recipe-test", help="train the chosen recipe (3 seeds) and score "
                       "validation and test_2016_flickr once")
    t.add_argument("--test-result", type=Path, default=None,
                   help=f"default: {RECIPE_TEST.relative_to(ROOT)}")
    for q in (r, t):
        q.add_argument("--minutes", type=float, default=None,
                       help="training budget of each run (recipe: 10, 0.05 with --smoke; "
                            "recipe-test: the recipe's)")
        q.add_argument("--steps", type=int, default=None,
                       help="a budget of this many optimiser steps in float32 (--amp off) "
                            "instead of minutes: the same runs on any machine and under any "
                            "load, so a campaign can be split over sessions (the records "
                            "are kept in benchmarks/results/recipe_runs/)")
        q.add_argument("--seeds", type=int, nargs="+", default=list(RECIPE_SEEDS))
        q.add_argument("--out-dir", type=Path, default=None,
                       help="default: runs/recipe (runs/recipe_smoke with --smoke)")
        q.add_argument("--smoke", action="store_true",
                       help="50 validation (and test) sentences; results under the out-dir")
    for q in (r, a, t):
        q.add_argument("--result", type=Path, default=None,
                       help=f"default: {RECIPE_RESULT.relative_to(ROOT)} (with --smoke: "
                            "OUT_DIR/recipe_choice.json)")
    for q in (a, t):
        q.add_argument("--book-copy", type=Path, default=RECIPE_BOOK_COPY)
    args = p.parse_args()
    if args.command.startswith("recipe"):
        smoke = getattr(args, "smoke", False)
        if hasattr(args, "out_dir") and args.out_dir is None:
            args.out_dir = ROOT / "runs" / ("recipe_smoke" if smoke else "recipe")
        if args.result is None:
            args.result = args.out_dir / "recipe_choice.json" if smoke else RECIPE_RESULT
        if getattr(args, "test_result", False) is None:
            args.test_result = args.out_dir / "recipe_test.json" if smoke else RECIPE_TEST
        if getattr(args, "steps", None) is not None:
            if args.minutes is not None:
                p.error("--steps and --minutes are two budgets: give one")
            if args.steps < 1:
                p.error(f"--steps must be a positive number of steps, got {args.steps}")
        elif args.command == "recipe" and args.minutes is None:
            args.minutes = 0.05 if smoke else 10.0
        if args.command != "recipe-apply":
            args.keep_runs = None if smoke else RECIPE_RUNS
    if getattr(args, "out_dir", None) is not None:
        args.out_dir = args.out_dir.resolve()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    {"choose": cmd_choose, "apply": cmd_apply, "recipe": cmd_recipe,
     "recipe-apply": cmd_recipe_apply, "recipe-test": cmd_recipe_test}[args.command](args)


if __name__ == "__main__":
    main()
