"""Translation as language modelling: a decoder-only model against chapter 10's encoder-decoder.

Issue 23, item 4. Two models learn Multi30k German → English under the
same conditions:

- ``encdec``: exactly chapter 10's translator, the
  :class:`~minitransformer.Transformer` of
  :func:`~minitransformer.training.presets.cpu_model_config` (3 + 3 layers,
  width 256, 8 heads, d_ff 512, pre-LN, no dropout, untied), trained on
  :class:`~minitransformer.data.TokenBatcher` batches;
- ``lm``: a :class:`~minitransformer.LanguageModel` (the same width, heads,
  d_ff, pre-LN and no dropout) reading ``German [BOS] English [EOS]``
  (:class:`~minitransformer.data.LMBatcher` over the same ``(German ids,
  English ids)`` pairs; :func:`~minitransformer.data.make_lm_batch` puts the
  loss on the English part and the final EOS only). Its number of layers
  and whether its output layer is tied to its embedding are chosen so that
  its parameter count is as close as possible to the encoder-decoder's
  (:func:`choose_lm_config`; ``--lm-layers`` / ``--lm-tie-output`` force
  them), and its ``max_len`` covers a German sentence, BOS and its
  translation (:func:`lm_max_len`).

The same data (the CPU preset's shared 8,000-piece SentencePiece model,
learnt once from the training pairs; the preset's length limit and token
budget per batch), the same recipe (:func:`~minitransformer.training.presets.cpu_train_config`:
Adam, the warm-up schedule, label smoothing, the moving average of the
weights; :func:`~minitransformer.fit` for both), the same wall-clock budget
(``--minutes``) and seeds (``--seeds``) on the same CPU. Each run then
reports its validation cross-entropy (:func:`~minitransformer.evaluate_loss`
on the val split, nats per English token + EOS for both models: the same
tokens are counted), and translates test_2016_flickr with beam ``--beam``
(``encdec`` with :func:`~minitransformer.decoding.translate`, ``lm`` with
:func:`~minitransformer.translate_with_lm`, both with the ``evaluate``
command's length penalty and batch size and ``translate``'s extra length),
scored as ``python -m minitransformer evaluate`` scores (one line per
sentence, :func:`~minitransformer.metrics.corpus_scores`: cased sacreBLEU,
the headline; lower-cased; chrF).

A third model, ``encdec-2020s`` (issue 24, item 5; chapter 12), is chapter
10's translator with the 2020s parts (``cpu_model_config(era="2020s")``:
pre-RMSNorm, SwiGLU, rotary positions, 2 key/value heads, no biases, and the
feed-forward width that gives the 2017 model's parameter count); run it
against ``encdec`` with ``--models encdec encdec-2020s --out
minitransformer/results/eras_translation.json`` (read by chapter 12 with
``load_result("eras_translation")``).

Modes: one run after the other with ``--threads`` threads (default torch's),
or ``--parallel``: the two models of a seed side by side as two processes
of one thread each, so both see the same machine load (half the wall time on
two cores). The JSON says which.

    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_lm_translation.py --threads 2
    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_lm_translation.py --parallel
    python benchmarks/bench_lm_translation.py --smoke                  # a quick check of the path

Prints the machine before and after (``benchmarks/machine.py``) and writes
``--out`` (default ``minitransformer/results/lm_translation.json``, read by
chapter 11 with ``load_result("lm_translation")``; ``--smoke`` writes to the
temporary folder unless ``--out`` is given). Results: ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import machine
import torch

from minitransformer import (
    LanguageModel,
    LanguageModelConfig,
    Transformer,
    count_parameters,
    evaluate_loss,
    fit,
    translate_with_lm,
)
from minitransformer.cli import build_parser
from minitransformer.data import (
    LMBatch,
    LMBatcher,
    SubwordTokenizer,
    TokenBatcher,
    build_tokenizers,
    encode_pairs,
    load_multi30k,
)
from minitransformer.data.lines import one_line
from minitransformer.decoding import translate
from minitransformer.metrics import corpus_scores
from minitransformer.training import precision
from minitransformer.training.presets import (
    CPU_DATA,
    CPU_MODEL,
    CPU_TOKENIZERS,
    cpu_model_config,
    cpu_train_config,
    positions_for,
)

ROOT = Path(__file__).resolve().parent
RESULT = ROOT.parent / "minitransformer" / "results" / "lm_translation.json"
MODELS = {
    "encdec": "Transformer, chapter 10's encoder-decoder (cpu_model_config)",
    "lm": "LanguageModel on German [BOS] English [EOS], loss on the English part",
    "encdec-2020s": "Transformer with the 2020s parts at the same parameter count "
                    "(cpu_model_config(era='2020s'): pre-RMSNorm, SwiGLU, RoPE, 2 key/value "
                    "heads, no biases; chapter 12)",
}
TEST_SPLIT = "test_2016_flickr"
# Decoding as `python -m minitransformer evaluate` decodes (its defaults) and
# `translate`'s extra length: the same for both models.
_EVALUATE = build_parser().parse_args(["evaluate", "--checkpoint", "unused"])
DECODING = {
    "length_penalty": _EVALUATE.length_penalty,
    "batch_size": _EVALUATE.batch_size,
    "extra_len": inspect.signature(translate).parameters["extra_len"].default,
}
SMOKE = {"minutes": 0.05, "n_test": 20, "n_valid": 64, "train_pairs": 2000, "seeds": [0]}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0,
                   help="training budget of each run, wall clock (default 10)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--models", nargs="+", choices=list(MODELS), default=["encdec", "lm"],
                   help="the models to run (default: encdec lm, chapter 11's comparison)")
    p.add_argument("--beam", type=int, default=4, help="beam size on the test set (default 4)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default torch's; --parallel: 1 per process)")
    p.add_argument("--parallel", action="store_true",
                   help="run the models of a seed side by side, two processes of 1 thread")
    p.add_argument("--lm-layers", type=int, default=None,
                   help="layers of the LM (default: chosen to match the parameter count)")
    p.add_argument("--lm-tie-output", choices=["yes", "no"], default=None,
                   help="tie the LM's output layer to its embedding (default: chosen with "
                   "--lm-layers to match the parameter count)")
    p.add_argument("--n-test", type=int, default=None, help="score the first N test sentences")
    p.add_argument("--n-valid", type=int, default=None,
                   help="validate on the first N val pairs (smoke)")
    p.add_argument("--train-pairs", type=int, default=None,
                   help="train on the first N pairs only (smoke)")
    p.add_argument("--vocab-size", type=int, default=CPU_TOKENIZERS["vocab_size"],
                   help="pieces of the subword model (default the preset's; tests shrink it)")
    p.add_argument("--data-root", type=Path, default=None,
                   help="folder of the Multi30k files (default: $MINITRANSFORMER_DATA/...)")
    p.add_argument("--smoke", action="store_true",
                   help=f"a quick check: {SMOKE} unless given")
    p.add_argument("--out", type=Path, default=None,
                   help=f"the JSON (default {RESULT.relative_to(ROOT.parent)}; with --smoke "
                   "the temporary folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    # internal: one run in a process of its own (--parallel)
    p.add_argument("--worker", choices=list(MODELS), help=argparse.SUPPRESS)
    p.add_argument("--tokenizer-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.smoke:
        given = set(_given_flags(argv))
        for key, value in SMOKE.items():
            if f"--{key.replace('_', '-')}" not in given:
                setattr(args, key, value)
    if args.out is None:
        args.out = (Path(tempfile.gettempdir()) / "lm_translation_smoke.json" if args.smoke
                    else RESULT)
    if args.minutes <= 0:
        p.error("--minutes must be positive")
    return args


def _given_flags(argv: Sequence[str] | None) -> list[str]:
    words = sys.argv[1:] if argv is None else list(argv)
    return [w.split("=", 1)[0] for w in words if w.startswith("--")]


# --------------------------------------------------------------------------- data


@dataclass
class Data:
    """The tokenizer and the encoded splits every run shares."""

    tokenizer: SubwordTokenizer
    train: list[tuple[list[int], list[int]]]  # (German ids, English ids), preset's max_len
    valid: list[tuple[list[int], list[int]]]
    test_sources: list[str]
    test_references: list[str]


def load_data(args: argparse.Namespace, tokenizer: SubwordTokenizer | None = None) -> Data:
    """Multi30k de→en: the preset's joint subword model learnt from all the
    training pairs (unless ``tokenizer`` is given), the training pairs (the
    first ``--train-pairs``) encoded with the preset's length limit, the val
    pairs, the test sentences."""
    root, download = args.data_root, args.data_root is None
    train = load_multi30k("train", root=root, download=download)
    if tokenizer is None:
        tokenizer, _ = build_tokenizers(train, "subword", vocab_size=args.vocab_size)
    train = train[: args.train_pairs]
    valid = load_multi30k("val", root=root, download=download)[: args.n_valid]
    test = load_multi30k(TEST_SPLIT, root=root, download=download)[: args.n_test]
    return Data(
        tokenizer,
        encode_pairs(train, tokenizer, tokenizer, max_len=CPU_DATA["max_len"]),
        encode_pairs(valid, tokenizer, tokenizer),
        [s for s, _ in test], [t for _, t in test],
    )


class CountingLMBatcher(LMBatcher):
    """:class:`LMBatcher` that also counts the non-pad input tokens (German +
    BOS + English) of every batch it yields, in order, so that the LM's
    throughput can be given in the unit the encoder-decoder's is (source +
    target tokens: ``S + (T + 1)`` either way). ``fit`` steps every batch it
    takes, in order, so the first ``steps`` counts are those trained on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_tokens: list[int] = []

    def _generate(self, batches: list[list[int]]) -> Iterator[LMBatch]:
        for batch in super()._generate(batches):
            self.input_tokens.append(int((batch.inputs != batch.pad_id).sum()))
            yield batch


