"""The checkers of minitransformer.exercises: each right answer passes, and each
typical wrong answer fails with the hint that names its mistake.

The "reader" functions below are written the way a reader would write them,
independently of the package; every hint the checkers print is proven by one
wrong answer here.
"""

from __future__ import annotations

import math

import pytest
import torch

from minitransformer import MultiHeadAttention
from minitransformer.exercises import (
    check_causal_mask,
    check_feed_forward,
    check_greedy_step,
    check_label_smoothing_loss,
    check_layer_norm,
    check_masked_softmax,
    check_merge_heads,
    check_padding_mask,
    check_scaled_dot_product_attention,
    check_sinusoidal_encoding,
    check_split_heads,
)
from minitransformer.exercises.heads import merge_heads_reference, split_heads_reference


def _run(checker, fn, capsys):
    ok = checker(fn)
    out = capsys.readouterr().out
    assert isinstance(ok, bool)
    assert out.strip(), "a checker must print its verdict"
    return ok, out


def assert_passes(checker, fn, capsys):
    ok, out = _run(checker, fn, capsys)
    assert ok, out
    assert "✓" in out and "✗" not in out


def assert_hint(checker, fn, fragment, capsys):
    ok, out = _run(checker, fn, capsys)
    assert not ok, out
    assert "✗" in out
    flat = " ".join(out.split())  # verdicts are wrapped to 88 columns
    assert fragment in flat, f"expected a hint containing {fragment!r}, got:\n{out}"


# ---------------------------------------------------------------- attention
def sdpa_ok(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


def sdpa_big_negative(q, k, v, mask=None):  # the Annotated Transformer's -1e9 fill
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(k.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def _sdpa(scale="sqrt", axis=-1, fill=float("-inf"), invert=False, after=False,
          ignore_mask=False, nan_fix=True, swap=False, post=False):
    def fn(q, k, v, mask=None):
        d_k = q.shape[-1]
        s = {"sqrt": math.sqrt(d_k), "none": 1.0, "d": d_k, "mul": 1 / math.sqrt(d_k),
             "dv": math.sqrt(v.shape[-1])}[scale]
        scores = q @ k.transpose(-2, -1)
        if not post:
            scores = scores / s
        if ignore_mask:
            mask = None
        if mask is not None and invert:
            mask = ~mask
        if mask is not None and not after:
            scores = scores.masked_fill(~mask, fill)
        w = scores.softmax(dim=axis)
        if post:
            w = w / s
        if mask is not None and after:
            w = w * mask
        if nan_fix:
            w = w.nan_to_num(0.0)
        out = w @ v
        return (w, out) if swap else (out, w)
    return fn


def test_sdpa_accepts_right_answers(capsys):
    assert_passes(check_scaled_dot_product_attention, sdpa_ok, capsys)
    ok, out = _run(check_scaled_dot_product_attention, sdpa_big_negative, capsys)
    assert ok and "uniform" in out  # passes, with a note on the fully masked row
    assert_passes(check_scaled_dot_product_attention,
                  lambda q, k, v, mask=None: tuple(
                      __import__("minitransformer").scaled_dot_product_attention(q, k, v, mask)),
                  capsys)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(scale="none"), "not scaled"),
    (dict(scale="d"), "divided the scores by d_k; divide by its square root"),
    (dict(scale="mul"), "multiplied the scores by √d_k"),
    (dict(scale="dv"), "square root of v's width"),
    (dict(post=True), "after the softmax; the scaling belongs to the scores"),
    (dict(axis=-2), "softmax over the wrong axis"),
    (dict(ignore_mask=True), "the mask is ignored"),
    (dict(invert=True), "the mask is inverted"),
    (dict(after=True), "the mask is applied after the softmax"),
    (dict(fill=0.0), "filled with 0"),
    (dict(nan_fix=False), "gets NaN"),
    (dict(swap=True), "return (output, weights) in that order"),
])
def test_sdpa_hints(kwargs, fragment, capsys):
    assert_hint(check_scaled_dot_product_attention, _sdpa(**kwargs), fragment, capsys)


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_sdpa_hint_for_untransposed_k(capsys):
    def fn(q, k, v, mask=None):
        w = (q @ k.T / math.sqrt(q.shape[-1])).softmax(-1)
        return w @ v, w
    assert_hint(check_scaled_dot_product_attention, fn, "k.transpose(-2, -1)", capsys)


