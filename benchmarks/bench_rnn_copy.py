"""Chapter 1's copy experiment, trained to convergence: where along the output do the RNNs fail?

The simple RNN encoder-decoder has two failure modes (chapter 1): the
encoder's one vector loses the *start* of a long source, and the decoder,
which sees the source only through its first state, loses the source as it
goes. With a left-to-right (unidirectional) encoder, copying separates the
two: output position ``i`` is source position ``i``, so the first mode costs
the *first* outputs (the tokens the encoder read longest ago) and the second
the *last* outputs (the most decoder steps away from the source). Reversing
would not separate them (both then cost the last outputs).

This script trains the three models of :mod:`minitransformer.rnn.models`
(simple, context, attention) with a unidirectional encoder on ``copy`` of
2 to ``--max-len`` symbols, for several seeds, each **until its validation
loss stops improving**: after every ``--eval-every`` steps the loss on
validation sequences is measured; after ``--patience`` evaluations in a row
without an improvement (by ``--min-delta`` relative and ``--min-delta-abs``
absolute) the learning rate is divided by ``--lr-factor``, at most
``--lr-drops`` times, and the next such plateau stops training. The weights
of the lowest validation loss are kept. It then measures, on unseen
test sequences of each length (the ``test`` split of
:func:`minitransformer.data.make_synthetic`), teacher-forced accuracy per
output position, and the share of sequences that greedy decoding copies
exactly.

    python benchmarks/bench_rnn_copy.py --jobs 2

Writes ``minitransformer/results/rnn_copy.json`` (read by chapter 1 with
:func:`minitransformer.results.load_result`). Training is counted in steps,
not time, on one thread per job, so the numbers do not depend on how busy
the machine is; only the time it takes does.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import machine
import torch

from minitransformer.data import make_batch, make_synthetic, synthetic_vocab_size
from minitransformer.decoding import greedy_decode
from minitransformer.rnn.models import RNN_MODELS, RNNConfig
from minitransformer.training import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "minitransformer" / "results" / "rnn_copy.json"
NUM_SYMBOLS = 10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(RNN_MODELS), choices=list(RNN_MODELS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--max-len", type=int, default=16, help="longest source (default 16)")
    p.add_argument("--hidden", type=int, default=32, help="GRU width H (and attention width)")
    p.add_argument("--emb", type=int, default=32, help="embedding width M")
    p.add_argument("--bidirectional", action="store_true", help="read the source both ways")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--train-examples", type=int, default=200_000,
                   help="size of the training pool, reshuffled every epoch")
    p.add_argument("--valid-examples", type=int, default=1000)
    p.add_argument("--test-examples", type=int, default=300, help="per test length")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--patience", type=int, default=6,
                   help="evaluations without improvement before the learning rate drops")
    p.add_argument("--min-delta", type=float, default=0.01,
                   help="an improvement is lower by this much, relative (default 1%%) ...")
    p.add_argument("--min-delta-abs", type=float, default=0.002,
                   help="... and by this much in nats/token (default 0.002)")
    p.add_argument("--lr-factor", type=float, default=4.0, help="divide the rate by this")
    p.add_argument("--lr-drops", type=int, default=2,
                   help="how many times; the next plateau stops training")
    p.add_argument("--max-steps", type=int, default=20_000, help="stop here if not converged")
    p.add_argument("--jobs", type=int, default=1, help="(model, seed) runs in parallel")
    p.add_argument("--verbose", action="store_true", help="print every validation")
    p.add_argument("--note", default="", help="a remark stored in the record (e.g. why smaller)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return p.parse_args(argv)


def model_config(args: argparse.Namespace) -> RNNConfig:
    vocab = synthetic_vocab_size(NUM_SYMBOLS)
    return RNNConfig(vocab, vocab, emb_dim=args.emb, hidden_dim=args.hidden,
                     attn_dim=args.hidden, dropout=0.0, bidirectional=args.bidirectional)


def test_lengths(args: argparse.Namespace) -> list[int]:
    return list(range(2, args.max_len + 1))


def improves(loss: float, reference: float, args: argparse.Namespace) -> bool:
    """Whether ``loss`` is below ``reference`` (the last improving validation loss, ``inf``
    before the first) by more than ``min_delta`` relative and ``min_delta_abs`` absolute."""
    if reference == float("inf"):
        return loss < reference
    return reference - loss > max(args.min_delta * reference, args.min_delta_abs)


def train_until_converged(model, train, valid, args, seed: int) -> dict:
    """Train until the validation loss stops improving; load the best weights.

    Every ``eval_every`` steps the validation loss is measured. It counts as
    an improvement if it is below the last improving value by more than
    ``min_delta`` (relative) and more than ``min_delta_abs`` (nats/token).
    After ``patience`` evaluations without one, the learning rate is divided
    by ``lr_factor`` (at most ``lr_drops`` times); a plateau at the lowest
    rate ends training (``"converged"``), else ``max_steps`` does.
    """
    config = TrainConfig(lr=args.lr, schedule="constant", warmup_steps=100,
                         label_smoothing=0.0, epochs=None, max_steps=args.max_steps, seed=seed,
                         device="cpu")
    trainer = Trainer(model, config, valid_batches=valid)
    rng = random.Random(seed)
    order = list(range(len(train)))
    best, best_step, best_state = float("inf"), 0, None  # the lowest validation loss so far
    reference, since = float("inf"), 0  # the last improving loss, evaluations since then
    lr_drops = []  # (step, new learning rate)
    stop_reason = "max_steps"
    while trainer.state.step < args.max_steps and stop_reason == "max_steps":
        rng.shuffle(order)
        for start in range(0, len(order) - args.batch_size + 1, args.batch_size):
            trainer.step(make_batch([train[i] for i in order[start:start + args.batch_size]]))
            step = trainer.state.step
            if step % args.eval_every == 0:
                trainer.validate()
                loss = trainer.history.valid_loss[-1]
                if loss < best:
                    best, best_step = loss, step
                    best_state = copy.deepcopy(model.state_dict())
                if improves(loss, reference, args):
                    reference, since = loss, 0
                else:
                    since += 1
                if args.verbose:
                    print(f"  seed {seed} {type(model).__name__}: step {step}, valid {loss:.4f}"
                          f"{' (best)' if best_step == step else ''}", flush=True)
                if since >= args.patience:
                    if len(lr_drops) == args.lr_drops:
                        stop_reason = "converged"
                        break
                    lr = trainer.config.lr / args.lr_factor
                    trainer.config = dataclasses.replace(trainer.config, lr=lr)
                    lr_drops.append((step, lr))
                    since = 0
            if step >= args.max_steps:
                break
    trainer.history.flush()
    if best_state is not None:
        model.load_state_dict(best_state)
    h = trainer.history
    keep = max(1, len(h.step) // 200)  # at most ~200 points of the training curve
    return {
        "steps": trainer.state.step,
        "best_step": best_step,
        "best_valid_loss": best,
        "stop_reason": stop_reason,
        "lr_drops": lr_drops,
        "valid_curve": {"step": list(h.valid_step), "loss": [round(x, 4) for x in h.valid_loss]},
        "train_curve": {"step": list(h.step[::keep]),
                        "loss": [round(float(x), 4) for x in h.train_loss[::keep]]},
    }


@torch.no_grad()
def evaluate(model, tests: dict[int, list]) -> dict:
    """Teacher-forced accuracy per output position, and greedy exact copies, per length."""
    model.eval()
    per_position, exact = {}, {}
    for length, examples in tests.items():
        batch = make_batch(examples)
        pred = model(batch.src, batch.tgt_in).argmax(-1)  # (B, L + 1): L symbols, then EOS
        right = (pred == batch.tgt_out)[:, :length].float().mean(0)  # (L,)
        per_position[str(length)] = [round(x, 4) for x in right.tolist()]
        hyps = greedy_decode(model, batch.src, max_len=length + 3)
        exact[str(length)] = sum(h == t for h, (_, t) in zip(hyps, examples)) / len(examples)
    return {"position_accuracy": per_position, "greedy_exact": exact}


def run_one(job: tuple[str, int, argparse.Namespace]) -> dict:
    """One (model, seed) run: data, training to convergence, evaluation."""
    name, seed, args = job
    torch.set_num_threads(1)
    train = make_synthetic("copy", args.train_examples, 2, args.max_len, NUM_SYMBOLS,
                           seed=1000, split="train")
    valid_examples = make_synthetic("copy", args.valid_examples, 2, args.max_len, NUM_SYMBOLS,
                                    seed=1, split="valid")
    valid = [make_batch(valid_examples[i:i + 250]) for i in range(0, len(valid_examples), 250)]
    tests = {n: make_synthetic("copy", args.test_examples, n, n, NUM_SYMBOLS, seed=100 + n,
                               split="test") for n in test_lengths(args)}
    torch.manual_seed(seed)
    model = RNN_MODELS[name](model_config(args))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    record = train_until_converged(model, train, valid, args, seed)
    record.update(evaluate(model, tests))
    record.update(seed=seed, parameters=sum(p.numel() for p in model.parameters()),
                  cpu_seconds=round(time.process_time() - cpu0, 1),
                  wall_seconds=round(time.perf_counter() - wall0, 1))
    print(f"{name:9s} seed {seed}: {record['stop_reason']} after {record['steps']} steps "
          f"(best at {record['best_step']}, valid loss {record['best_valid_loss']:.3f}), "
          f"{record['cpu_seconds']:.0f} CPU s", flush=True)
    return {"model": name, **record}


def shown_args(argv: list[str] | None) -> list[str]:
    """The command-line arguments that decide the results (not --out, --jobs, --verbose)."""
    args, shown = list(sys.argv[1:] if argv is None else argv), []
    while args:
        arg = args.pop(0)
        if arg in ("--out", "--jobs", "--note"):
            del args[:1]  # and its value
        elif arg != "--verbose" and not arg.startswith(("--out=", "--jobs=", "--note=")):
            shown.append(arg)
    return shown


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    before = machine.report_before_and_after()
    jobs = [(name, seed, args) for seed in args.seeds for name in args.models]
    runs = []
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for run in pool.map(run_one, jobs):
                runs.append(run)
                write(args, argv, before, runs, partial=len(runs) < len(jobs))
    else:
        for job in jobs:
            runs.append(run_one(job))
            write(args, argv, before, runs, partial=len(runs) < len(jobs))
    print(f"wrote {args.out}")


def write(args: argparse.Namespace, argv: list[str] | None, before: dict, runs: list[dict],
          partial: bool) -> None:
    """Write the record of the runs so far (``partial`` until the last one is in)."""
    models = {name: [r for r in runs if r["model"] == name] for name in args.models}
    settings = {k: v for k, v in vars(args).items()
                if k not in ("out", "jobs", "verbose", "note")}
    record = {
        "what": (f"copy of 2-{args.max_len} symbols ({NUM_SYMBOLS} kinds), "
                 f"{'bidirectional' if args.bidirectional else 'unidirectional'} GRU encoder; "
                 "each (model, seed) trained until its validation loss stopped improving "
                 "or the step cap; "
                 "teacher-forced accuracy per output position on unseen test sequences"),
        "script": "benchmarks/bench_rnn_copy.py",
        **machine.run_stamp(args=shown_args(argv)),
        "machine": before,
        "load_average_at_the_end": [round(x, 2) for x in os.getloadavg()],
        **({"note": args.note} if args.note else {}),
        **({"partial": True} if partial else {}),
        "settings": settings,
        "config": model_config(args).to_dict(),
        "test_lengths": test_lengths(args),
        "models": {name: [{k: v for k, v in r.items() if k != "model"} for r in rs]
                   for name, rs in models.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