# --------------------------------------------------------------------------- models


def encdec_config(vocab_size: int, era: str = "2017"):
    """Chapter 10's model for the joint vocabulary (``era="2020s"``: chapter 12's)."""
    return cpu_model_config(vocab_size, vocab_size, era=era)


def lm_max_len() -> int:
    """Positions the LM needs: in training ``German [BOS] English`` of at most
    ``max_len`` pieces a side (``2 * max_len + 1`` inputs); in decoding the
    German sentence, BOS and up to its length + ``extra_len`` pieces. The
    preset's rule (:func:`positions_for`) applied to the longer of the two."""
    longest = max(2 * CPU_DATA["max_len"] + 1, 2 * CPU_DATA["max_len"] + DECODING["extra_len"])
    return positions_for(longest)


def lm_config(vocab_size: int, num_layers: int, tie_output: bool) -> LanguageModelConfig:
    """The LM of the encoder-decoder's width, heads, d_ff, norm placement, dropout."""
    return LanguageModelConfig(
        vocab_size=vocab_size, d_model=CPU_MODEL["d_model"], num_heads=CPU_MODEL["num_heads"],
        num_layers=num_layers, d_ff=CPU_MODEL["d_ff"], dropout=CPU_MODEL["dropout"],
        norm_first=CPU_MODEL["norm_first"], tie_output=tie_output, max_len=lm_max_len(),
    )


