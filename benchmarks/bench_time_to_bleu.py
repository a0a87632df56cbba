"""Time to quality: test BLEU against training time, minitransformer vs torch.nn.Transformer.

Trains the command line's default model (:mod:`minitransformer.cli`, the
chapter's CPU configuration) and ``torch.nn.Transformer`` wrapped with the
same embeddings, positions and output layer
(:class:`bench_translation.TorchSeq2Seq`), one after the other, with the
same loop (:func:`minitransformer.training.fit` with the command line's
training settings), data, batches and tokenisation, and scores each at
training-time marks (default 2.5, 5, 10 and 20 minutes): greedy and beam-4
translations of the validation and test_2016_flickr splits, scored with
sacreBLEU's cased BLEU (the headline), lower-cased BLEU and chrF
(:func:`minitransformer.metrics.corpus_scores`). ``nn.Transformer``'s
weights are copied into the package's model for decoding
(:func:`bench_translation.to_minitransformer`, checked to compute the same
function), so both are decoded by the same code.

With a schedule that depends only on the step (``noam``, ``constant``), one
run per model is paused at each mark (``fit`` resumes exactly from its
checkpoint; decoding time is not training time); with a budget-aware
schedule (``linear``) every mark is a separate run from scratch.

Prints the CPU model, its flags (AVX2, AVX-512, AVX512_BF16, AMX), the
threads and the matmul speed before and after, so that results from
different machines can be compared (the issue's targets are stated for
a machine doing about 200 GFLOP/s: scale budgets by 200 / measured).

    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_time_to_bleu.py
    python benchmarks/bench_time_to_bleu.py --tokenizer subword --vocab-size 8000
    python benchmarks/bench_time_to_bleu.py --marks 0.2 --models ours --beams 1   # smoke test

Writes a JSON (``--out``) with the machine, the settings and every point,
and a PNG (``--plot``): cased BLEU (beam 4, test) against training minutes,
one line per model, lower-cased BLEU dashed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # machine.py, bench_translation.py

from bench_translation import TorchSeq2Seq, to_minitransformer  # noqa: E402
from machine import print_machine, run_stamp  # noqa: E402

from minitransformer.data import (  # noqa: E402
    TOKENIZER_KINDS,
    TokenBatcher,
    build_tokenizers,
    encode_pairs,
    load_multi30k,
)
from minitransformer.decoding import translate  # noqa: E402
from minitransformer.metrics import corpus_scores  # noqa: E402
from minitransformer.model import Transformer  # noqa: E402
from minitransformer.training import AMP_MODES, fit, precision  # noqa: E402
from minitransformer.training.presets import (  # noqa: E402
    CPU_DATA,
    CPU_MODEL,
    CPU_TOKENIZERS,
    CPU_TRAINING,
    cpu_model_config,
    cpu_train_config,
)

ROOT = Path(__file__).resolve().parent
MODELS = {"ours": "minitransformer.Transformer", "torch": "torch.nn.Transformer"}
STEP_SCHEDULES = ("noam", "constant")  # the learning rate depends on the step only


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--marks", type=float, nargs="+", default=[2.5, 5, 10, 20],
                   help="training minutes at which to score (increasing)")
    p.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    p.add_argument("--tokenizer", choices=TOKENIZER_KINDS, default=CPU_TOKENIZERS["kind"],
                   help="words (lower-cased) or joint subwords (default: the command line's)")
    p.add_argument("--vocab-size", type=int, default=CPU_TOKENIZERS["vocab_size"],
                   help="subword vocabulary size")
    p.add_argument("--share-embeddings", action=argparse.BooleanOptionalAction,
                   default=None,
                   help="one embedding table for source and target (needs --tokenizer subword; "
                   "default: the command line's with subwords, off with words)")
    p.add_argument("--tie-output", action=argparse.BooleanOptionalAction,
                   default=CPU_MODEL["tie_output"],
                   help="output projection = target embedding matrix")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 4], help="beam sizes (1 = greedy)")
    p.add_argument("--splits", nargs="+", default=["val", "test_2016_flickr"],
                   help="splits to score at every mark")
    p.add_argument("--limit", type=int, default=None, help="score the first N sentences only")
    p.add_argument("--amp", choices=AMP_MODES, default=CPU_TRAINING.get("amp", "auto"),
                   help="precision of our model's training (default: the command line's)")
    p.add_argument("--torch-amp", choices=AMP_MODES, default="off",
                   help="precision of nn.Transformer's training (default float32, its fastest "
                   "on a CPU: PyTorch's CPU attention backward is slow in bf16)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path,
                   default=ROOT.parent / "minitransformer" / "results" / "time_to_bleu.json")
    p.add_argument("--plot", type=Path, default=ROOT / "time_to_bleu.png")
    p.add_argument("--targets", type=float, nargs="+", default=[25, 30, 35],
                   help="cased test BLEU (beam 4) whose reaching time is reported")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    if sorted(args.marks) != args.marks or args.marks[0] <= 0:
        p.error("--marks must be positive and increasing")
    if args.share_embeddings is None:
        args.share_embeddings = CPU_MODEL["share_embeddings"] and args.tokenizer == "subword"
    if args.share_embeddings and args.tokenizer != "subword":
        p.error("--share-embeddings needs --tokenizer subword (one vocabulary for both sides)")
    return args


def build_model(name: str, config) -> torch.nn.Module:
    return Transformer(config) if name == "ours" else TorchSeq2Seq(config)


def decodable(name: str, model: torch.nn.Module, probe) -> torch.nn.Module:
    """The package's Transformer computing ``model``'s function (for the cached decoder)."""
    if name == "ours":
        return model.eval()
    ours = to_minitransformer(model.eval())
    with torch.no_grad():
        torch.testing.assert_close(ours(probe.src, probe.tgt_in), model(probe.src, probe.tgt_in),
                                   rtol=1e-4, atol=1e-4)
    return ours


def score(model, tok, eval_sets: dict, beams: list[int]) -> dict:
    out = {}
    for split, (sources, refs) in eval_sets.items():
        for beam in beams:
            t0 = time.perf_counter()
            hyps = translate(model, sources, tok[0], tok[1], beam_size=beam)
            seconds = time.perf_counter() - t0
            s = corpus_scores(hyps, refs)
            out[f"{split}/beam{beam}"] = {
                "bleu": round(s.bleu.score, 2), "bleu_lc": round(s.bleu_lc.score, 2),
                "chrf": round(s.chrf.score, 2), "decode_seconds": round(seconds, 2),
                "example": hyps[0],
            }
            search = "greedy" if beam == 1 else f"beam {beam}"
            print(f"    {split} {search}: BLEU {s.bleu.score:.2f} cased, "
                  f"{s.bleu_lc.score:.2f} lower-cased, chrF {s.chrf.score:.2f} "
                  f"({seconds:.1f} s to decode)", flush=True)
    return out


def run_model(name: str, config, args, batches, valid_batches, tok, eval_sets) -> list[dict]:
    """Train ``name`` and score it at every mark; returns the points."""
    probe = valid_batches[0]
    resumable = CPU_TRAINING["schedule"] in STEP_SCHEDULES
    points, done, wall, workdir = [], 0.0, 0.0, Path(tempfile.mkdtemp(prefix="time_to_bleu_"))
    model = None
    for i, mark in enumerate(args.marks):
        resume = resumable and i > 0
        if model is None or not resumable:
            torch.manual_seed(args.seed)
            model = build_model(name, config)
            wall, done = 0.0, 0.0
            ckpt_dir = workdir / f"run{i}"
        cfg = cpu_train_config(
            epochs=None, max_minutes=mark - done, seed=args.seed, device="cpu",
            amp=args.amp if name == "ours" else args.torch_amp,
            checkpoint_dir=str(ckpt_dir), resume=resume, pad_id=config.pad_id,
        )
        t0 = time.perf_counter()
        history = fit(model.train(), batches, valid_batches, cfg, progress=not args.quiet)
        wall += time.perf_counter() - t0
        done = mark
        # this call's steps: after a resume the history holds the earlier ones too,
        # and its clock (cumulative seconds in training steps) continues theirs
        earlier = points[-1]["steps"] if resume else 0
        before = history.seconds[earlier - 1] if earlier else 0.0
        seconds = history.seconds[-1] - before if len(history.seconds) > earlier else 0.0
        segment_tokens = sum(history.tokens[earlier:])
        step = history.step[-1] if history.step else 0
        print(f"  {MODELS[name]} at {mark:g} min: {step} steps "
              f"({step / len(batches):.2f} epochs), validation cross-entropy "
              f"{history.valid_loss[-1]:.3f}, {wall / 60:.2f} min in fit", flush=True)
        point = {
            "mark_minutes": mark, "fit_wall_minutes": round(wall / 60, 3), "steps": step,
            "epochs": round(step / len(batches), 3), "valid_loss": round(history.valid_loss[-1], 4),
            "tokens_per_second": round(segment_tokens / seconds, 1) if seconds else None,
        }
        point["scores"] = score(decodable(name, model, probe), tok, eval_sets, args.beams)
        points.append(point)
    return points


def minutes_to(points: list[dict], key: str, target: float) -> float | None:
    """Training minutes at which the score ``key`` first reaches ``target``
    (linear interpolation between marks; None if never)."""
    prev_t, prev_s = 0.0, 0.0
    for p in points:
        t, s = p["fit_wall_minutes"], p["scores"][key]["bleu"]
        if s >= target:
            return round(prev_t + (t - prev_t) * (target - prev_s) / (s - prev_s), 2)
        prev_t, prev_s = t, s
    return None


def plot(record: dict, path: Path, key: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minitransformer.instruments.plotting import use_book_style

    use_book_style()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for i, (name, points) in enumerate(record["results"].items()):
        x = [0] + [p["fit_wall_minutes"] for p in points]
        color = f"C{i}"
        ax.plot(x, [0] + [p["scores"][key]["bleu"] for p in points], "o-", color=color,
                label=f"{MODELS[name]}, cased")
        ax.plot(x, [0] + [p["scores"][key]["bleu_lc"] for p in points], "o--", color=color,
                alpha=0.6, label=f"{MODELS[name]}, lower-cased")
    split, beam = key.split("/")
    m = record["machine_before"]
    ax.set(xlabel="training time (minutes)", ylabel=f"sacreBLEU ({split}, {beam})",
           title=f"{record['tokenizer']}; {m['cpu']}, "
                 f"{m['matmul_1024_gflops']['wall']:.0f} GFLOP/s")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.time()
    before = print_machine("before")
    t0 = time.perf_counter()
    train = load_multi30k("train")
    src_tok, tgt_tok = build_tokenizers(train, args.tokenizer, min_freq=CPU_TOKENIZERS["min_freq"],
                                        vocab_size=args.vocab_size)
    examples = encode_pairs(train, src_tok, tgt_tok, max_len=CPU_DATA["max_len"])
    batches = TokenBatcher(examples, CPU_DATA["max_tokens"], shuffle=True, seed=args.seed)
    valid_pairs = load_multi30k("val")
    valid_batches = list(TokenBatcher(encode_pairs(valid_pairs, src_tok, tgt_tok),
                                      CPU_DATA["max_tokens"], shuffle=False))
    eval_sets = {}
    for split in args.splits:
        pairs = valid_pairs if split == "val" else load_multi30k(split)
        pairs = pairs[: args.limit]
        eval_sets[split] = ([s for s, _ in pairs], [t for _, t in pairs])
    config = cpu_model_config(len(src_tok), len(tgt_tok), share_embeddings=args.share_embeddings,
                              tie_output=args.tie_output)
    described = (f"{args.tokenizer}" + (f" {args.vocab_size}" if args.tokenizer == "subword"
                                        else "") + f" ({len(src_tok):,} / {len(tgt_tok):,})"
                 + (", shared embeddings" if args.share_embeddings else "")
                 + (", tied output" if args.tie_output else ""))
    print(f"data: {len(examples):,} training pairs, {len(batches)} batches an epoch, "
          f"tokenizer {described} (prepared in {time.perf_counter() - t0:.1f} s)", flush=True)
    results = {}
    for name in args.models:
        print(f"{MODELS[name]}:", flush=True)
        results[name] = run_model(name, config, args, batches, valid_batches,
                                  (src_tok, tgt_tok), eval_sets)
    after = print_machine("after")
    key = "test_2016_flickr/beam4"
    if key not in next(iter(results.values()))[0]["scores"]:
        key = next(iter(next(iter(results.values()))[0]["scores"]))
    reach = {name: {str(t): minutes_to(points, key, t) for t in args.targets}
             for name, points in results.items()}
    for name, r in reach.items():
        print(f"{MODELS[name]}: minutes to cased BLEU ({key}) " +
              ", ".join(f"{t}: {m if m is not None else 'not reached'}" for t, m in r.items()))
    record = {
        "what": "test BLEU against training time, the command line's model vs "
                "torch.nn.Transformer in the same loop, data and tokenisation",
        "script": "benchmarks/bench_time_to_bleu.py",
        **run_stamp(started),
        "machine_before": before, "machine_after": after,
        "tokenizer": described, "model_config": config.to_dict(),
        "precision": {name: precision(torch.device("cpu"),
                                      args.amp if name == "ours" else args.torch_amp)[1]
                      for name in args.models},
        "sentences_scored": args.limit, "beams": args.beams, "splits": args.splits,
        "train_config": cpu_train_config(epochs=None, max_minutes=args.marks[-1]).to_dict(),
        "resumed_at_marks": CPU_TRAINING["schedule"] in STEP_SCHEDULES,
        "minutes_to_bleu": {"score": key, **reach},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    plot(record, args.plot, key)
    print(f"wrote {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
