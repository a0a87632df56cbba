"""Training speed on Multi30k: minitransformer.Transformer vs torch.nn.Transformer,
driven by the same training loop, timed side by side.

The command line's configuration (``minitransformer.training.presets``): d_model
256, 8 heads, 3+3 layers, d_ff 512, pre-LN, no dropout, the preset's
tokenizer (a joint subword vocabulary) and tying, token-budget batches of
2,048 padded source + target tokens, Adam(0.9, 0.98, 1e-9) with the warm-up
schedule, label smoothing 0.1, gradient clipping. Both models get the same
tokenisation, embeddings (·√D), sinusoidal positions and output projection;
the nn.Transformer baseline is given every mask it can use (key padding
masks for source, target and memory, and a causal mask flagged
``tgt_is_causal``). Each step is :meth:`minitransformer.training.Trainer.step`,
the step of ``fit``. The variants alternate, a few steps each, over the same
batches, so a change in the machine's load affects all alike.

Variants (``--variants``, the first is compared with the others):

- ``ours``: the package's model with the preset's precision (``amp="native"``:
  bf16 autocast on a CPU with AVX512_BF16 or AMX, float32 elsewhere);
- ``ours-fp32``: the same model in float32;
- ``torch``: ``nn.Transformer`` in float32 (its fastest on a CPU: under bf16
  autocast PyTorch's CPU attention backward is slow, see ``torch-bf16``);
- ``torch-bf16``: ``nn.Transformer`` under bf16 autocast.

    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_translation.py --threads 2
    python benchmarks/bench_translation.py --variants ours ours-fp32 torch torch-bf16
    python benchmarks/bench_translation.py --rounds 4 --steps 5   # quicker
    python benchmarks/bench_translation.py --profile              # where the time goes (JSON too)
    python benchmarks/bench_translation.py --quality-steps 300    # bf16 vs fp32: same loss?
    python benchmarks/bench_translation.py --quality 10           # nn.Transformer's BLEU

Prints the machine (CPU, flags, matmul GFLOP/s) before and after, source +
target tokens (non-pad) per second of each variant and the ratios, and
writes them to a JSON (``--out``). Target (issue 14): ``ours`` at least
1.2x ``torch``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import time
from pathlib import Path

import machine
import torch
from torch import Tensor, nn

from minitransformer import SinusoidalPositionalEncoding, Transformer, TransformerConfig
from minitransformer.data import (
    Batch,
    TokenBatcher,
    build_tokenizers,
    encode_pairs,
    load_multi30k,
)
from minitransformer.decoding import translate
from minitransformer.instruments.interop import load_torch_decoder_layer, load_torch_encoder_layer
from minitransformer.training import Trainer, evaluate_loss, fit, precision
from minitransformer.training.presets import (
    CPU_DATA,
    CPU_TOKENIZERS,
    CPU_TRAINING,
    cpu_model_config,
    cpu_train_config,
)

ROOT = Path(__file__).resolve().parent


class TorchSeq2Seq(nn.Module):
    """``nn.Transformer`` with our embeddings, positions and generator, and all its masks
    (shared embeddings and a tied output layer as the config says)."""

    def __init__(self, c: TransformerConfig):
        super().__init__()
        self.config = c
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = (self.src_embed if c.share_embeddings else
                          nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id))
        self.src_pos = SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
        self.tgt_pos = SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
        self.transformer = nn.Transformer(
            c.d_model, c.num_heads, c.num_encoder_layers, c.num_decoder_layers, c.d_ff,
            c.dropout, batch_first=True, norm_first=c.norm_first,
        )
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if c.tie_output:  # as ours: the output projection is the target embedding matrix
            self.generator.weight = self.tgt_embed.weight

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        scale = math.sqrt(self.config.d_model)
        src_pad = src == self.config.pad_id  # (B, S) True = blocked (PyTorch's convention)
        tgt_pad = tgt == self.config.pad_id  # (B, T)
        t = tgt.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt.device).triu(1)  # True = future
        h = self.transformer(
            self.src_pos(self.src_embed(src) * scale), self.tgt_pos(self.tgt_embed(tgt) * scale),
            tgt_mask=causal, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad, tgt_is_causal=True,
        )
        return self.generator(h)  # (B, T, V)


@torch.no_grad()
def to_minitransformer(theirs: TorchSeq2Seq) -> Transformer:
    """Our ``Transformer`` holding the weights of ``theirs`` (the same function;
    the layers are copied with :mod:`minitransformer.instruments.interop`), in eval mode,
    so that a trained ``nn.Transformer`` can use the package's cached decoding."""
    c = theirs.config
    if not c.norm_first:
        raise ValueError("to_minitransformer: only pre-LN (nn.Transformer adds final norms)")
    ours = Transformer(c)
    ours.src_embed.load_state_dict(theirs.src_embed.state_dict())
    ours.tgt_embed.load_state_dict(theirs.tgt_embed.state_dict())
    ours.generator.load_state_dict(theirs.generator.state_dict())
    for mine, other in zip(ours.encoder.layers, theirs.transformer.encoder.layers, strict=True):
        load_torch_encoder_layer(mine, other)
    for mine, other in zip(ours.decoder.layers, theirs.transformer.decoder.layers, strict=True):
        load_torch_decoder_layer(mine, other)
    ours.encoder.norm.load_state_dict(theirs.transformer.encoder.norm.state_dict())
    ours.decoder.norm.load_state_dict(theirs.transformer.decoder.norm.state_dict())
    return ours.eval()