def parameters_of(config) -> int:
    """:func:`count_parameters` of the model of ``config``, built on the meta device."""
    with torch.device("meta"):
        model = Transformer(config) if not isinstance(config, LanguageModelConfig) \
            else LanguageModel(config)
    return count_parameters(model)


def choose_lm_config(vocab_size: int, target: int, num_layers: int | None = None,
                     tie_output: bool | None = None, max_layers: int = 24
                     ) -> tuple[LanguageModelConfig, list[dict]]:
    """The LM config whose parameter count is closest to ``target``, over
    ``1..max_layers`` layers and tied or untied output (either fixed when
    given); on a tie, the preset's tying. Returns it and every candidate
    ``{"num_layers", "tie_output", "parameters", "difference"}``.

    Why this rule: the comparison is at equal capacity. The encoder-decoder
    spends most of its parameters on three vocabulary-sized matrices
    (source and target embeddings, output layer); the LM has one embedding
    for both languages, so the same count buys it more layers, and tying its
    output layer to that embedding a few more still. The candidates go into
    the JSON, so the runner-up of the other tying is on record too."""
    ties = [tie_output] if tie_output is not None else [CPU_MODEL["tie_output"],
                                                        not CPU_MODEL["tie_output"]]
    depths = [num_layers] if num_layers is not None else range(1, max_layers + 1)
    candidates = []
    for tie in ties:
        # every layer holds the same parameters: the count is linear in the depth
        base = parameters_of(lm_config(vocab_size, 0, tie))
        per_layer = parameters_of(lm_config(vocab_size, 1, tie)) - base
        for n in depths:
            params = base + n * per_layer
            candidates.append({"num_layers": n, "tie_output": tie, "parameters": params,
                               "difference": params - target})
    best = min(candidates, key=lambda c: abs(c["difference"]))  # first = the preset's tying
    return lm_config(vocab_size, best["num_layers"], best["tie_output"]), candidates


