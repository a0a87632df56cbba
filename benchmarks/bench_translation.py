"""Training speed on Multi30k: minitransformer.Transformer vs torch.nn.Transformer,
driven by the same training loop, timed side by side.

The chapter's CPU configuration: d_model 256, 8 heads, 3+3 layers, d_ff 512,
pre-LN, no dropout (``--dropout``), token-budget batches of 2,048 padded source + target
tokens, Adam(0.9, 0.98, 1e-9) with the warm-up schedule, label smoothing 0.1,
gradient clipping. Both models get the same embeddings (·√D), sinusoidal
positions and output projection; the nn.Transformer baseline is given every
mask it can use (key padding masks for source, target and memory, and a
causal mask flagged ``tgt_is_causal``). Each step is
:meth:`minitransformer.training.Trainer.step`, the step of ``fit``. The two
models alternate, a few steps each, over the same batches, so a change in the
machine's load affects both alike.

    MINITRANSFORMER_DATA=../shared/data python benchmarks/bench_translation.py
    python benchmarks/bench_translation.py --rounds 4 --steps 5   # quicker
    python benchmarks/bench_translation.py --amp bf16             # bf16 autocast
    python benchmarks/bench_translation.py --profile              # where the time goes
    python benchmarks/bench_translation.py --compare-amp          # ours: fp32 vs bf16
    python benchmarks/bench_translation.py --quality 10           # nn.Transformer's BLEU

Prints source + target tokens (non-pad) per second of each model and the ratio.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time

import machine
import torch
from torch import Tensor, nn

from minitransformer import SinusoidalPositionalEncoding, Transformer, TransformerConfig
from minitransformer.data import TokenBatcher, build_vocabs, encode_pairs, load_multi30k
from minitransformer.decoding import corpus_bleu, translate
from minitransformer.instruments.interop import load_torch_decoder_layer, load_torch_encoder_layer
from minitransformer.training import Trainer, evaluate_loss, fit
from minitransformer.training.presets import (
    CPU_DATA,
    CPU_MODEL,
    CPU_TOKENIZERS,
    cpu_model_config,
    cpu_train_config,
)


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
    with the command line's defaults (what ``python -m minitransformer train``
    does with our model), then translate test_2016_flickr greedily and with
    beam 4 through the package's decoder (weights copied) and print BLEU."""
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
        hyps = translate(ours, sources, src_vocab, tgt_vocab, beam_size=beam)
        bleu = corpus_bleu(hyps, refs)
        print(f"  test_2016_flickr, {'greedy' if beam == 1 else 'beam 4'}: BLEU {bleu.score:.2f}"
              f" ({bleu.signature})", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8, help="alternations of the two models")
    p.add_argument("--steps", type=int, default=8, help="training steps per model per round")
    p.add_argument("--max-tokens", type=int, default=CPU_DATA["max_tokens"])
    p.add_argument("--dropout", type=float, default=CPU_MODEL["dropout"],
                   help="dropout of both models (default: the chapter's)")
    p.add_argument("--amp", choices=["off", "bf16"], default="off")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--profile", action="store_true", help="profile 5 steps of each model")
    p.add_argument("--compare-amp", action="store_true",
                   help="instead: our model in fp32 against the same model under bf16 autocast, "
                   "then both models' validation loss")
    p.add_argument("--quality", type=float, default=None, metavar="MINUTES",
                   help="instead: train the nn.Transformer baseline alone for MINUTES with the "
                   "command line's defaults, then report its test BLEU")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    machine.report_before_and_after()

    pairs = load_multi30k("train")
    src_vocab, tgt_vocab = build_vocabs(pairs, min_freq=CPU_TOKENIZERS["min_freq"])
    examples = encode_pairs(pairs, src_vocab, tgt_vocab, max_len=CPU_DATA["max_len"])
    batches = list(TokenBatcher(examples, args.max_tokens, shuffle=True, seed=0))
    batches = batches[: args.steps + 2]  # the same (random) batches for both models
    config = cpu_model_config(len(src_vocab), len(tgt_vocab), dropout=args.dropout)
    if args.quality is not None:
        quality(args.quality, config, examples, src_vocab, tgt_vocab, args.max_tokens)
        return
    torch.manual_seed(0)
    if args.compare_amp:
        models = {"fp32": Transformer(config)}
        models["bf16"] = copy.deepcopy(models["fp32"])
        amps = {"fp32": "off", "bf16": "bf16"}
    else:
        models = {"minitransformer": Transformer(config),
                  "torch.nn.Transformer": TorchSeq2Seq(config)}
        amps = dict.fromkeys(models, args.amp)
    trainers = {k: Trainer(m, cpu_train_config(amp=amps[k], device="cpu"))
                for k, m in models.items()}

    def run(name: str, chunk: list) -> tuple[int, float]:
        trainer, tokens = trainers[name], 0
        trainer.model.train()
        start = time.perf_counter()
        for batch in chunk:
            tokens += trainer.step(batch).tokens
        return tokens, time.perf_counter() - start

    for name in models:  # warm-up: allocator, kernels
        run(name, batches[-2:])
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        for name in models:
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                run(name, batches[:5])
            print(f"\n=== {name}: top operators by self CPU time (5 steps)")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
        return
    rates: dict[str, list[float]] = {k: [] for k in models}
    for r in range(args.rounds):
        for name in list(models) if r % 2 == 0 else list(models)[::-1]:
            tokens, seconds = run(name, batches[: args.steps])
            rates[name].append(tokens / seconds)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items()),
              flush=True)
    n_params = {k: sum(q.numel() for q in m.parameters()) for k, m in models.items()}
    print(f"\ntorch {torch.__version__}, {args.threads} threads, amp {args.amp}, "
          f"dropout {args.dropout}, {args.rounds} rounds x {args.steps} steps of "
          f"{args.max_tokens}-token batches, "
          f"parameters {n_params}")
    med = {k: statistics.median(v) for k, v in rates.items()}
    for name, rate in med.items():
        print(f"{name:22s} {rate:8,.0f} source+target tokens/s (median of {args.rounds} rounds)")
    first, second = list(models)
    ratios = [a / b for a, b in zip(rates[first], rates[second])]
    print(f"ratio {first} / {second}: median of rounds "
          f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
    if args.compare_amp:
        valid = encode_pairs(load_multi30k("val"), src_vocab, tgt_vocab)
        valid_batches = list(TokenBatcher(valid, args.max_tokens, shuffle=False))
        for name, model in models.items():
            print(f"{name}: validation cross-entropy (fp32) after "
                  f"{trainers[name].history.step[-1]} steps: "
                  f"{evaluate_loss(model, valid_batches):.4f}")


if __name__ == "__main__":
    main()
