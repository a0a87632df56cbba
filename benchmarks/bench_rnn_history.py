"""The history of neural machine translation on Multi30k, at equal time budgets.

Trains, one after the other and with the same budget of wall-clock minutes,
the three RNN encoder-decoders of chapter 1 (:mod:`minitransformer.rnn.models`:
simple, context, Bahdanau attention) and the package's Transformer on
Multi30k German→English, all with the shared trainer
(:func:`minitransformer.training.fit`), then measures BLEU on
test_2016_flickr with the shared greedy decoding and sacreBLEU
(:func:`minitransformer.decoding.translate`, :func:`corpus_bleu`).

    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_rnn_history.py --minutes 10

Writes ``minitransformer/results/rnn_history.json``, the only copy (package
data, so chapter 1 finds it on Colab too, through
:func:`minitransformer.results.load_result`). The JSON records the machine, the CPU load while it
ran (the budget is wall-clock time, so a busy machine gives every model
fewer steps), and per model: parameters, steps, epochs, tokens/s, the loss
curve, validation loss and test BLEU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import machine
import torch

from minitransformer.data import TokenBatcher, build_vocabs, encode_pairs, load_multi30k
from minitransformer.decoding import corpus_bleu, translate
from minitransformer.model import Transformer
from minitransformer.rnn.models import RNN_MODELS, RNNConfig
from minitransformer.training import TrainConfig, fit
from minitransformer.training.presets import (
    CPU_DATA,
    CPU_MODEL,
    CPU_TOKENIZERS,
    cpu_model_config,
    cpu_train_config,
)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "minitransformer" / "results" / "rnn_history.json"

#: Reported by a public PyTorch seq2seq tutorial: 10 epochs on a GPU, Multi30k
#: test 2016, different tokenisation, sizes and decoding; for orientation only.
REFERENCE_BLEU = {"simple": 13.8, "context": 20.6, "attention": 28.3, "transformer": 36.5}
REFERENCE_NOTE = (
    "A public PyTorch seq2seq tutorial, 10 epochs on a GPU: simple LSTM encoder-decoder "
    "13.8, context GRU 20.6, Bahdanau GRU 28.3, Transformer 36.5 BLEU on Multi30k test "
    "2016. Obtained differently (GPU, 10 full epochs, their tokenisation, sizes and "
    "decoding): not comparable number for number with this benchmark."
)
LABELS = {
    "simple": "simple RNN (Sutskever et al. 2014, GRU)",
    "context": "context RNN (Cho et al. 2014)",
    "attention": "RNN + attention (Bahdanau et al. 2015)",
    "transformer": "Transformer (Vaswani et al. 2017)",
}


def build_model(name: str, src_size: int, tgt_size: int, args) -> torch.nn.Module:
    """One of the four models, at the sizes used for this benchmark."""
    if name == "transformer":
        # The chapter-10 CPU configuration (minitransformer.training.presets), pre-LN,
        # on the same word vocabularies as the RNNs: two languages, two tables, untied
        return Transformer(cpu_model_config(src_size, tgt_size, share_embeddings=False,
                                            tie_output=False))
    config = RNNConfig(src_size, tgt_size, emb_dim=args.rnn_emb, hidden_dim=args.rnn_hidden,
                       attn_dim=args.rnn_hidden, dropout=args.rnn_dropout)
    return RNN_MODELS[name](config)


def train_config(name: str, minutes: float) -> TrainConfig:
    if name == "transformer":  # as in chapter 10 and the command line's defaults, except:
        # no weight averaging, for no model: like for like, and as in the stored results
        return cpu_train_config(epochs=None, max_minutes=minutes, seed=0, device="cpu",
                                amp="off", ema_decay=None)
    # GRUs: Adam at a constant 1e-3 after a short warm-up (what RNN tutorials use).
    return TrainConfig(lr=1e-3, schedule="constant", warmup_steps=100, label_smoothing=0.1,
                       epochs=None, max_minutes=minutes, seed=0, device="cpu", amp="off")


def _subsample(xs: list, n: int = 200) -> list:
    step = max(1, len(xs) // n)
    return xs[::step]


def run_one(name, data, args) -> dict:
    train_ex, valid_batches, test_pairs, src_vocab, tgt_vocab = data
    torch.manual_seed(0)
    model = build_model(name, len(src_vocab), len(tgt_vocab), args)
    params = sum(p.numel() for p in model.parameters())
    batches = TokenBatcher(train_ex, args.max_tokens, shuffle=True, seed=0)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    history = fit(model, batches, valid_batches, train_config(name, args.minutes),
                  progress=not args.quiet)
    train_s = time.perf_counter() - t0
    model.eval()
    t1 = time.perf_counter()
    hyps = translate(model, [s for s, _ in test_pairs], src_vocab, tgt_vocab, beam_size=1)
    decode_s = time.perf_counter() - t1
    bleu = corpus_bleu(hyps, [t for _, t in test_pairs])
    steps = history.step[-1] if history.step else 0
    result = {
        "label": LABELS[name],
        "parameters": params,
        "config": model.config.to_dict(),
        "train_config": train_config(name, args.minutes).to_dict(),
        "steps": steps,
        "epochs": round(steps / len(batches), 3),
        "train_seconds": round(train_s, 1),
        "tokens_per_second": round(history.tokens_per_second, 1),
        "stop_reason": history.stop_reason,
        "valid_loss": history.valid_loss[-1] if history.valid_loss else None,
        "train_loss_curve": {
            "step": _subsample(list(history.step)),
            "loss": [round(x, 4) for x in _subsample(list(history.train_loss))],
        },
        "test_bleu": round(bleu.score, 2),
        "bleu_signature": str(bleu.signature) if hasattr(bleu, "signature") else None,
        "decode_seconds": round(decode_s, 1),
        "examples": [
            {"source": s, "reference": t, "hypothesis": h}
            for (s, t), h in list(zip(test_pairs, hyps, strict=True))[:3]
        ],
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
        "reference_bleu_tutorial": REFERENCE_BLEU[name],
    }
    print(f"{name}: {params / 1e6:.1f} M params, {steps} steps ({result['epochs']} epochs) "
          f"in {train_s:.0f} s, {result['tokens_per_second']:.0f} tok/s, "
          f"valid loss {result['valid_loss']:.3f}, test BLEU {result['test_bleu']:.2f} "
          f"(decoded in {decode_s:.0f} s)", flush=True)
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0, help="training budget per model")
    p.add_argument("--models", default="simple,context,attention,transformer")
    p.add_argument("--max-tokens", type=int, default=CPU_DATA["max_tokens"],
                   help="token budget of a batch")
    p.add_argument("--rnn-emb", type=int, default=128)
    p.add_argument("--rnn-hidden", type=int, default=128)
    p.add_argument("--rnn-dropout", type=float, default=CPU_MODEL["dropout"],
                   help="dropout of the GRU models (default: the Transformer's, none: in a "
                   "budget of minutes no model sees the data often enough to overfit)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help="where to write the JSON (default: the copy chapter 1 reads)")
    p.add_argument("--limit-test", type=int, default=None, help="smoke test: first N sentences")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: torch's choice; on a machine shared with "
                   "other jobs, 1 avoids OpenMP oversubscription; see benchmarks/README.md)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    for n in names:
        if n not in LABELS:
            p.error(f"unknown model {n!r}; choose from {', '.join(LABELS)}")

    if args.threads:
        torch.set_num_threads(args.threads)
    machine.report_before_and_after()
    t0 = time.perf_counter()
    train_pairs = load_multi30k("train", "de", "en")
    valid_pairs = load_multi30k("val", "de", "en")
    test_pairs = load_multi30k("test_2016_flickr", "de", "en")[: args.limit_test]
    src_vocab, tgt_vocab = build_vocabs(train_pairs, min_freq=CPU_TOKENIZERS["min_freq"])
    train_ex = encode_pairs(train_pairs, src_vocab, tgt_vocab, max_len=CPU_DATA["max_len"])
    valid_ex = encode_pairs(valid_pairs, src_vocab, tgt_vocab)
    valid_batches = list(TokenBatcher(valid_ex, args.max_tokens, shuffle=False))
    data = (train_ex, valid_batches, test_pairs, src_vocab, tgt_vocab)
    print(f"data ready in {time.perf_counter() - t0:.0f} s: {len(train_ex):,} training pairs, "
          f"vocabularies {len(src_vocab):,} / {len(tgt_vocab):,}", flush=True)

    record = {
        "what": "Multi30k de->en, equal wall-clock training budgets, shared trainer, "
                "greedy decoding, sacreBLEU (lowercased) on test_2016_flickr",
        "script": "benchmarks/bench_rnn_history.py",
        **machine.run_stamp(),
        "machine": {**machine.describe(), "processor": machine.cpu_model(), "device": "cpu"},
        "budget_minutes_per_model": args.minutes,
        "contention_note": "",  # filled in by _write from the recorded load
        "train_pairs": len(train_ex),
        "vocab_sizes": [len(src_vocab), len(tgt_vocab)],
        "reference_note": REFERENCE_NOTE,
        "models": {},
    }
    for name in names:
        record["models"][name] = run_one(name, data, args)
        _write(record, args)
    record["machine_after"] = machine.describe()
    _write(record, args)
    return 0


def load_note(record: dict) -> str:
    """One sentence on how busy the machine was, from the 1-minute load averages
    recorded before and after each model (the benchmark itself accounts for
    about as much load as it has threads)."""
    loads = [m[k] for m in record["models"].values()
             for k in ("load_average_1min_before", "load_average_1min_after")]
    if not loads:
        return ""
    cpus, threads = record["machine"]["cpu_count"], record["machine"]["torch_threads"]
    peak = max(loads)
    if peak > threads + 1.0:
        return (
            f"Run on a {cpus}-core machine shared with other jobs (1-minute load average up "
            f"to {peak:.1f}, recorded per model). The budget is wall-clock time, so every "
            "model got only a share of the CPU and fewer steps than it would alone."
        )
    return (
        f"Run on an otherwise idle {cpus}-core machine: the 1-minute load average stayed at "
        f"or below {peak:.1f}, about what the benchmark's own {threads} thread(s) make."
    )


def _write(record: dict, args) -> None:
    record["contention_note"] = load_note(record)
    text = json.dumps(record, indent=1, ensure_ascii=False)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
