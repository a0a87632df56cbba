"""Catalogues of readers' answers for the layer checkers: layer
normalisation, the feed-forward network and the sinusoidal encoding.

Each wrong answer is written the way a struggling reader would write it; the
test asserts that it is rejected and that the hint names its mistake. Each
unusual right answer must pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exercise_helpers import assert_hint, assert_passes

from minitransformer.exercises import (
    check_feed_forward,
    check_layer_norm,
    check_sinusoidal_encoding,
)


# ---------------------------------------------------------------- layer norm
def ln_ok(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def ln_var_mean_rsqrt(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return torch.addcmul(bias, (x - mean) * torch.rsqrt(var + eps), weight)


def ln_module(x, weight, bias, eps=1e-5):
    norm = torch.nn.LayerNorm(x.shape[-1], eps=eps, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        return norm(x)


LN_RIGHT = [ln_ok, ln_var_mean_rsqrt, ln_module,
            lambda x, w, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, b, eps)]


@pytest.mark.parametrize("fn", LN_RIGHT)
def test_layer_norm_accepts_right_answers(fn, capsys):
    assert_passes(check_layer_norm, fn, capsys)


def _ln(unbiased=False, eps_outside=False, eps_fixed=None, dims=(-1,), swap=False,
        affine=True, naive=False):
    def fn(x, weight, bias, eps=1e-5):
        e = eps if eps_fixed is None else eps_fixed
        mean = x.mean(dim=dims, keepdim=True)
        if naive:
            var = (x ** 2).mean(dim=dims, keepdim=True) - mean ** 2
        else:
            var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
        y = (x - mean) / (var.sqrt() + e) if eps_outside else (x - mean) / (var + e).sqrt()
        if not affine:
            return y
        return y * bias + weight if swap else y * weight + bias
    return fn


def ln_no_keepdim(x, weight, bias, eps=1e-5):
    mean = x.mean(-1)
    var = x.var(-1, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def ln_ddof(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, ddof=0)  # numpy's spelling
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


LN_MISTAKES = [
    (_ln(unbiased=True), "you used the unbiased variance"),
    (_ln(eps_outside=True), "you added ε outside the square root"),
    (_ln(eps_fixed=0.0), "a constant row gives NaN"),
    (_ln(eps_fixed=1e-5), "you ignored the eps argument"),
    (_ln(dims=(-2,)), "over the sequence or the batch"),
    (_ln(dims=None), "over the whole tensor"),
    (_ln(swap=True), "you swapped weight and bias"),
    (_ln(affine=False), "you did not apply weight and bias"),
    (_ln(naive=True), "E[x²] − E[x]² loses precision"),
    (ln_no_keepdim, "keepdim=True"),
    (ln_ddof, "PyTorch has no ddof"),
]


@pytest.mark.filterwarnings("ignore:var\\(\\). degrees of freedom")
@pytest.mark.parametrize("fn, fragment", LN_MISTAKES, ids=[f for _, f in LN_MISTAKES])
def test_layer_norm_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_layer_norm, fn, fragment, capsys)


# ---------------------------------------------------------------- feed-forward
def ffn_ok(x, w1, b1, w2, b2):
    return torch.relu(x @ w1.T + b1) @ w2.T + b2


def ffn_modules(x, w1, b1, w2, b2):
    net = torch.nn.Sequential(torch.nn.Linear(w1.shape[1], w1.shape[0], dtype=x.dtype),
                              torch.nn.ReLU(),
                              torch.nn.Linear(w2.shape[1], w2.shape[0], dtype=x.dtype))
    with torch.no_grad():
        net[0].weight.copy_(w1)
        net[0].bias.copy_(b1)
        net[2].weight.copy_(w2)
        net[2].bias.copy_(b2)
        return net(x)


FFN_RIGHT = [ffn_ok, ffn_modules,
             lambda x, w1, b1, w2, b2: F.linear(F.relu(F.linear(x, w1, b1)), w2, b2),
             lambda x, w1, b1, w2, b2: torch.einsum(
                 "...f,df->...d", (torch.einsum("...d,fd->...f", x, w1) + b1).clamp(min=0),
                 w2) + b2]


@pytest.mark.parametrize("fn", FFN_RIGHT)
def test_feed_forward_accepts_right_answers(fn, capsys):
    assert_passes(check_feed_forward, fn, capsys)


def ffn_dropout(x, w1, b1, w2, b2):
    h = F.dropout(torch.relu(x @ w1.T + b1), p=0.1)  # the paper has dropout here
    return h @ w2.T + b2


FFN_MISTAKES = [
    (lambda x, w1, b1, w2, b2: (x @ w1.T + b1) @ w2.T + b2, "there is no ReLU"),
    (lambda x, w1, b1, w2, b2: torch.relu(torch.relu(x @ w1.T + b1) @ w2.T + b2),
     "after the second layer"),
    (lambda x, w1, b1, w2, b2: (torch.relu(x) @ w1.T + b1) @ w2.T + b2,
     "you applied the ReLU to the input"),
    (lambda x, w1, b1, w2, b2: (torch.relu(x @ w1.T) + b1) @ w2.T + b2,
     "you added b1 after the ReLU"),
    (lambda x, w1, b1, w2, b2: F.gelu(x @ w1.T + b1) @ w2.T + b2, "you used GELU"),
    (lambda x, w1, b1, w2, b2: torch.tanh(x @ w1.T + b1) @ w2.T + b2,
     "you used another activation"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T) @ w2.T + b2, "a bias is missing"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T, "a bias is missing"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2 + b2, "x @ w1.T + b1"),
    (lambda x, w1, b1, w2, b2: F.linear(torch.relu(F.linear(x, w1.T, b1)), w2.T, b2),
     "F.linear(x, w, b) already computes x @ w.T + b"),
    (lambda x, w1, b1, w2, b2: torch.max(0, x @ w1.T + b1) @ w2.T + b2,
     "torch.max does not compare a number with a tensor"),
    (ffn_dropout, "is dropout on?"),
]


@pytest.mark.parametrize("fn, fragment", FFN_MISTAKES,
                         ids=[f"{i}-{f}" for i, (_, f) in enumerate(FFN_MISTAKES)])
def test_feed_forward_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_feed_forward, fn, fragment, capsys)


def test_feed_forward_linear_hint_does_not_say_transpose(capsys):
    """F.linear transposes its weight itself: the hint must not ask for one more."""
    fn = FFN_MISTAKES[9][0]
    assert_hint(check_feed_forward, fn, "without .T", capsys)


# ---------------------------------------------------------------- sinusoidal encoding
def pe_ok(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(max_len).unsqueeze(1).float()
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div[: d_model // 2])
    return pe


def pe_loops(max_len, d_model):
    return torch.tensor([[math.sin(p / 10000 ** (j / d_model)) if j % 2 == 0
                          else math.cos(p / 10000 ** ((j - 1) / d_model))
                          for j in range(d_model)] for p in range(max_len)],
                        dtype=torch.float64)


def pe_numpy(max_len, d_model):
    pos = np.arange(max_len)[:, None]
    col = np.arange(d_model)[None, :]
    angle = pos / np.power(10000.0, (col - col % 2) / d_model)
    return torch.from_numpy(np.where(col % 2 == 0, np.sin(angle), np.cos(angle)))


PE_RIGHT = [pe_ok, pe_loops, pe_numpy]


@pytest.mark.parametrize("fn", PE_RIGHT, ids=lambda f: f.__name__)
def test_sinusoidal_accepts_right_answers(fn, capsys):
    assert_passes(check_sinusoidal_encoding, fn, capsys)


def pe_even_only(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(max_len).unsqueeze(1).float()
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)  # breaks for odd d_model
    return pe


def _pe(layout="interleaved", exponent="2i", start=0, divide=True, over="d_model"):
    def fn(max_len, d_model):
        pos = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]
        i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i
        denominator = {"d_model": d_model, "max_len": max_len, "none": 1}[over]
        if exponent == "j":
            freq_s = 10000 ** (torch.arange(0, d_model, 2) / denominator)
            freq_c = 10000 ** (torch.arange(1, d_model, 2) / denominator)
        else:
            e = 2 * i if exponent == "4i" else i
            freq_s = freq_c = 10000 ** (e / denominator)
        freq_c = freq_c[: d_model // 2]
        a_s = pos / freq_s if divide else pos * freq_s
        a_c = pos / freq_c if divide else pos * freq_c
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        if layout == "halves":
            return torch.cat([torch.sin(a_s), torch.cos(a_c)], dim=-1)
        if layout == "swapped":
            pe[:, 0::2], pe[:, 1::2] = torch.cos(a_s), torch.sin(a_c)
        else:
            pe[:, 0::2], pe[:, 1::2] = torch.sin(a_s), torch.cos(a_c)
        return pe
    return fn


PE_MISTAKES = [
    (_pe(layout="halves"), "the sines in the first half"),
    (_pe(layout="swapped"), "sine and cosine are swapped"),
    (_pe(exponent="j"), "each column has its own frequency"),
    (_pe(exponent="4i"), "the exponent is doubled"),
    (_pe(over="none"), "the exponent is not divided by d_model"),
    (_pe(over="max_len"), "you divided the exponent by max_len"),
    (_pe(start=1), "positions start at 1"),
    (_pe(divide=False), "you multiplied the position by"),
    (lambda n, d: pe_ok(n, d).T, "the table is transposed"),
    (pe_even_only, "odd d_model (7) fails"),
]


@pytest.mark.parametrize("fn, fragment", PE_MISTAKES, ids=[f for _, f in PE_MISTAKES])
def test_sinusoidal_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_sinusoidal_encoding, fn, fragment, capsys)