def test_sdpa_hint_for_overflowing_softmax(capsys):
    def fn(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        e = scores.exp()
        w = (e / e.sum(-1, keepdim=True)).nan_to_num(0.0)
        return w @ v, w
    assert_hint(check_scaled_dot_product_attention, fn, "large scores", capsys)


def test_sdpa_reports_exceptions_and_stubs(capsys):
    def stub(q, k, v, mask=None):
        raise NotImplementedError

    def broken(q, k, v, mask=None):
        raise RuntimeError("boom")

    def no_mask_arg(q, k, v):
        return sdpa_ok(q, k, v)

    assert_hint(check_scaled_dot_product_attention, stub, "Not implemented yet", capsys)
    assert_hint(check_scaled_dot_product_attention, broken, "RuntimeError: boom", capsys)
    assert_hint(check_scaled_dot_product_attention, no_mask_arg, "mask=None", capsys)
    assert_hint(check_scaled_dot_product_attention, 42, "expected a function", capsys)


def test_sdpa_flags_wrong_dtype_and_in_place_edits(capsys):
    def float32_always(q, k, v, mask=None):
        out, w = sdpa_ok(q.float(), k.float(), v.float(), mask)
        return out, w

    def in_place(q, k, v, mask=None):
        q.div_(math.sqrt(q.shape[-1]))
        w = (q @ k.transpose(-2, -1))
        if mask is not None:
            w = w.masked_fill(~mask, float("-inf"))
        w = w.softmax(-1).nan_to_num(0.0)
        return w @ v, w

    assert_hint(check_scaled_dot_product_attention, float32_always, "dtype torch.float32",
                capsys)
    assert_hint(check_scaled_dot_product_attention, in_place, "in place", capsys)


def test_checking_leaves_the_global_seed_alone(capsys):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_scaled_dot_product_attention(sdpa_ok)
    check_layer_norm(lambda x, w, b, eps=1e-5: torch.nn.functional.layer_norm(
        x, x.shape[-1:], w, b, eps))
    capsys.readouterr()
    assert torch.equal(torch.rand(3), expected)


# ---------------------------------------------------------------- masked softmax
def ms_ok(scores, mask):
    filled = scores.masked_fill(~mask, float("-inf"))
    return filled.softmax(dim=-1).nan_to_num(0.0)


def ms_finfo(scores, mask):
    p = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(-1)
    return p * mask.any(-1, keepdim=True)


def test_masked_softmax_accepts_right_answers(capsys):
    assert_passes(check_masked_softmax, ms_ok, capsys)
    assert_passes(check_masked_softmax, ms_finfo, capsys)


@pytest.mark.parametrize("fn, fragment", [
    (lambda s, m: s.masked_fill(~m, 0.0).softmax(-1), "filled with 0"),
    (lambda s, m: s.softmax(-1) * m, "applied after the softmax"),
    (lambda s, m: s.masked_fill(m, float("-inf")).softmax(-1).nan_to_num(0.0), "inverted"),
    (lambda s, m: s.softmax(-1), "the mask is ignored"),
    (lambda s, m: s.masked_fill(~m, float("-inf")).softmax(0).nan_to_num(0.0), "wrong axis"),
    (lambda s, m: s.masked_fill(~m, -10000.0).softmax(-1) * m.any(-1, keepdim=True),
     "not negative enough"),
    (lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-1), "comes out as NaN"),
    (lambda s, m: s.masked_fill(~m, -1e4).softmax(-1) if s.abs().max() < 1e3
     else ms_ok(s, m), "spreads 1/L"),
    (lambda s, m: s.masked_fill(~m, -1e9).softmax(-1) * m.any(-1, keepdim=True),
     "does not fit in float16"),
])
def test_masked_softmax_hints(fn, fragment, capsys):
    assert_hint(check_masked_softmax, fn, fragment, capsys)


# ---------------------------------------------------------------- causal mask
def test_causal_mask_accepts_right_answers(capsys):
    assert_passes(check_causal_mask,
                  lambda n: torch.tril(torch.ones(n, n)).bool(), capsys)
    assert_passes(check_causal_mask,
                  lambda n: torch.arange(n)[None, :] <= torch.arange(n)[:, None], capsys)