def quality(minutes: float, config: TransformerConfig, examples, src_vocab, tgt_vocab,
            max_tokens: int) -> None:
    """Train the ``nn.Transformer`` baseline alone with ``fit`` for ``minutes``,
    with the command line's defaults but in float32, then translate
    test_2016_flickr greedily and with beam 4 through the package's decoder
    (weights copied) and print its scores."""
    from minitransformer.metrics import corpus_scores

    valid_pairs = load_multi30k("val")
    valid = list(TokenBatcher(encode_pairs(valid_pairs, src_vocab, tgt_vocab), max_tokens,
                              shuffle=False))
    torch.manual_seed(0)
    theirs = TorchSeq2Seq(config)
    cfg = cpu_train_config(epochs=None, max_minutes=minutes, seed=0, device="cpu", amp="off",
                           pad_id=config.pad_id)
    batches = TokenBatcher(examples, max_tokens, shuffle=True, seed=0)
    history = fit(theirs, batches, valid, cfg)
    ours = to_minitransformer(theirs.eval())
    src, tgt_in = valid[0].src, valid[0].tgt_in
    with torch.no_grad():  # the copy computes the same function
        torch.testing.assert_close(ours(src, tgt_in), theirs(src, tgt_in), rtol=1e-4, atol=1e-4)
    test = load_multi30k("test_2016_flickr")
    sources, refs = [s for s, _ in test], [t for _, t in test]
    steps = history.step[-1]
    print(f"torch.nn.Transformer, {minutes:g} min with fit: {steps} steps "
          f"({steps / len(batches):.2f} epochs), {history.tokens_per_second:,.0f} tokens/s, "
          f"validation cross-entropy {history.valid_loss[-1]:.3f}")
    for beam in (1, 4):
        scores = corpus_scores(translate(ours, sources, src_vocab, tgt_vocab, beam_size=beam),
                               refs)
        print(f"  test_2016_flickr, {'greedy' if beam == 1 else 'beam 4'}: {scores}", flush=True)


#: variant → (model, amp of the training loop)
VARIANTS = {
    "ours": ("minitransformer", CPU_TRAINING.get("amp", "auto")),
    "ours-fp32": ("minitransformer", "off"),
    # the same in float32 with every piece of the joint model on the target side (the
    # output layer over 8,000 pieces, not the training targets' 4,144): a different model
    "ours-fp32-all-pieces": ("minitransformer", "off"),
    "ours-native": ("minitransformer", "native"),  # bf16 where the CPU computes it natively
    "torch": ("torch.nn.Transformer", "off"),
    "torch-bf16": ("torch.nn.Transformer", "bf16"),
}