# --------------------------------------------------------------------------- one run


def train_and_score(name: str, seed: int, data: Data, config, args: argparse.Namespace) -> dict:
    """Train model ``name`` from ``seed`` for ``args.minutes``, then its
    validation loss and test scores; the run's record."""
    load_start = os.getloadavg()
    vocab = data.tokenizer
    torch.manual_seed(seed)
    if name.startswith("encdec"):
        model = Transformer(config)
        batches = TokenBatcher(data.train, CPU_DATA["max_tokens"], shuffle=True, seed=seed)
        valid = list(TokenBatcher(data.valid, CPU_DATA["max_tokens"], shuffle=False))
    else:
        model = LanguageModel(config)
        batches = CountingLMBatcher(data.train, CPU_DATA["max_tokens"], shuffle=True, seed=seed)
        valid = list(LMBatcher(data.valid, CPU_DATA["max_tokens"], shuffle=False))
    train_config = cpu_train_config(epochs=None, max_minutes=args.minutes, seed=seed,
                                    device="cpu", pad_id=config.pad_id)
    print(f"{name} seed {seed}: {count_parameters(model):,} parameters, "
          f"{torch.get_num_threads()} thread(s), {args.minutes:g} min", flush=True)
    t0 = time.perf_counter()
    history = fit(model, batches, valid, train_config, progress=not args.quiet)
    fit_seconds = time.perf_counter() - t0
    steps = history.step[-1] if history.step else 0
    seconds = history.seconds[-1] if history.seconds else 0.0
    if name.startswith("encdec"):  # fit counts non-pad source + target tokens
        processed = sum(history.tokens)
    else:  # fit counts the English targets only; German + BOS + English as encdec's unit
        processed = sum(batches.input_tokens[:steps])
    # the model holds the moving average now (as chapter 10's result); float32
    valid_loss = evaluate_loss(model, valid, amp="off")
    model.eval()
    t0 = time.perf_counter()
    decode = translate if name.startswith("encdec") else translate_with_lm
    hyps = decode(model, data.test_sources, vocab, vocab, beam_size=args.beam, **DECODING)
    hyps = [one_line(h) for h in hyps]  # as evaluate writes them
    decode_seconds = time.perf_counter() - t0
    scores = corpus_scores(hyps, data.test_references)
    record = {
        "model": name, "seed": seed, "parameters": count_parameters(model),
        "threads": torch.get_num_threads(),
        "precision": precision(torch.device("cpu"), train_config.amp)[1],
        "steps": steps, "epochs": round(steps / len(batches), 3),
        "stop_reason": history.stop_reason,
        "minutes": round(fit_seconds / 60, 3),
        "train_step_minutes": round(seconds / 60, 3),
        "tokens_per_second": round(history.tokens_per_second, 1),
        "source_target_tokens_per_second": round(processed / seconds, 1) if seconds else None,
        "valid_loss": round(valid_loss, 4),
        "valid_curve": {"step": history.valid_step,
                        "loss": [round(x, 4) for x in history.valid_loss]},
        "sentences": len(hyps), "beam": args.beam,
        "bleu": round(scores.bleu.score, 2), "bleu_lowercase": round(scores.bleu_lc.score, 2),
        "chrf": round(scores.chrf.score, 2),
        "signatures": {s.name: s.signature for s in (scores.bleu, scores.bleu_lc, scores.chrf)},
        "decode_seconds": round(decode_seconds, 1),
        "example": {"source": data.test_sources[0], "translation": hyps[0],
                    "reference": data.test_references[0]},
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }
    rate = record["source_target_tokens_per_second"]
    print(f"{name} seed {seed}: {steps} steps ({record['epochs']:.2f} epochs), "
          f"{'n/a' if rate is None else f'{rate:,.0f}'} source+target tokens/s, validation "
          f"cross-entropy {valid_loss:.3f}; {TEST_SPLIT} beam {args.beam}: cased BLEU "
          f"{record['bleu']:.2f}, lower-cased {record['bleu_lowercase']:.2f} "
          f"({decode_seconds:.0f} s to decode); load {record['load_average_end']}", flush=True)
    return record


