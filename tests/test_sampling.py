"""Sampling: greedy, temperature, top-k and top-p against the distributions
they promise (frequencies over many draws of a fixed generator, within
binomial error), argument errors, and generate() with and without the cache.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

import minitransformer as mt

V, D, MAX_LEN = 19, 32, 40
PAD, BOS, EOS = 0, 1, 2

pytestmark = pytest.mark.usefixtures("one_thread")

#: A known next-token distribution, in no particular order.
PROBS = torch.tensor([0.04, 0.40, 0.10, 0.25, 0.06, 0.15], dtype=torch.float64)
#: A second one, for a second row (per-row filtering); no two ids tie.
PROBS_B = torch.tensor([0.30, 0.04, 0.06, 0.20, 0.35, 0.05], dtype=torch.float64)


def draws(probs_rows: list[Tensor], n: int = 20_000, seed: int = 0, **options) -> list[Tensor]:
    """Counts per id of ``n`` draws from each row's log-probabilities (rows interleaved)."""
    logits = torch.stack([p.log() for p in probs_rows]).float()  # (R, V)
    rows = logits.repeat(n, 1)  # (n R, V): row r of every block is distribution r
    g = torch.Generator().manual_seed(seed)
    ids = mt.sample_next(rows, generator=g, **options).reshape(n, len(probs_rows))
    return [torch.bincount(ids[:, r], minlength=logits.shape[1]) for r in range(len(probs_rows))]


def assert_frequencies(counts: Tensor, expected: Tensor, n: int = 20_000) -> None:
    """Within 5 binomial standard errors of ``n · p`` for every id; never an id of p = 0."""
    for i, (c, p) in enumerate(zip(counts.tolist(), expected.tolist(), strict=True)):
        if p == 0:
            assert c == 0, f"id {i} (outside the kept set) was drawn {c} times"
        else:
            se = math.sqrt(n * p * (1 - p))
            assert abs(c - n * p) <= 5 * se + 1, f"id {i}: {c} draws, expected {n * p:.0f}"


def nucleus(probs: Tensor, top_p: float) -> Tensor:
    """The definition: the smallest set of most probable ids with mass >= top_p, renormalised."""
    order = sorted(range(len(probs)), key=lambda i: -float(probs[i]))
    kept, mass = [], 0.0
    for i in order:
        kept.append(i)
        mass += float(probs[i])
        if mass >= top_p:
            break
    out = torch.zeros_like(probs)
    out[kept] = probs[kept] / probs[kept].sum()
    return out


def top_k_of(probs: Tensor, k: int) -> Tensor:
    out = torch.zeros_like(probs)
    kept = probs.topk(k).indices
    out[kept] = probs[kept] / probs[kept].sum()
    return out


# --- greedy --------------------------------------------------------------------------------------


@pytest.mark.parametrize("options", [dict(temperature=0), dict(top_k=1),
                                     dict(temperature=0, top_p=0.3), dict(top_k=1, top_p=0.9)])
def test_greedy_settings_equal_argmax(options):
    logits = torch.randn(64, V, generator=torch.Generator().manual_seed(1))
    expected = torch.tensor([max(range(V), key=row.__getitem__) for row in logits.tolist()])
    assert torch.equal(mt.sample_next(logits, **options), expected)


# --- frequencies ---------------------------------------------------------------------------------


@pytest.mark.parametrize("top_p", [0.3, 0.5, 0.75, 0.95])
def test_top_p_frequencies_match_the_renormalised_nucleus(top_p):
    counts_a, counts_b = draws([PROBS, PROBS_B], top_p=top_p)
    assert_frequencies(counts_a, nucleus(PROBS, top_p))
    assert_frequencies(counts_b, nucleus(PROBS_B, top_p))


def test_the_nucleus_of_the_known_distribution():
    """What the definition gives here, worked out by hand: at 0.75 the ids of 0.40,
    0.25 and 0.15 (0.80 >= 0.75, while 0.65 is not enough)."""
    expected = torch.tensor([0, 0.40, 0, 0.25, 0, 0.15], dtype=torch.float64) / 0.80
    torch.testing.assert_close(nucleus(PROBS, 0.75), expected)
    kept = mt.filter_logits(PROBS.log()[None].float(), top_p=0.75)[0]
    assert torch.isfinite(kept).tolist() == [False, True, False, True, False, True]