#: Variants whose target side has every piece of the joint model (its batches' target
#: ids are the model's ids, :func:`every_piece`).
ALL_PIECES = {"ours-fp32-all-pieces"}


def build(variant: str, config: TransformerConfig, seed: int = 0,
          pieces: int | None = None) -> nn.Module:
    """The variant's model (``pieces``: the joint model's size, for :data:`ALL_PIECES`)."""
    torch.manual_seed(seed)
    if variant in ALL_PIECES:
        config = dataclasses.replace(config, tgt_vocab_size=pieces)
    kind = VARIANTS[variant][0]
    return Transformer(config) if kind == "minitransformer" else TorchSeq2Seq(config)


def every_piece(batch: Batch, tgt_tok) -> Batch:
    """``batch`` with its target ids as the joint model's ids (the same pieces)."""
    model_id = torch.tensor(tgt_tok.model_ids)
    return dataclasses.replace(batch, tgt_in=model_id[batch.tgt_in],
                               tgt_out=model_id[batch.tgt_out])


def same_steps_quality(steps: int, config, examples, valid_batches, max_tokens: int) -> dict:
    """Our model trained for ``steps`` steps from the same initial weights on
    the same batches, in float32 and in the preset's precision: the
    validation cross-entropy of each (computed in float32)."""
    out = {}
    for variant in ("ours-fp32", "ours"):
        model = build(variant, config)
        cfg = cpu_train_config(epochs=None, max_steps=steps, seed=0, device="cpu",
                               amp=VARIANTS[variant][1], ema_decay=None)
        batches = TokenBatcher(examples, max_tokens, shuffle=True, seed=0)
        t0 = time.perf_counter()
        history = fit(model, batches, None, cfg, progress=False)
        loss = evaluate_loss(model, valid_batches, amp="off")
        out[variant] = {"valid_loss": round(loss, 4), "train_loss_last_10": round(
            statistics.mean(history.train_loss[-10:]), 4),
            "seconds": round(time.perf_counter() - t0, 1)}
        print(f"{variant:10s} ({precision(torch.device('cpu'), cfg.amp)[1]}): {steps} steps, "
              f"validation "
              f"cross-entropy {loss:.4f}, {out[variant]['seconds']:.0f} s", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["ours", "torch"],
                   help="what to time; the first is compared with each of the others")
    p.add_argument("--rounds", type=int, default=8, help="alternations of the variants")
    p.add_argument("--steps", type=int, default=8, help="training steps per variant per round")
    p.add_argument("--max-tokens", type=int, default=CPU_DATA["max_tokens"])
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--profile", action="store_true", help="profile 5 steps of each variant")
    p.add_argument("--count-flops", action="store_true",
                   help="instead of timing: count each variant's matrix-product FLOPs per "
                   "token of a training step (a timed run counts them after its rounds)")
    p.add_argument("--quality-steps", type=int, default=None, metavar="N",
                   help="instead: train ours for N steps in float32 and in the preset's "
                   "precision (same start, same batches) and compare validation losses")
    p.add_argument("--quality", type=float, default=None, metavar="MINUTES",
                   help="instead: train the nn.Transformer baseline alone for MINUTES with the "
                   "command line's defaults, then report its test scores")
    p.add_argument("--out", type=Path, default=None,
                   help="the JSON record (default: results/translation_speed.json, with "
                   "--profile results/translation_profile.json)")
    args = p.parse_args()
    if args.out is None:
        name = "translation_profile.json" if args.profile else "translation_speed.json"
        args.out = ROOT / "results" / name
    torch.set_num_threads(args.threads)
    started = time.time()
    before = machine.print_machine("before")

    pairs = load_multi30k("train")
    src_tok, tgt_tok = build_tokenizers(pairs, **CPU_TOKENIZERS)
    examples = encode_pairs(pairs, src_tok, tgt_tok, max_len=CPU_DATA["max_len"])
    config = cpu_model_config(len(src_tok), len(tgt_tok))
    print(f"tokenizer {CPU_TOKENIZERS}, vocabularies {len(src_tok):,} / {len(tgt_tok):,}, "
          f"shared embeddings {config.share_embeddings}, tied output {config.tie_output}")
    if args.quality is not None:
        quality(args.quality, config, examples, src_tok, tgt_tok, args.max_tokens)
        return
    record = {"script": "benchmarks/bench_translation.py",
              **machine.run_stamp(started),
              "machine_before": before, "tokenizer": CPU_TOKENIZERS,
              "model_config": config.to_dict()}
    if args.quality_steps is not None:
        valid = encode_pairs(load_multi30k("val"), src_tok, tgt_tok)
        valid_batches = list(TokenBatcher(valid, args.max_tokens, shuffle=False))
        record["same_steps_quality"] = same_steps_quality(
            args.quality_steps, config, examples, valid_batches, args.max_tokens)
        _write(args.out, record, machine.print_machine("after"))
        return
    batches = list(TokenBatcher(examples, args.max_tokens, shuffle=True, seed=0))
    batches = batches[: args.steps + 2]  # the same (random) batches for every variant
    if ALL_PIECES & set(args.variants) and tgt_tok.model_ids is None:
        p.error(f"{', '.join(sorted(ALL_PIECES))} needs the preset's target side to be "
                "restricted (target_pieces='seen')")
    trainers = {v: Trainer(build(v, config, pieces=len(src_tok)),
                           cpu_train_config(amp=VARIANTS[v][1], device="cpu"))
                for v in args.variants}
    for v, t in trainers.items():
        print(f"{v:10s} {VARIANTS[v][0]}, {t.precision}")
    # the same batches with the target ids of every piece, made before any timing
    joint_ids = {id(b): every_piece(b, tgt_tok) for b in batches} if ALL_PIECES & set(
        trainers) else {}

    def batches_for(variant: str, chunk: list) -> list:
        return [joint_ids[id(b)] for b in chunk] if variant in ALL_PIECES else chunk

    def run(variant: str, chunk: list) -> tuple[int, float]:
        trainer, tokens = trainers[variant], 0
        chunk = batches_for(variant, chunk)
        trainer.model.train()
        start = time.perf_counter()
        for batch in chunk:
            tokens += trainer.step(batch).tokens
        return tokens, time.perf_counter() - start

    for v in trainers:  # warm-up: allocator, kernels
        run(v, batches[-2:])
    if args.profile:
        record["profile"] = {v: profile_steps(run, v, batches[:5]) for v in trainers}
        _write(args.out, record, machine.print_machine("after"))
        return
    if args.count_flops:
        flops = {v: matmul_flops_per_token(t, batches_for(v, batches[: args.steps]))
                 for v, t in trainers.items()}
        for v, f in flops.items():
            print(f"{v:10s} {f / 1e6:8.2f} MFLOP of matrix products per token of a training step")
        record["matmul_flops_per_token"] = {v: round(f) for v, f in flops.items()}
        _write(args.out, record, machine.print_machine("after"))
        return
    rates: dict[str, list[float]] = {v: [] for v in trainers}
    names = list(trainers)
    for r in range(args.rounds):
        for v in names if r % 2 == 0 else names[::-1]:
            tokens, seconds = run(v, batches[: args.steps])
            rates[v].append(tokens / seconds)
        print(f"round {r + 1}: " + ", ".join(f"{k} {x[-1]:,.0f}" for k, x in rates.items()),
              flush=True)
        # the rounds so far, so that a run cut short (a time limit) still leaves its numbers
        _write(args.out, {**record, "rounds_done": r + 1, "tokens_per_second": {
            v: [round(x, 1) for x in rs] for v, rs in rates.items()}}, None, quiet=True)
    print(f"\ntorch {torch.__version__}, {args.threads} threads, {args.rounds} rounds x "
          f"{args.steps} steps of {args.max_tokens}-token batches")
    medians = {v: statistics.median(x) for v, x in rates.items()}
    for v, rate in medians.items():
        print(f"{v:10s} {rate:8,.0f} source+target tokens/s (median of {args.rounds} rounds)")
    first = names[0]
    ratios = {}
    for other in names[1:]:
        per_round = [a / b for a, b in zip(rates[first], rates[other], strict=True)]
        ratios[other] = {"median": round(statistics.median(per_round), 3),
                         "min": round(min(per_round), 3), "max": round(max(per_round), 3)}
        print(f"ratio {first} / {other}: median of rounds {ratios[other]['median']:.3f} "
              f"(range {ratios[other]['min']:.3f}-{ratios[other]['max']:.3f})")
    flops = {v: matmul_flops_per_token(t, batches_for(v, batches[: args.steps]))
             for v, t in trainers.items()}
    after = machine.print_machine("after")
    peak = statistics.mean([m["matmul_1024_gflops"]["wall"] for m in (before, after)])
    share = {v: medians[v] * flops[v] / 1e9 / peak for v in names}
    for v in names:
        print(f"{v:10s} {medians[v] * flops[v] / 1e9:6.1f} GFLOP/s of matrix products, "
              f"{share[v]:.0%} of the 1024² float32 matmul's {peak:.0f} (before and after)")
    record.update({
        "matmul_flops_per_token": {v: round(f) for v, f in flops.items()},
        "matmul_peak_gflops": round(peak, 1),
        "fraction_of_matmul_peak": {v: round(x, 3) for v, x in share.items()},
        "threads": args.threads, "rounds": args.rounds, "rounds_done": args.rounds,
        "steps_per_round": args.steps,
        "precision": {v: t.precision for v, t in trainers.items()},
        "tokens_per_second": {v: [round(x, 1) for x in r] for v, r in rates.items()},
        "median_tokens_per_second": {v: round(x, 1) for v, x in medians.items()},
        "ratios_to_first": ratios,
    })
    _write(args.out, record, after)


