"""What averaging the weights is worth: one training run, several moving averages.

Trains the chapter's CPU configuration on Multi30k with ``fit`` for
``--minutes`` (the command line's defaults, ``training.presets``, except that
``fit`` itself averages nothing) while keeping an
:class:`~minitransformer.training.averaging.ExponentialMovingAverage` for each
``--decays`` beside the run, updated after every optimiser step by ``fit``'s
``on_step`` callback (so the training is exactly the unaveraged one). Then
it scores the trained weights and each average on Multi30k
test_2016_flickr: validation cross-entropy, cased BLEU (sacreBLEU's default)
greedy and with beam 4, and lower-cased BLEU with beam 4.
One run compares all of them on the same training trajectory, free of the
run-to-run variation of the machine's speed.

    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_averaging.py
    python benchmarks/bench_averaging.py --minutes 10 --decays 0.98,0.99 --max-tokens 1024
"""

from __future__ import annotations

import argparse
import time

import machine
import torch

from minitransformer.data import TokenBatcher, build_tokenizers, encode_pairs, load_multi30k
from minitransformer.decoding import translate
from minitransformer.metrics import corpus_scores
from minitransformer.model import Transformer
from minitransformer.training import StepReport, evaluate_loss, fit
from minitransformer.training.averaging import ExponentialMovingAverage
from minitransformer.training.presets import (
    CPU_DATA,
    CPU_TOKENIZERS,
    CPU_TRAINING,
    cpu_model_config,
    cpu_train_config,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="training budget")
    p.add_argument("--decays", default="0.98,0.99,0.995", help="comma-separated EMA decays")
    p.add_argument("--max-tokens", type=int, default=CPU_DATA["max_tokens"])
    p.add_argument("--lr", type=float, default=CPU_TRAINING["lr"], help="peak learning rate")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sentences", type=int, default=None, help="first N test sentences only")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    machine.report_before_and_after()
    decays = [float(d) for d in args.decays.split(",") if d.strip()]

    train = load_multi30k("train")
    valid = load_multi30k("val")
    test = load_multi30k("test_2016_flickr")[: args.sentences]
    src_vocab, tgt_vocab = build_tokenizers(train, **CPU_TOKENIZERS)
    train_ex = encode_pairs(train, src_vocab, tgt_vocab, max_len=CPU_DATA["max_len"])
    train_batches = TokenBatcher(train_ex, args.max_tokens, shuffle=True, seed=0)
    valid_batches = list(TokenBatcher(encode_pairs(valid, src_vocab, tgt_vocab),
                                      CPU_DATA["max_tokens"], shuffle=False))
    torch.manual_seed(0)
    model = Transformer(cpu_model_config(len(src_vocab), len(tgt_vocab)))
    averages = {d: ExponentialMovingAverage(model, d) for d in decays}

    def update_averages(report: StepReport) -> None:
        for average in averages.values():
            average.update(report.model)

    config = cpu_train_config(ema_decay=None, lr=args.lr, epochs=None,
                              max_minutes=args.minutes, seed=0)
    history = fit(model, train_batches, valid_batches, config, on_step=update_averages)
    print(f"{history.step[-1]} steps, {history.tokens_per_second:,.0f} tokens/s, "
          f"batches of {args.max_tokens} tokens, peak lr {args.lr:g}")

    sources, references = [s for s, _ in test], [t for _, t in test]
    print(f"{'weights':>14} | valid CE | BLEU greedy | BLEU beam 4 | lower-cased, beam 4")
    candidates = [("trained", None)] + [(f"EMA {d:g}", a) for d, a in averages.items()]
    for name, average in candidates:
        if average is not None:
            average.copy_to(model)
        loss = evaluate_loss(model, valid_batches)
        t0 = time.perf_counter()
        greedy = corpus_scores(translate(model, sources, src_vocab, tgt_vocab), references)
        beam = corpus_scores(translate(model, sources, src_vocab, tgt_vocab, beam_size=4),
                             references)
        print(f"{name:>14} | {loss:8.3f} | {greedy.bleu.score:11.2f} | {beam.bleu.score:11.2f}"
              f" | {beam.bleu_lc.score:19.2f}   ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