@pytest.mark.parametrize("k", [2, 4])
def test_top_k_frequencies_match_the_renormalised_top_k(k):
    counts_a, counts_b = draws([PROBS, PROBS_B[[0, 1, 3, 4, 2, 5]]], top_k=k)
    assert_frequencies(counts_a, top_k_of(PROBS, k))
    assert_frequencies(counts_b, top_k_of(PROBS_B[[0, 1, 3, 4, 2, 5]], k))


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_frequencies_match_softmax_of_logits_over_t(temperature):
    logits = PROBS.log() + 3.0  # a shift the softmax ignores
    expected = (logits / temperature).exp() / (logits / temperature).exp().sum()
    (counts,) = draws([(logits - logits.logsumexp(0)).exp()], temperature=temperature)
    assert_frequencies(counts, expected)


def test_temperature_then_top_p_keeps_the_nucleus_of_the_tempered_distribution():
    tempered = PROBS.sqrt() / PROBS.sqrt().sum()  # softmax(log p / 2)
    (counts,) = draws([PROBS], temperature=2.0, top_p=0.75)
    expected = nucleus(tempered, 0.75)
    assert (expected > 0).sum() == 4  # one id more than at temperature 1
    assert_frequencies(counts, expected)


def test_a_fixed_generator_gives_the_same_ids():
    logits = torch.randn(500, V)
    a = mt.sample_next(logits, top_p=0.9, generator=torch.Generator().manual_seed(4))
    b = mt.sample_next(logits, top_p=0.9, generator=torch.Generator().manual_seed(4))
    c = mt.sample_next(logits, top_p=0.9, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_filter_logits_returns_a_new_tensor_and_keeps_the_best_id():
    logits = torch.tensor([[0.0, 10.0, 0.0, 0.0]])
    out = mt.filter_logits(logits, top_k=2, top_p=0.01)
    assert torch.equal(logits, torch.tensor([[0.0, 10.0, 0.0, 0.0]]))  # unchanged
    assert torch.isfinite(out).tolist() == [[False, True, False, False]]


# --- bad arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize("name, value", [
    ("temperature", -1.0), ("temperature", float("nan")), ("temperature", float("inf")),
    ("temperature", True), ("temperature", "1"),
    ("top_k", 0), ("top_k", -2), ("top_k", 2.5), ("top_k", True),
    ("top_p", 0.0), ("top_p", 1.5), ("top_p", -0.1), ("top_p", float("nan")), ("top_p", True),
])
def test_bad_sampling_arguments_raise_naming_the_argument(name, value):
    logits = torch.randn(2, V)
    with pytest.raises(ValueError, match=name):
        mt.sample_next(logits, **{name: value})
    with pytest.raises(ValueError, match=name):
        mt.generate(tiny_lm(), torch.tensor([[BOS]]), 2, **{name: value})


@pytest.mark.parametrize("logits", [torch.randn(V), torch.randn(2, 3, V),
                                    torch.randint(0, 5, (2, V))])
def test_logits_of_the_wrong_shape_or_dtype_are_refused(logits):
    with pytest.raises(ValueError, match="logits"):
        mt.sample_next(logits)


# --- generate ------------------------------------------------------------------------------------


def tiny_lm(seed: int = 0, **kw) -> mt.LanguageModel:
    torch.manual_seed(seed)
    base = dict(vocab_size=V, d_model=D, num_heads=4, num_layers=2, d_ff=64, dropout=0.0,
                max_len=MAX_LEN, norm_first=True)
    return mt.LanguageModel(mt.LanguageModelConfig(**{**base, **kw})).eval()


def prompt(batch: int = 3, length: int = 4, seed: int = 0) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    p = torch.randint(3, V, (batch, length), generator=g)
    p[:, 0] = BOS
    return p


def greedy_by_hand(model: nn.Module, start: Tensor, steps: int) -> Tensor:
    """The definition: run the whole sequence, take the argmax of the last
    position among the ids other than padding."""
    seq = start
    with torch.no_grad():
        for _ in range(steps):
            last = model(seq)[:, -1]
            last[:, PAD] = -math.inf
            seq = torch.cat([seq, last.argmax(-1, keepdim=True)], dim=1)
    return seq


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generation_is_the_argmax_chain(use_cache):
    model = tiny_lm().double()
    p = prompt()
    out = mt.generate(model, p, 12, temperature=0, use_cache=use_cache)
    assert out.shape == (3, 16) and torch.equal(out[:, :4], p)
    assert torch.equal(out, greedy_by_hand(model, p, 12))