def config_for(name: str, args: argparse.Namespace, vocab_size: int):
    if name.startswith("encdec"):
        return encdec_config(vocab_size, era="2020s" if name == "encdec-2020s" else "2017")
    return lm_config(vocab_size, args.lm_layers, args.lm_tie_output == "yes")


def worker(args: argparse.Namespace) -> None:
    """``--worker``: one run in this process (``--parallel``'s children)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_data(args, SubwordTokenizer.load(args.tokenizer_file))
    seed = args.seeds[0]
    record = train_and_score(args.worker, seed, data, config_for(args.worker, args,
                                                                  len(data.tokenizer)), args)
    args.worker_out.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")


def worker_argv(args: argparse.Namespace, name: str, seed: int, tok_file: Path,
                out: Path) -> list[str]:
    """The command line of one ``--worker`` run: this run's settings, 1 thread."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", name,
            "--seeds", str(seed), "--threads", "1", "--minutes", str(args.minutes),
            "--beam", str(args.beam), "--vocab-size", str(args.vocab_size),
            "--lm-layers", str(args.lm_layers), "--lm-tie-output", args.lm_tie_output,
            "--tokenizer-file", str(tok_file), "--worker-out", str(out), "--quiet"]
    for flag in ("n_test", "n_valid", "train_pairs", "data_root"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    return argv


def run_parallel(args: argparse.Namespace, tokenizer: SubwordTokenizer) -> list[dict]:
    """Every seed's models side by side, one process of one thread each."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="lm_translation_") as tmp:
        tok_file = Path(tmp) / "tokenizer.model"
        tokenizer.save(tok_file)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        for seed in args.seeds:
            outs = {name: Path(tmp) / f"{name}_{seed}.json" for name in args.models}
            procs = [subprocess.Popen(worker_argv(args, name, seed, tok_file, out), env=env)
                     for name, out in outs.items()]
            codes = [p.wait() for p in procs]
            if any(codes):
                raise RuntimeError(f"a worker of seed {seed} failed (exit codes {codes})")
            runs += [json.loads(out.read_text(encoding="utf-8")) for out in outs.values()]
    return runs


# --------------------------------------------------------------------------- summary


def spread(values: list[float | None]) -> dict:
    """``{"mean", "min", "max", "n"}`` of the values that are not None (all
    None without any: a run of no step has no throughput)."""
    known = [v for v in values if v is not None]
    if not known:
        return {"mean": None, "min": None, "max": None, "n": 0}
    return {"mean": round(statistics.mean(known), 2), "min": min(known), "max": max(known),
            "n": len(known)}


def summarise(runs: list[dict]) -> dict:
    """Per model: mean and min-max of cased and lower-cased BLEU, validation
    loss, steps and throughput over its seeds."""
    out = {}
    for name in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == name]
        out[name] = {key: spread([r[key] for r in mine]) for key in (
            "bleu", "bleu_lowercase", "valid_loss", "steps", "source_target_tokens_per_second")}
        out[name]["valid_loss"]["mean"] = round(statistics.mean(r["valid_loss"] for r in mine), 4)
    return out


def main(argv: Sequence[str] | None = None) -> dict | None:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return None
    if args.threads and not args.parallel:
        torch.set_num_threads(args.threads)
    started = time.time()
    print(f"torch.get_num_threads() = {torch.get_num_threads()}", flush=True)
    before = machine.print_machine("before")
    t0 = time.perf_counter()
    data = load_data(args)
    vocab_size = len(data.tokenizer)
    encdec = encdec_config(vocab_size)
    target = parameters_of(encdec)
    tie = None if args.lm_tie_output is None else args.lm_tie_output == "yes"
    lm, candidates = choose_lm_config(vocab_size, target, args.lm_layers, tie)
    args.lm_layers, args.lm_tie_output = lm.num_layers, "yes" if lm.tie_output else "no"
    lm_params = parameters_of(lm)
    print(f"data: {len(data.train):,} training pairs, {len(data.valid):,} val pairs, "
          f"{len(data.test_sources):,} test sentences, one subword vocabulary of "
          f"{vocab_size:,} pieces (prepared in {time.perf_counter() - t0:.1f} s)")
    print(f"encoder-decoder: {target:,} parameters; LM: {lm.num_layers} layers, "
          f"{'tied' if lm.tie_output else 'untied'} output, {lm_params:,} parameters "
          f"({100 * (lm_params - target) / target:+.1f}%), max_len {lm.max_len}", flush=True)
    mode = "parallel" if args.parallel else "sequential"
    if args.parallel:
        runs = run_parallel(args, data.tokenizer)
    else:
        configs = {"encdec": encdec, "lm": lm,
                   "encdec-2020s": encdec_config(vocab_size, era="2020s")}
        runs = [train_and_score(name, seed, data, configs[name], args)
                for seed in args.seeds for name in args.models]
    after = machine.print_machine("after")
    summary = summarise(runs)
    for name, s in summary.items():
        b, lc = s["bleu"], s["bleu_lowercase"]
        print(f"{name:7s} cased BLEU {b['mean']:.2f} ({b['min']:.2f} to {b['max']:.2f}, "
              f"{b['n']} seeds), lower-cased {lc['mean']:.2f} ({lc['min']:.2f} to "
              f"{lc['max']:.2f}); validation cross-entropy {s['valid_loss']['mean']:.3f}")
    record = {
        "what": ("issue 24: chapter 10's translator with the 2017 parts against the same "
                 "translator with the 2020s parts, at the same parameter count, data, recipe, "
                 "wall-clock budget and seeds" if "lm" not in args.models else
                 "issue 23: translation as language modelling (a decoder-only model on "
                 "German [BOS] English [EOS]) against chapter 10's encoder-decoder, at the "
                 "same parameter count, data, recipe, wall-clock budget and seeds"),
        "models_run": args.models,
        "script": "benchmarks/bench_lm_translation.py",
        **machine.run_stamp(started),
        "machine_before": before, "machine_after": after,
        "mode": mode,
        "mode_note": ("the two models of a seed side by side, two processes of 1 thread each"
                      if args.parallel else
                      f"one run after the other, {torch.get_num_threads()} thread(s)"),
        "minutes": args.minutes, "seeds": args.seeds, "smoke": args.smoke,
        "data": {"corpus": "Multi30k de-en", "tokenizer": {**CPU_TOKENIZERS,
                                                          "vocab_size": args.vocab_size},
                 **CPU_DATA, "train_pairs": len(data.train), "valid_pairs": len(data.valid),
                 "test_split": TEST_SPLIT, "test_sentences": len(data.test_sources)},
        "train_config": cpu_train_config(epochs=None, max_minutes=args.minutes).to_dict(),
        "decoding": {"beam": args.beam, **DECODING},
        "models": {
            "encdec": {"what": MODELS["encdec"], "config": encdec.to_dict(),
                       "parameters": target},
            "encdec-2020s": {"what": MODELS["encdec-2020s"],
                             "config": encdec_config(vocab_size, era="2020s").to_dict(),
                             "parameters": parameters_of(encdec_config(vocab_size,
                                                                       era="2020s"))},
            "lm": {"what": MODELS["lm"], "config": lm.to_dict(), "parameters": lm_params,
                   "choice": "the number of layers and the output tying whose parameter "
                             "count is closest to the encoder-decoder's (candidates below; "
                             "max_len covers German + BOS + English)",
                   "candidates": candidates},
        },
        "summary": summary,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
