"""Decoding speed on Multi30k test_2016_flickr: key/value cache vs recomputation, beam 4.

The command line's model (``minitransformer.training.presets``: d_model 256,
8 heads, 3+3 layers, d_ff 512, pre-LN, the preset's tokenizer, a joint
subword vocabulary, and tying) translates the 1,000
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
the cased BLEU of each (meaningful only for a trained model), and writes
them to a JSON (``--out``). The machine and a matmul speed measured before
and after (``machine.py``) tell how busy it was (CPU seconds are less
sensitive to other processes than wall seconds, not insensitive). Target
(issue 14): greedy with the cache in at most 3 s on a machine doing about
200 GFLOP/s (scale by 200 / measured on a slower one).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import machine
import torch

from minitransformer import Transformer
from minitransformer.cli import checkpoint_file
from minitransformer.data import (
    TokenBatcher,
    build_tokenizers,
    encode_pairs,
    load_multi30k,
    tokenizer_from_dict,
)
from minitransformer.decoding import translate
from minitransformer.metrics import corpus_scores
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


def get_model(args, train) -> tuple[Transformer, object, object, str]:
    """The model and its vocabularies: from ``--checkpoint`` (a checkpoint of
    ``fit`` or ``python -m minitransformer train``), from ``--model-cache`` if
    it exists, else built (and trained for ``--train-minutes``)."""
    if args.checkpoint:
        path = checkpoint_file(Path(args.checkpoint))  # the command line's rule: best.pt first
        ckpt = load_checkpoint(path)
        vocabs = ckpt["vocabs"]
        steps = ckpt["train_state"]["step"]
        return (build_model(ckpt), tokenizer_from_dict(vocabs["src"]),
                tokenizer_from_dict(vocabs["tgt"]), f"{steps} steps ({path})")
    if args.model_cache and os.path.exists(args.model_cache):
        saved = torch.load(args.model_cache, weights_only=True)
        src_vocab, tgt_vocab = (tokenizer_from_dict(saved[k]) for k in ("src", "tgt"))
        model = chapter_model(len(src_vocab), len(tgt_vocab))
        model.load_state_dict(saved["model"])
        return model, src_vocab, tgt_vocab, f"{saved['minutes']:g} min"
    src_vocab, tgt_vocab = build_tokenizers(train, **CPU_TOKENIZERS)
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


def timed(label, fn, references, record: dict):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    length = sum(len(h.split()) for h in out) / len(out)
    scores = corpus_scores(out, references)
    print(f"{label:36s} {wall:7.2f} s wall {cpu:7.2f} s CPU {len(out) / wall:7.1f} sent/s "
          f"{length:5.1f} words {scores.bleu.score:6.2f} BLEU (cased)", flush=True)
    record[label] = {"wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
                     "words_per_sentence": round(length, 2), "bleu": round(scores.bleu.score, 2),
                     "bleu_lc": round(scores.bleu_lc.score, 2)}
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
    p.add_argument("--out", type=Path,
                   default=Path(__file__).resolve().parent / "results" / "decoding.json")
    args = p.parse_args()
    started = time.time()
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
    before = machine.print_machine("before")  # just before the timings
    timings: dict = {}
    cached = timed("greedy, key/value cache", run(1, True), references, timings)
    if not args.skip_uncached:
        uncached = timed("greedy, recomputing the prefix", run(1, False), references, timings)
        same = sum(a == b for a, b in zip(cached, uncached, strict=True))
        print(f"cached and uncached greedy agree on {same}/{len(cached)} sentences")
        timings["cached_equals_uncached"] = same
    timed("beam 4 (alpha 0.6), key/value cache", run(4, True), references, timings)
    record = {
        "script": "benchmarks/bench_decoding.py",
        **machine.run_stamp(started),
        "model": minutes, "sentences": len(sources), "batch_size": args.batch_size,
        "vocabularies": [len(src_vocab), len(tgt_vocab)], "threads": torch.get_num_threads(),
        "machine_before": before, "timings": timings,
        "machine_after": machine.print_machine("after"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