@pytest.mark.parametrize("fn, fragment", [
    (lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1), "inverted"),
    (lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1),
     "diagonal is False"),
    (lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool)), "upper triangle"),
    (lambda n: torch.triu(torch.full((n, n), float("-inf")), diagonal=1), "additive"),
    (lambda n: torch.tril(torch.ones(n, n)), "float 0/1"),
    (lambda n: torch.tril(torch.ones(1, n, n, dtype=torch.bool)),
     "the mask has shape (1, 5, 5); expected (5, 5)"),
])
def test_causal_mask_hints(fn, fragment, capsys):
    assert_hint(check_causal_mask, fn, fragment, capsys)


# ---------------------------------------------------------------- padding mask
def test_padding_mask_accepts_right_answer(capsys):
    assert_passes(check_padding_mask,
                  lambda t, p: (t != p).unsqueeze(1).unsqueeze(2), capsys)


@pytest.mark.parametrize("fn, fragment", [
    (lambda t, p: (t == p)[:, None, None, :], "inverted"),
    (lambda t, p: t != p, "has shape (B, L); give it two singleton axes"),
    (lambda t, p: (t != p)[:, None, :], "one more singleton axis"),
    (lambda t, p: (t != p)[:, None, :, None], "length axis is in the wrong place"),
    (lambda t, p: (t != 0)[:, None, None, :], "instead of the pad_id argument"),
    (lambda t, p: t == p, "key_padding_mask"),
])
def test_padding_mask_hints(fn, fragment, capsys):
    assert_hint(check_padding_mask, fn, fragment, capsys)


# ---------------------------------------------------------------- heads
def split_ok(x, num_heads):
    b, n, d = x.shape
    return x.view(b, n, num_heads, d // num_heads).transpose(1, 2)


def merge_ok(x):
    b, h, n, dh = x.shape
    return x.transpose(1, 2).reshape(b, n, h * dh)


def test_references_match_multi_head_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    assert torch.equal(split_heads_reference(x, 3), mha._split(x))
    assert torch.equal(merge_heads_reference(mha._split(x)), x)


def test_split_and_merge_accept_right_answers(capsys):
    assert_passes(check_split_heads, split_ok, capsys)
    assert_passes(check_merge_heads, merge_ok, capsys)


@pytest.mark.parametrize("fn, fragment", [
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1), "transpose(1, 2)"),
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), "cuts the *sequence*"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2),
     "strided"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).transpose(1, 2),
     "heads and head width are swapped"),
])
def test_split_heads_hints(fn, fragment, capsys):
    assert_hint(check_split_heads, fn, fragment, capsys)


@pytest.mark.parametrize("fn, fragment", [
    (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "without moving the heads axis"),
    (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1), "interleaved"),
    (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "not contiguous"),
])
def test_merge_heads_hints(fn, fragment, capsys):
    assert_hint(check_merge_heads, fn, fragment, capsys)