@pytest.mark.parametrize("options", [
    dict(temperature=0), dict(top_k=1), dict(temperature=1.0), dict(temperature=0.7, top_k=5),
    dict(top_p=0.8), dict(temperature=1.3, top_k=8, top_p=0.9),
    dict(temperature=1.0, eos_id=5),  # three of the four rows stop early
])
def test_cached_generation_equals_uncached_token_for_token(options):
    model = tiny_lm(seed=2).double()  # float64: no rounding difference can flip a draw
    p = prompt(4, 3, seed=2)
    runs = [mt.generate(model, p, 20, generator=torch.Generator().manual_seed(9),
                        use_cache=use_cache, **options) for use_cache in (True, False)]
    assert torch.equal(runs[0], runs[1])


def test_generate_with_a_fixed_generator_repeats_and_another_seed_differs():
    model = tiny_lm(seed=3)
    p = prompt(4, 2, seed=3)
    a, b, c = (mt.generate(model, p, 15, generator=torch.Generator().manual_seed(s))
               for s in (1, 1, 2))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_generate_never_emits_padding():
    model = tiny_lm(seed=4)
    with torch.no_grad():
        model.output.bias[PAD] += 100.0  # the model wants padding above all
    for options in (dict(temperature=0), dict(temperature=1.0), dict(top_k=3), dict(top_p=0.5)):
        out = mt.generate(model, prompt(), 10, generator=torch.Generator().manual_seed(0),
                          **options)
        assert (out[:, 4:] != PAD).all(), options


class CountdownLM(nn.Module):
    """A stand-in next-token model: a row whose prompt ends with token ``3 + r``
    writes ``r`` tokens 5, then EOS, then (if asked) 7 forever."""

    config = mt.LanguageModelConfig(vocab_size=10, d_model=4, num_heads=1, max_len=64)

    def forward(self, tokens: Tensor) -> Tensor:
        b, length = tokens.shape
        logits = torch.zeros(b, length, 10)
        for row in range(b):
            budget = int(tokens[row, PROMPT_LEN - 1]) - 3
            written = length - PROMPT_LEN
            best = 5 if written < budget else (EOS if written == budget else 7)
            logits[row, -1, best] = 10.0
        return logits


PROMPT_LEN = 2


def test_rows_stop_at_eos_and_are_padded_and_generation_ends_when_all_stopped():
    p = torch.tensor([[BOS, 4], [BOS, 6], [BOS, 3]])  # budgets 1, 3, 0
    out = mt.generate(CountdownLM(), p, 20, temperature=0, eos_id=EOS, use_cache=False)
    assert out.tolist() == [
        [BOS, 4, 5, EOS, PAD, PAD],
        [BOS, 6, 5, 5, 5, EOS],
        [BOS, 3, EOS, PAD, PAD, PAD],
    ]
    without_eos = mt.generate(CountdownLM(), p, 6, temperature=0, use_cache=False)
    assert without_eos[0].tolist() == [BOS, 4, 5, EOS, 7, 7, 7, 7]


def test_generate_runs_in_eval_mode_and_restores_the_mode():
    model = tiny_lm(seed=5, dropout=0.5).train()
    p = prompt()
    a = mt.generate(model, p, 8, temperature=0)
    assert model.training
    b = greedy_by_hand(tiny_lm(seed=5, dropout=0.5).eval(), p, 8)
    assert torch.equal(a, b)  # no dropout while generating


def test_generate_with_no_new_tokens_returns_the_prompt():
    p = prompt()
    assert torch.equal(mt.generate(tiny_lm(), p, 0), p)


def test_generate_refuses_what_it_cannot_do():
    model = tiny_lm()
    with pytest.raises(ValueError, match="max_len"):
        mt.generate(model, prompt(1, 30), 11)  # 30 + 11 > 40 positions
    with pytest.raises(ValueError, match="empty"):
        mt.generate(model, torch.zeros(2, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        mt.generate(model, prompt(), -1)
    with pytest.raises(ValueError, match="use_cache"):
        mt.generate(CountdownLM(), torch.tensor([[BOS, 4]]), 3)
