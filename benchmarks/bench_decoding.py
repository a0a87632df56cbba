"""Decoding speed on Multi30k test_2016_flickr: key/value cache vs recomputation, beam 4.

The chapter's CPU model (d_model 256, 8 heads, 3+3 layers, d_ff 512, pre-LN,
word vocabularies of Multi30k train with min_freq 2) translates the 1,000
German sentences of test_2016_flickr with :func:`minitransformer.decoding.translate`
(tokenise, batch by source length, decode, detokenise), ``max_len`` = the
batch's longest source + 50, stopping once every sentence of a batch has
produced EOS. Timed:

- greedy with the key/value cache (``use_cache=True``, the default);
- greedy recomputing the whole prefix at each step (``use_cache=False``);
- beam search, 4 beams, length penalty 0.6, with the cache.

A random model rarely says EOS, so every sentence would run to ``max_len``:
by default the model is first trained briefly (``--train-minutes``, with
:func:`minitransformer.training.fit`) so that output lengths are realistic;
``--train-minutes 0`` times the random model (the worst case). The trained
weights can be kept (``--model-cache``) to time again without retraining.

    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_decoding.py
    python benchmarks/bench_decoding.py --train-minutes 0           # random model
    python benchmarks/bench_decoding.py --model-cache /tmp/dec.pt   # reuse weights
    python benchmarks/bench_decoding.py --checkpoint runs/de-en     # a model trained by the CLI

Prints wall and CPU seconds, sentences/s and mean output length (words) for
each, checks that cached and uncached greedy give the same translations, and
the BLEU of each (meaningful only for a trained model). The machine and a
matmul speed measured before and after (``machine.py``) tell how busy it
was (CPU seconds are less sensitive to other processes than wall seconds,
not insensitive).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import machine
import torch

from minitransformer import Transformer
from minitransformer.cli import checkpoint_file
from minitransformer.data import (
    TokenBatcher,
    Vocab,
    build_vocabs,
    encode_pairs,
    load_multi30k,
    tokenize,
)
from minitransformer.decoding import corpus_bleu, translate
from minitransformer.training import fit
from minitransformer.training.checkpoint import build_model, load_checkpoint
from minitransformer.training.presets import (
    CPU_DATA,
    CPU_TOKENIZERS,
    cpu_model_config,
    cpu_train_config,
)


def chapter_model(src_vocab: int, tgt_vocab: int) -> Transformer:
    return Transformer(cpu_model_config(src_vocab, tgt_vocab))


def get_model(args, train) -> tuple[Transformer, Vocab, Vocab, str]:
    """The model and its vocabularies: from ``--checkpoint`` (a checkpoint of
    ``fit`` or ``python -m minitransformer train``), from ``--model-cache`` if
    it exists, else built (and trained for ``--train-minutes``)."""
    if args.checkpoint:
        path = checkpoint_file(Path(args.checkpoint))  # the command line's rule: best.pt first
        ckpt = load_checkpoint(path)
        vocabs = ckpt["vocabs"]
        steps = ckpt["train_state"]["step"]
        return (build_model(ckpt), Vocab.from_dict(vocabs["src"]),
                Vocab.from_dict(vocabs["tgt"]), f"{steps} steps ({path})")
    if args.model_cache and os.path.exists(args.model_cache):
        saved = torch.load(args.model_cache, weights_only=True)
        src_vocab, tgt_vocab = Vocab.from_dict(saved["src"]), Vocab.from_dict(saved["tgt"])
        model = chapter_model(len(src_vocab), len(tgt_vocab))
        model.load_state_dict(saved["model"])
        return model, src_vocab, tgt_vocab, f"{saved['minutes']:g} min"
    src_vocab, tgt_vocab = build_vocabs(train, min_freq=CPU_TOKENIZERS["min_freq"])
    torch.manual_seed(0)
    model = chapter_model(len(src_vocab), len(tgt_vocab))
    if args.train_minutes > 0:
        examples = encode_pairs(train, src_vocab, tgt_vocab)
        batches = TokenBatcher(examples, max_tokens=CPU_DATA["max_tokens"], shuffle=True, seed=0)
        cfg = cpu_train_config(epochs=None, max_minutes=args.train_minutes, device="cpu",
                               amp="off")
        fit(model, batches, config=cfg, progress=False)
    if args.model_cache:
        torch.save(
            {"model": model.state_dict(), "src": src_vocab.to_dict(), "tgt": tgt_vocab.to_dict(),
             "minutes": args.train_minutes},
            args.model_cache,
        )
    return model, src_vocab, tgt_vocab, f"{args.train_minutes:g} min"


def timed(label, fn, references):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    length = sum(len(tokenize(h)) for h in out) / len(out)
    bleu = corpus_bleu(out, references).score
    print(f"{label:36s} {wall:7.2f} s wall {cpu:7.2f} s CPU {len(out) / wall:7.1f} sent/s "
          f"{length:5.1f} words {bleu:6.2f} BLEU", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train-minutes", type=float, default=3.0,
                   help="train the model this long first (0 = random weights)")
    p.add_argument("--checkpoint", default=None,
                   help="decode with this trained model (a checkpoint file or a `train --out` "
                   "folder) instead of training one")
    p.add_argument("--model-cache", default=None,
                   help="load the model from this file if it exists, else save it there")
    p.add_argument("--batch-size", type=int, default=128, help="sentences decoded together")
    p.add_argument("--sentences", type=int, default=1000, help="first N test sentences")
    p.add_argument("--skip-uncached", action="store_true", help="do not time use_cache=False")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    train = load_multi30k("train")
    test = load_multi30k("test_2016_flickr")[: args.sentences]
    model, src_vocab, tgt_vocab, minutes = get_model(args, train)
    model.eval()
    sources = [s for s, _ in test]
    references = [t for _, t in test]
    print(f"vocabularies {len(src_vocab)} / {len(tgt_vocab)}; "
          f"model trained {minutes}; {len(sources)} sentences, "
          f"batches of {args.batch_size}", flush=True)

    def run(beam: int, cache: bool):
        return lambda: translate(model, sources, src_vocab, tgt_vocab, beam_size=beam,
                                 batch_size=args.batch_size, use_cache=cache)

    translate(model, sources[:16], src_vocab, tgt_vocab)  # warm-up
    machine.report_before_and_after()  # just before the timings
    cached = timed("greedy, key/value cache", run(1, True), references)
    if not args.skip_uncached:
        uncached = timed("greedy, recomputing the prefix", run(1, False), references)
        same = sum(a == b for a, b in zip(cached, uncached, strict=True))
        print(f"cached and uncached greedy agree on {same}/{len(cached)} sentences")
    timed("beam 4 (alpha 0.6), key/value cache", run(4, True), references)


if __name__ == "__main__":
    main()
