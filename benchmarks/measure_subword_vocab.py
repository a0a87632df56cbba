"""Words or subwords on Multi30k: unknown words, sequence lengths, output-layer FLOPs.

Counts, not timings (so it can run on a busy machine): for the word-level
vocabularies of the command line (words seen at least twice, lower-cased)
and for joint cased SentencePiece BPE models of several sizes, all learned
on the training split only, it reports

- the vocabulary sizes;
- the unknown-token rate on each split and side (tokens that became
  ``<unk>``; 0 by construction with byte fallback), the share of sentences
  holding one, and how many subword tokens are byte pieces (characters
  spelled in UTF-8 bytes because they have no piece);
- tokens per sentence on each side (what a subword vocabulary costs: longer
  sequences);
- the training FLOPs of the chapter's CPU model (d_model 256, 8 heads,
  3 + 3 layers, d_ff 512) over one epoch of the command line's batches
  (2,048 padded tokens), and the share of them in the output layer
  (``d_model × vocabulary`` per target token). Matrix products only:
  projections, attention scores, feed-forward, output layer, counted from
  the padded batch shapes; a backward pass costs twice the forward.
  The linear layers' count is checked against ``torch.utils.flop_counter``
  on one batch.

    MINITRANSFORMER_DATA=../shared/data python benchmarks/measure_subword_vocab.py

Writes ``minitransformer/results/subword_vocab.json`` (read by chapter 10
with :func:`minitransformer.results.load_result`) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import machine
import torch
from torch.utils.flop_counter import FlopCounterMode

from minitransformer.data import (
    UNK_ID,
    SubwordTokenizer,
    TokenBatcher,
    build_tokenizers,
    encode_pairs,
    load_multi30k,
)
from minitransformer.model import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "minitransformer" / "results" / "subword_vocab.json"
SPLITS = ("train", "val", "test_2016_flickr")

# The chapter's CPU model (the command line's defaults).
D_MODEL, HEADS, LAYERS, D_FF, MAX_TOKENS, MAX_LEN = 256, 8, 3, 512, 2048, 100


def model_config(src_size: int, tgt_size: int) -> TransformerConfig:
    return TransformerConfig(src_size, tgt_size, d_model=D_MODEL, num_heads=HEADS,
                             num_encoder_layers=LAYERS, num_decoder_layers=LAYERS, d_ff=D_FF,
                             dropout=0.0, norm_first=True, max_len=256)


def forward_flops(b: int, s: int, t: int, vocab: int) -> dict[str, int]:
    """Forward FLOPs (multiply-add = 2) of the CPU model on a batch of ``b``
    sentences padded to source length ``s`` and decoder length ``t``."""
    d, f, n = D_MODEL, D_FF, LAYERS
    linear_enc = n * (4 * 2 * b * s * d * d + 2 * 2 * b * s * d * f)  # Q K V O, FFN
    linear_dec = n * (
        4 * 2 * b * t * d * d  # self-attention Q K V O
        + 2 * 2 * b * t * d * d + 2 * 2 * b * s * d * d  # cross: Q O on targets, K V on sources
        + 2 * 2 * b * t * d * f  # FFN
    )
    scores = n * 2 * 2 * b * d * (s * s + t * t + t * s)  # QKᵀ and weights·V, 3 attentions
    output = 2 * b * t * d * vocab
    return {"linear": linear_enc + linear_dec, "attention": scores, "output": output}


def check_against_flop_counter(batch, src_size: int, tgt_size: int) -> None:
    """The analytic count of the linear layers and output layer equals
    PyTorch's FLOP counter on a real forward pass (attention scores are not
    counted there: the CPU's fused attention kernel has no FLOP formula)."""
    model = Transformer(model_config(src_size, tgt_size)).eval()
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(batch.src, batch.tgt_in)
    b, s = batch.src.shape
    ours = forward_flops(b, s, batch.tgt_in.shape[1], tgt_size)
    counted = counter.get_total_flops()
    if counted != ours["linear"] + ours["output"]:
        raise AssertionError(f"FLOP count: analytic {ours}, torch counted {counted}")


