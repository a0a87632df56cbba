"""benchmarks/bench_lm_translation.py: the LM matched to the encoder-decoder's
parameter count (against a closed form), both models' losses counting the
same English tokens, the throughput unit, and a smoke run on the fixture
corpus writing what chapter 11 reads."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from minitransformer import LanguageModel, Transformer, count_parameters
from minitransformer.data import LMBatcher, TokenBatcher
from minitransformer.training.presets import CPU_MODEL, cpu_model_config

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"


@pytest.fixture(scope="module")
def bench(benchmarks_path):
    import bench_lm_translation

    return bench_lm_translation


def lm_closed_form(vocab: int, layers: int, tied: bool) -> int:
    """Parameters of a pre-LN LanguageModel of the preset's width, by hand."""
    d, f = CPU_MODEL["d_model"], CPU_MODEL["d_ff"]
    attention = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    layer = attention + ffn + 2 * 2 * d  # two LayerNorms
    return vocab * d + layers * layer + 2 * d + vocab + (0 if tied else vocab * d)


def encdec_closed_form(vocab: int) -> int:
    """Parameters of the preset's untied 3 + 3 pre-LN Transformer, by hand."""
    d, f = CPU_MODEL["d_model"], CPU_MODEL["d_ff"]
    attention, ffn = 4 * (d * d + d), d * f + f + f * d + d
    encoder = 3 * (attention + ffn + 2 * 2 * d) + 2 * d
    decoder = 3 * (2 * attention + ffn + 3 * 2 * d) + 2 * d
    return 2 * vocab * d + encoder + decoder + vocab * d + vocab


@pytest.mark.parametrize("vocab", [8000, 400])
def test_the_lm_is_the_candidate_closest_to_the_encoder_decoders_count(bench, vocab):
    target = bench.parameters_of(bench.encdec_config(vocab))
    assert target == encdec_closed_form(vocab)
    assert not CPU_MODEL["tie_output"] and not CPU_MODEL["share_embeddings"]
    config, _ = bench.choose_lm_config(vocab, target)
    best = min(abs(lm_closed_form(vocab, n, t) - target)
               for n in range(1, 25) for t in (False, True))
    assert abs(lm_closed_form(vocab, config.num_layers, config.tie_output) - target) == best
    with torch.device("meta"):
        built = LanguageModel(config)
    assert count_parameters(built) == lm_closed_form(vocab, config.num_layers,
                                                     config.tie_output)
    c = cpu_model_config(vocab, vocab)
    assert (config.d_model, config.num_heads, config.d_ff, config.norm_first, config.dropout) \
        == (c.d_model, c.num_heads, c.d_ff, c.norm_first, c.dropout)
    # fixed choices are kept
    forced, _ = bench.choose_lm_config(vocab, target, num_layers=11, tie_output=False)
    assert (forced.num_layers, forced.tie_output) == (11, False)


def _pairs(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)
    return [([rng.randrange(4, 50) for _ in range(rng.randint(1, 12))],
             [rng.randrange(4, 50) for _ in range(rng.randint(1, 12))]) for _ in range(n)]


def test_both_losses_count_the_same_english_tokens(bench):
    pairs = _pairs(60)
    lm = LMBatcher(pairs, 128, shuffle=False)
    seq2seq = TokenBatcher(pairs, 128, shuffle=False)
    english = sum(len(t) + 1 for _, t in pairs)  # the English pieces and EOS
    assert sum(b.num_target_tokens for b in lm) == english
    assert sum(int((b.tgt_out != 0).sum()) for b in seq2seq) == english


def test_the_lm_throughput_is_counted_in_the_encoder_decoders_unit(bench):
    pairs = _pairs(60, seed=1)
    batches = bench.CountingLMBatcher(pairs, 128, shuffle=True, seed=3)
    list(batches)
    assert sum(batches.input_tokens) == sum(len(s) + len(t) + 1 for s, t in pairs)
    # TokenBatcher batches: non-pad source + target-output tokens, what fit counts
    seq2seq = TokenBatcher(pairs, 128, shuffle=True, seed=3)
    assert sum(int((b.src != 0).sum() + (b.tgt_out != 0).sum()) for b in seq2seq) \
        == sum(batches.input_tokens)


def test_the_lm_has_room_for_german_bos_and_the_translation(bench):
    config = bench.lm_config(100, 2, False)
    longest_training_row = 2 * 100 + 1  # German + BOS + English, CPU_DATA's max_len a side
    assert config.max_len >= longest_training_row
    assert config.max_len >= 2 * 100 + bench.DECODING["extra_len"] + 1


@pytest.mark.slow
def test_smoke_run_writes_every_run_and_the_summary(bench, tmp_path):
    out = tmp_path / "lm_translation.json"
    record = bench.main(["--smoke", "--data-root", str(FIXTURES), "--vocab-size", "400",
                         "--n-test", "3", "--quiet", "--out", str(out)])
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(record))
    assert record["mode"] == "sequential" and record["smoke"]
    runs = record["runs"]
    assert [(r["model"], r["seed"]) for r in runs] == [("encdec", 0), ("lm", 0)]
    for r in runs:
        assert r["parameters"] == record["models"][r["model"]]["parameters"]
        assert r["sentences"] == 3 and 0 <= r["bleu"] <= 100 and r["minutes"] > 0
        assert "case:mixed" in r["signatures"]["BLEU"]  # cased, as evaluate reports
    with torch.device("meta"):
        encdec = Transformer(cpu_model_config(400, 400))
    assert record["models"]["encdec"]["parameters"] == count_parameters(encdec)
    for name, summary in record["summary"].items():
        bleus = [r["bleu"] for r in runs if r["model"] == name]
        assert summary["bleu"]["min"] == min(bleus) and summary["bleu"]["n"] == len(bleus)