# ---------------------------------------------------------------- layer norm
def ln_ok(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _ln(unbiased=False, eps_outside=False, eps_fixed=None, dims=(-1,), swap=False,
        affine=True, naive=False, keepdim=True):
    def fn(x, weight, bias, eps=1e-5):
        e = eps if eps_fixed is None else eps_fixed
        mean = x.mean(dim=dims, keepdim=keepdim)
        if naive:
            var = (x ** 2).mean(dim=dims, keepdim=True) - mean ** 2
        else:
            var = x.var(dim=dims, keepdim=keepdim, unbiased=unbiased)
        y = (x - mean) / (var.sqrt() + e) if eps_outside else (x - mean) / (var + e).sqrt()
        if not affine:
            return y
        return y * bias + weight if swap else y * weight + bias
    return fn


def test_layer_norm_accepts_right_answers(capsys):
    assert_passes(check_layer_norm, ln_ok, capsys)
    assert_passes(check_layer_norm, lambda x, w, b, eps=1e-5: torch.nn.functional.layer_norm(
        x, x.shape[-1:], w, b, eps), capsys)


@pytest.mark.parametrize("fn, fragment", [
    (_ln(unbiased=True), "unbiased variance"),
    (_ln(eps_outside=True), "ε is added outside the square root"),
    (_ln(eps_fixed=0.0), "a constant row"),
    (_ln(eps_fixed=1e-5), "the eps argument is ignored"),
    (_ln(dims=(-2,)), "wrong axis"),
    (_ln(dims=None), "over the whole tensor"),
    (_ln(swap=True), "weight and bias are swapped"),
    (_ln(affine=False), "weight and bias are not applied"),
    (_ln(naive=True), "E[x²] − E[x]²"),
])
@pytest.mark.filterwarnings("ignore:var\\(\\). degrees of freedom")
def test_layer_norm_hints(fn, fragment, capsys):
    assert_hint(check_layer_norm, fn, fragment, capsys)


def ffn_ok(x, w1, b1, w2, b2):
    return torch.relu(x @ w1.T + b1) @ w2.T + b2


def test_feed_forward_accepts_right_answers(capsys):
    assert_passes(check_feed_forward, ffn_ok, capsys)
    assert_passes(check_feed_forward, lambda x, w1, b1, w2, b2: torch.nn.functional.linear(
        torch.nn.functional.relu(torch.nn.functional.linear(x, w1, b1)), w2, b2), capsys)


@pytest.mark.parametrize("fn, fragment", [
    (lambda x, w1, b1, w2, b2: (x @ w1.T + b1) @ w2.T + b2, "no ReLU"),
    (lambda x, w1, b1, w2, b2: torch.relu(torch.relu(x @ w1.T + b1) @ w2.T + b2),
     "after the second layer"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2 + b2, "x @ w1.T"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T) @ w2.T + b2, "a bias is missing"),
    (lambda x, w1, b1, w2, b2: torch.nn.functional.gelu(x @ w1.T + b1) @ w2.T + b2, "GELU"),
])
def test_feed_forward_hints(fn, fragment, capsys):
    assert_hint(check_feed_forward, fn, fragment, capsys)


def test_feed_forward_not_implemented(capsys):
    def fn(x, w1, b1, w2, b2):
        raise NotImplementedError
    ok, out = _run(check_feed_forward, fn, capsys)
    assert not ok and "Not implemented" in out


def test_layer_norm_hint_without_keepdim(capsys):
    def fn(x, weight, bias, eps=1e-5):
        mean = x.mean(-1)
        var = x.var(-1, unbiased=False)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias
    assert_hint(check_layer_norm, fn, "keepdim=True", capsys)


# ---------------------------------------------------------------- sinusoidal
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


def pe_even_only(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(max_len).unsqueeze(1).float()
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)  # breaks for odd d_model
    return pe


def _pe(layout="interleaved", exponent="2i", start=0, divide=True):
    def fn(max_len, d_model):
        pos = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]
        i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i
        if exponent == "j":
            freq_s = 10000 ** (torch.arange(0, d_model, 2) / d_model)
            freq_c = 10000 ** (torch.arange(1, d_model, 2) / d_model)
        else:
            e = 2 * i if exponent == "4i" else i
            freq_s = freq_c = 10000 ** (e / d_model)
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


def test_sinusoidal_accepts_right_answers(capsys):
    assert_passes(check_sinusoidal_encoding, pe_ok, capsys)
    assert_passes(check_sinusoidal_encoding, pe_loops, capsys)
    assert_passes(check_sinusoidal_encoding, _pe(), capsys)


@pytest.mark.parametrize("fn, fragment", [
    (_pe(layout="halves"), "in two halves"),
    (_pe(layout="swapped"), "sine and cosine are swapped"),
    (_pe(exponent="j"), "each column has its own frequency"),
    (_pe(exponent="4i"), "the exponent is doubled"),
    (_pe(start=1), "positions start at 1"),
    (_pe(divide=False), "divide: the angle is"),
    (lambda n, d: pe_ok(n, d).T, "transposed"),
    (pe_even_only, "odd d_model (7) fails"),
])
def test_sinusoidal_hints(fn, fragment, capsys):
    assert_hint(check_sinusoidal_encoding, fn, fragment, capsys)