def matmul_flops_per_token(trainer: Trainer, chunk: list) -> float:
    """Matrix-product FLOPs of ``trainer``'s training steps over ``chunk``
    (forward and backward: what :class:`torch.utils.flop_counter.FlopCounterMode`
    counts, mm, bmm, addmm and attention), per source + target (non-pad)
    token, the unit of the tokens/s above. The steps train the model on."""
    from torch.utils.flop_counter import FlopCounterMode

    trainer.model.train()
    tokens = 0
    with FlopCounterMode(display=False) as counter:
        for batch in chunk:
            tokens += trainer.step(batch).tokens
    return counter.get_total_flops() / tokens


def profile_steps(run, variant: str, chunk: list, rows: int = 18) -> dict:
    """Profile ``run(variant, chunk)`` (training steps), print the operators
    with the most self CPU time, and return them for the JSON record: per
    operator the milliseconds per step and the calls per step, and the step's
    total self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run(variant, chunk)
    events = prof.key_averages()
    print(f"\n=== {variant}: top operators by self CPU time ({len(chunk)} steps)")
    print(events.table(sort_by="self_cpu_time_total", row_limit=rows))
    n = len(chunk)
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:rows]
    return {"steps": n,
            "self_cpu_ms_per_step": round(sum(e.self_cpu_time_total for e in events) / 1e3 / n, 2),
            "top_operators": [{"name": e.key, "self_cpu_ms_per_step":
                               round(e.self_cpu_time_total / 1e3 / n, 2),
                               "calls_per_step": e.count / n} for e in top]}


def _write(path: Path, record: dict, after: dict | None, quiet: bool = False) -> None:
    record["machine_after"] = after
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if not quiet:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