def measure(name: str, src_tok, tgt_tok, data: dict) -> dict:
    row: dict = {"tokenizer": name, "src_vocab": len(src_tok), "tgt_vocab": len(tgt_tok)}
    byte_ids = set()
    if isinstance(tgt_tok, SubwordTokenizer):
        byte_ids = {i for i in range(len(tgt_tok)) if tgt_tok.id_to_piece(i).startswith("<0x")}
    for split, pairs in data.items():
        for side, tok, texts in (("src", src_tok, [s for s, _ in pairs]),
                                 ("tgt", tgt_tok, [t for _, t in pairs])):
            ids = [tok.encode(x) for x in texts]
            tokens = sum(map(len, ids))
            unk = sum(i.count(UNK_ID) for i in ids)
            if split == "train":
                row[f"{side}_pieces_used"] = len({x for i in ids for x in i})
            row[f"{split}_{side}"] = {
                "tokens_per_sentence": round(tokens / len(ids), 3),
                "unk_rate": round(unk / tokens, 6),
                "sentences_with_unk": round(sum(UNK_ID in i for i in ids) / len(ids), 5),
                "byte_piece_rate": round(sum(x in byte_ids for i in ids for x in i) / tokens, 6),
            }
    examples = encode_pairs(data["train"], src_tok, tgt_tok, max_len=MAX_LEN)
    batches = list(TokenBatcher(examples, MAX_TOKENS, shuffle=False))
    check_against_flop_counter(batches[len(batches) // 2], len(src_tok), len(tgt_tok))
    total = {"linear": 0, "attention": 0, "output": 0}
    for batch in batches:
        b, s = batch.src.shape
        for k, v in forward_flops(b, s, batch.tgt_in.shape[1], len(tgt_tok)).items():
            total[k] += 3 * v  # forward + backward (twice the forward)
    flops = sum(total.values())
    row["epoch"] = {
        "pairs": len(examples), "batches": len(batches),
        "padded_tokens": sum(b.src.numel() + b.tgt_in.numel() for b in batches),
        "train_tflop": round(flops / 1e12, 2),
        "train_gflop_per_pair": round(flops / len(examples) / 1e9, 4),
        "output_layer_share": round(total["output"] / flops, 4),
        "attention_share": round(total["attention"] / flops, 4),
    }
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4000, 6000, 8000, 12000, 16000],
                   help="joint subword vocabulary sizes")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args()
    machine.report_before_and_after()  # counts do not depend on it; the timings printed do
    started = time.time()
    data = {split: load_multi30k(split) for split in SPLITS}
    rows = [measure("words (min_freq 2, lower-cased)", *build_tokenizers(data["train"]), data)]
    for size in args.sizes:
        t0 = time.perf_counter()
        tok, _ = build_tokenizers(data["train"], "subword", vocab_size=size)
        seconds = time.perf_counter() - t0
        row = measure(f"subword BPE {size / 1000:g}k (joint, cased)", tok, tok, data)
        row["train_tokenizer_seconds"] = round(seconds, 2)
        rows.append(row)
    print(f"{'tokenizer':34s} {'vocab src/tgt':>13s} {'unk% val/test (tgt)':>19s} "
          f"{'tok/sent de/en':>14s} {'GFLOP/pair':>10s} {'output share':>12s}")
    for r in rows:
        val, test = r["val_tgt"]["unk_rate"], r["test_2016_flickr_tgt"]["unk_rate"]
        de, en = r["train_src"]["tokens_per_sentence"], r["train_tgt"]["tokens_per_sentence"]
        epoch = r["epoch"]
        print(f"{r['tokenizer']:34s} {r['src_vocab']:>6,}/{r['tgt_vocab']:<6,} "
              f"{100 * val:>8.2f}/{100 * test:<9.2f} {de:>6.1f}/{en:<6.1f} "
              f"{epoch['train_gflop_per_pair']:>10.3f} {100 * epoch['output_layer_share']:>11.1f}%")
    record = {
        "what": "Multi30k de->en: word-level vs joint SentencePiece BPE vocabularies learned on "
                "the training split; unknown-token rates, tokens per sentence, training FLOPs "
                "of the CPU model (d_model 256, 8 heads, 3+3 layers, d_ff 512) per epoch of "
                "2,048-token batches and the output layer's share (matrix products only)",
        "script": "benchmarks/measure_subword_vocab.py",
        **machine.run_stamp(started, ["--sizes", *map(str, args.sizes)]),
        "torch": torch.__version__,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