# ---------------------------------------------------------------- label smoothing
def ls_ok(logits, target, smoothing=0.1, pad_id=0):
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    per_token = (1 - smoothing) * nll - smoothing * logp.mean(-1)
    keep = target != pad_id
    return per_token[keep].mean()


def ls_torch(logits, target, smoothing=0.1, pad_id=0):
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=pad_id,
        label_smoothing=smoothing)


def _ls(spread="V", kl=False, reduce="tokens", swap=False, sum_uniform=False,
        ignore_pad=True, pad0=False, smooth=True, naive=False):
    """A reader's loss built from an explicit target distribution q."""
    def fn(logits, target, smoothing=0.1, pad_id=0):
        eps = smoothing if smooth else 0.0
        pad = 0 if pad0 else pad_id
        v = logits.shape[-1]
        logp = logits.softmax(-1).log() if naive else logits.log_softmax(-1)
        one_hot = torch.nn.functional.one_hot(target, v).to(logp.dtype)
        if spread == "V":
            q = (1 - eps) * one_hot + eps / v
        elif spread == "V-1":
            q = (1 - eps) * one_hot + eps / (v - 1) * (1 - one_hot)
        else:  # "V-2": neither the true token nor padding
            q = (1 - eps) * one_hot + eps / (v - 2) * (1 - one_hot)
            q[..., pad] = 0.0
        if swap:
            q = eps * one_hot + (1 - eps) / v
        per_token = -(q * logp).sum(-1)
        if sum_uniform:
            per_token = -(1 - eps) * (one_hot * logp).sum(-1) - eps * logp.sum(-1)
        if kl:
            per_token = per_token + (q * torch.log(q.clamp(min=1e-30))).sum(-1)
        keep = (target != pad) if ignore_pad else torch.ones_like(target, dtype=torch.bool)
        kept = per_token * keep
        if reduce == "sum":
            return kept.sum()
        if reduce == "numel":
            return kept.sum() / target.numel()
        if reduce == "sentences":
            return (kept.sum(1) / keep.sum(1)).mean()
        return kept.sum() / keep.sum()
    return fn


def test_label_smoothing_accepts_right_answers(capsys):
    assert_passes(check_label_smoothing_loss, ls_ok, capsys)
    assert_passes(check_label_smoothing_loss, ls_torch, capsys)
    assert_passes(check_label_smoothing_loss, _ls(), capsys)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(smooth=False), "the smoothing is not applied"),
    (dict(swap=True), "ε and 1 − ε are swapped"),
    (dict(ignore_pad=False), "padding positions are counted"),
    (dict(reduce="numel"), "divided by all B·T positions"),
    (dict(reduce="sum"), "returned the sum"),
    (dict(reduce="sentences"), "averaged each sentence"),
    (dict(spread="V-1"), "over the V − 1 wrong tokens"),
    (dict(spread="V-2"), "V − 2 tokens"),
    (dict(kl=True), "KL divergence"),
    (dict(sum_uniform=True), "summed over the vocabulary"),
    (dict(pad0=True), "instead of the pad_id argument"),
    (dict(naive=True), "log_softmax"),
])
def test_label_smoothing_hints(kwargs, fragment, capsys):
    assert_hint(check_label_smoothing_loss, _ls(**kwargs), fragment, capsys)


def test_label_smoothing_reference_is_pytorchs():
    from minitransformer.exercises.loss import _reference
    torch.manual_seed(0)
    logits, target = torch.randn(3, 4, 9), torch.randint(0, 9, (3, 4))
    expected = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 9), target.reshape(-1), ignore_index=0, label_smoothing=0.2)
    torch.testing.assert_close(_reference(logits, target, 0.2, 0), expected)


# ---------------------------------------------------------------- greedy step
def _step(first=False, extra_bos=False, drop_last=False, memory_mask=True, ban=True,
          finished="eos", whole=False, axis=-1):
    def fn(model, src, prefix, bos_id=1, eos_id=2):
        with torch.no_grad():
            mask = model.src_mask(src)
            memory = model.encode(src, mask)
            tgt = prefix
            if extra_bos:
                tgt = torch.cat([torch.full((len(prefix), 1), bos_id), prefix], 1)
            if drop_last and tgt.shape[1] > 1:
                tgt = tgt[:, :-1]
            logits = model.decode(tgt, memory, mask if memory_mask else None)
            last = logits[:, 0 if first else -1].clone()
            if ban:
                last[:, [bos_id, model.config.pad_id]] = float("-inf")
            nxt = last.argmax(dim=axis)
            done = (prefix == eos_id).any(dim=1)
            if finished == "eos":
                nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
            elif finished == "pad":
                nxt = torch.where(done, torch.zeros_like(nxt), nxt)
            return torch.cat([prefix, nxt[:, None]], 1) if whole else nxt
    return fn


def test_greedy_step_accepts_right_answer(capsys):
    assert_passes(check_greedy_step, _step(), capsys)


def test_greedy_step_repeated_is_greedy_decode():
    """The step the checker expects is the step of decoding.greedy_decode."""
    from minitransformer import Transformer, TransformerConfig
    from minitransformer.decoding import greedy_decode

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(15, 15, d_model=16, num_heads=2,
                                          num_encoder_layers=1, num_decoder_layers=1,
                                          d_ff=32, dropout=0.0)).eval()
    with torch.no_grad():
        model.generator.weight.normal_(0, 2.0)
        model.generator.bias[0] = 3.0  # tempt the step to emit PAD
    src = torch.randint(3, 15, (4, 6))
    src[1, 3:] = 0
    expected = greedy_decode(model, src, max_len=8)
    prefix = torch.ones(4, 1, dtype=torch.long)
    step = _step()
    for _ in range(8):
        prefix = torch.cat([prefix, step(model, src, prefix)[:, None]], 1)
    got = [row[1:] for row in prefix.tolist()]
    got = [row[: row.index(2)] if 2 in row else row for row in got]
    assert got == expected


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(whole=True), "returned the extended prefix"),
    (dict(axis=0, finished="none"), "argmax over the wrong axis"),
    (dict(first=True), "at the first position"),
    (dict(extra_bos=True), "BOS is added twice"),
    (dict(drop_last=True), "last token of the prefix is not fed"),
    (dict(memory_mask=False), "source padding is not masked"),
    (dict(ban=False), "BOS or PAD was chosen"),
    (dict(finished="none"), "must emit EOS again"),
    (dict(finished="pad"), "not PAD"),
])
def test_greedy_step_hints(kwargs, fragment, capsys):
    assert_hint(check_greedy_step, _step(**kwargs), fragment, capsys)


def test_package_masked_softmax_passes(capsys):
    from minitransformer.rnn.attention_scorers import masked_softmax
    assert_passes(check_masked_softmax, masked_softmax, capsys)


# ---------------------------------------------------------------- every hint is reachable
def _mistake_lists():
    from minitransformer.exercises import (
        attention,
        decoding,
        feedforward,
        heads,
        layernorm,
        loss,
        masks,
        positional,
    )
    return [
        ("sdpa", check_scaled_dot_product_attention, attention._sdpa_mistakes()),
        ("masked_softmax", check_masked_softmax, attention._ms_mistakes()),
        ("causal", check_causal_mask, masks._causal_mistakes()),
        ("padding", check_padding_mask, masks._padding_mistakes()),
        ("split", check_split_heads, heads._split_mistakes()),
        ("merge", check_merge_heads, heads._merge_mistakes()),
        ("layer_norm", check_layer_norm, layernorm._mistakes()),
        ("feed_forward", check_feed_forward, feedforward._mistakes()),
        ("sinusoidal", check_sinusoidal_encoding, positional._mistakes()),
        ("label_smoothing", check_label_smoothing_loss, loss._mistakes()),
        ("greedy", check_greedy_step, decoding._mistakes()),
    ]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name, checker, mistakes", _mistake_lists(),
                         ids=[m[0] for m in _mistake_lists()])
def test_each_listed_mistake_earns_its_own_hint(name, checker, mistakes, capsys):
    """Fed the wrong answer a mistake describes, the checker fails and prints
    that mistake's hint: no hint is shadowed by another."""
    for mistake in mistakes:
        ok, out = _run(checker, mistake.compute, capsys)
        assert not ok, f"{name}: a listed mistake passed:\n{out}"
        assert " ".join(mistake.hint.split()) in " ".join(out.split()), (
            f"{name}: expected the hint {mistake.hint!r}, got:\n{out}")
