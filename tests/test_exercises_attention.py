"""Catalogues of readers' answers for the attention checkers: scaled
dot-product attention, the masked softmax, multi-head attention from weights
and one decoding step with a key/value cache.

Each wrong answer is written the way a struggling reader would write it,
independently of the checker's own list of mistakes; the test asserts that
it is rejected and that the hint names its mistake. Each unusual right answer
must pass.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from exercise_helpers import assert_hint, assert_passes, run_checker

from minitransformer.exercises import (
    check_kv_cache_step,
    check_masked_softmax,
    check_multi_head_attention,
    check_scaled_dot_product_attention,
)


# ---------------------------------------------------------------- scaled dot-product attention
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


def sdpa_einsum(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights * mask.any(-1, keepdim=True)  # rows with no key: zeros
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def sdpa_fused_output(q, k, v, mask=None):
    """Weights by hand, the output from PyTorch's fused kernel."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        dead = ~mask.any(-1, keepdim=True)
        mask = mask | dead  # let fully masked rows attend anywhere, zero them after
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if mask is not None:
        weights, out = weights.masked_fill(dead, 0.0), out.masked_fill(dead, 0.0)
    return out, weights


SDPA_RIGHT = [sdpa_ok, sdpa_big_negative, sdpa_einsum, sdpa_fused_output]


@pytest.mark.parametrize("fn", SDPA_RIGHT, ids=lambda f: f.__name__)
def test_sdpa_accepts_right_answers(fn, capsys):
    ok, out = run_checker(check_scaled_dot_product_attention, fn, capsys)
    assert ok, out
    if fn is sdpa_big_negative:
        assert "uniform" in out  # passes, with a note on the fully masked row


def _sdpa(scale="sqrt", axis=-1, fill=float("-inf"), invert=False, after=False,
          ignore_mask=False, nan_fix=True, swap=False, post=False, implicit=False):
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
        w = F.softmax(scores) if implicit else scores.softmax(dim=axis)
        if post:
            w = w / s
        if mask is not None and after:
            w = w * mask
        if nan_fix:
            w = w.nan_to_num(0.0)
        out = w @ v
        return (w, out) if swap else (out, w)
    return fn


def sdpa_k_dot_t(q, k, v, mask=None):
    w = (q @ k.T / math.sqrt(q.shape[-1])).softmax(-1)
    return w @ v, w


def sdpa_naive_exp(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    e = scores.exp()
    w = (e / e.sum(-1, keepdim=True)).nan_to_num(0.0)
    return w @ v, w


def sdpa_mask_unsqueezed(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask.unsqueeze(1) == 0, -1e9)  # "add the heads axis"
    w = scores.softmax(-1)
    return w @ v, w


def sdpa_softmax_no_dim(q, k, v, mask=None):
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    return w @ v, w


def sdpa_in_place(q, k, v, mask=None):
    q.div_(math.sqrt(q.shape[-1]))
    w = q @ k.transpose(-2, -1)
    if mask is not None:
        w = w.masked_fill(~mask, float("-inf"))
    w = w.softmax(-1).nan_to_num(0.0)
    return w @ v, w


def sdpa_float32_always(q, k, v, mask=None):
    return sdpa_ok(q.float(), k.float(), v.float(), mask)


def sdpa_dropout(q, k, v, mask=None):
    out, w = sdpa_ok(q, k, v, mask)
    w = F.dropout(w, p=0.1)  # training=True by default
    return w @ v, w


SDPA_MISTAKES = [
    (_sdpa(scale="none"), "the scores are not scaled"),
    (_sdpa(scale="d"), "you divided the scores by d_k; divide by its square root"),
    (_sdpa(scale="mul"), "you multiplied the scores by √d_k"),
    (_sdpa(scale="dv"), "square root of v's width"),
    (_sdpa(post=True), "divided the weights by √d_k after the softmax"),
    (_sdpa(implicit=True), "your softmax has no dim="),
    (_sdpa(axis=-2), "softmax over the wrong axis"),
    (_sdpa(ignore_mask=True), "the mask is ignored"),
    (_sdpa(invert=True), "the mask is inverted"),
    (_sdpa(after=True), "you applied the mask after the softmax"),
    (_sdpa(fill=0.0), "filled the blocked scores with 0"),
    (_sdpa(nan_fix=False), "gets NaN"),
    (_sdpa(swap=True), "return (output, weights) in that order"),
    (sdpa_naive_exp, "overflows on large scores"),
    (sdpa_k_dot_t, "k.transpose(-2, -1)"),
    (sdpa_mask_unsqueezed, "the mask no longer broadcasts against the scores"),
    (sdpa_softmax_no_dim, "softmax needs the axis to normalise over: pass dim=-1"),
    (sdpa_in_place, "changed one of its input tensors in place"),
    (sdpa_float32_always, "dtype torch.float32, expected torch.float64"),
    (sdpa_dropout, "dropout"),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("fn, fragment", SDPA_MISTAKES, ids=[f for _, f in SDPA_MISTAKES])
def test_sdpa_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_scaled_dot_product_attention, fn, fragment, capsys)


def test_sdpa_mask_broadcast_error_is_not_blamed_on_k_transpose(capsys):
    _, out = run_checker(check_scaled_dot_product_attention, sdpa_mask_unsqueezed, capsys)
    assert "k.T" not in out and "masked_fill(mask.unsqueeze(1) == 0, -1e9)" in out


# ---------------------------------------------------------------- masked softmax
def ms_ok(scores, mask):
    filled = scores.masked_fill(~mask, float("-inf"))
    return filled.softmax(dim=-1).nan_to_num(0.0)


def ms_finfo(scores, mask):
    p = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(-1)
    return p * mask.any(-1, keepdim=True)


def ms_manual_stable(scores, mask):
    """exp after subtracting the row's largest kept score, by hand."""
    s = scores.float().masked_fill(~mask, float("-inf"))
    top = s.amax(-1, keepdim=True).clamp(min=-1e30)  # a fully masked row: finite
    e = (s - top).exp()
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp(min=1e-30), 0.0).to(scores.dtype)


def ms_package(scores, mask):
    from minitransformer.rnn.attention_scorers import masked_softmax
    return masked_softmax(scores, mask)  # the package's own, written for the RNN scorers


MS_RIGHT = [ms_ok, ms_finfo, ms_manual_stable, ms_package]


@pytest.mark.parametrize("fn", MS_RIGHT, ids=lambda f: f.__name__)
def test_masked_softmax_accepts_right_answers(fn, capsys):
    assert_passes(check_masked_softmax, fn, capsys)


def ms_naive_exp(scores, mask):
    e = scores.exp() * mask
    return e / e.sum(-1, keepdim=True)


def ms_renormalise(scores, mask):
    p = scores.softmax(-1) * mask
    return p / p.sum(-1, keepdim=True)


MS_MISTAKES = [
    (lambda s, m: s.masked_fill(~m, 0.0).softmax(-1), "filled the masked scores with 0"),
    (lambda s, m: s.softmax(-1) * m, "you applied the mask after the softmax"),
    (lambda s, m: s.masked_fill(m, float("-inf")).softmax(-1).nan_to_num(0.0), "inverted"),
    (lambda s, m: s.softmax(-1), "the mask is ignored"),
    (lambda s, m: F.softmax(s.masked_fill(~m, float("-inf"))).nan_to_num(0.0),
     "your softmax has no dim="),
    (lambda s, m: s.masked_fill(~m, float("-inf")).softmax(0).nan_to_num(0.0), "wrong axis"),
    (lambda s, m: s.masked_fill(~m, -10000.0).softmax(-1) * m.any(-1, keepdim=True),
     "not negative enough"),
    (lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-1), "comes out as NaN"),
    (ms_naive_exp, "you exponentiated the raw scores"),
    (ms_renormalise, "you masked after the softmax and renormalised"),
    (lambda s, m: s.masked_fill(~m, torch.finfo(s.dtype).min).softmax(-1), "spreads 1/L"),
    (lambda s, m: s.masked_fill(~m, -1e9).softmax(-1) * m.any(-1, keepdim=True),
     "does not fit in float16"),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("fn, fragment", MS_MISTAKES, ids=[f for _, f in MS_MISTAKES])
def test_masked_softmax_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_masked_softmax, fn, fragment, capsys)


# ---------------------------------------------------------------- multi-head attention
def _split(x, num_heads):
    b, n, d = x.shape
    return x.view(b, n, num_heads, d // num_heads).transpose(1, 2)  # (B, H, L, Dh)


def mha_ok(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, lq, d = query.shape
    q, k, v = (_split(x @ w.T, num_heads) for x, w in ((query, w_q), (key, w_k), (value, w_v)))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(b, lq, d) @ w_o.T
    return out, weights


def mha_per_head_loop(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """The paper's formula literally: each head its own rows of W_Q, W_K, W_V."""
    dh = query.shape[-1] // num_heads
    outs, weights = [], []
    for h in range(num_heads):
        rows = slice(h * dh, (h + 1) * dh)
        q, k, v = query @ w_q[rows].T, key @ w_k[rows].T, value @ w_v[rows].T
        s = q @ k.transpose(-2, -1) / dh**0.5
        if mask is not None:
            m = mask if mask.dim() < 4 else mask[:, 0]
            s = s.masked_fill(~m, float("-inf"))
        w = torch.softmax(s, dim=-1)
        outs.append(w @ v)
        weights.append(w)
    return torch.cat(outs, dim=-1) @ w_o.T, torch.stack(weights, dim=1)


def mha_torch_module(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """PyTorch's own layer with the weights copied in (its bool mask means blocked)."""
    b, lq, d = query.shape
    lk = key.shape[1]
    mha = torch.nn.MultiheadAttention(d, num_heads, bias=False, batch_first=True,
                                      dtype=query.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        mha.out_proj.weight.copy_(w_o)
    blocked = None
    if mask is not None:
        blocked = ~mask.expand(b, num_heads, lq, lk).reshape(b * num_heads, lq, lk)
    with torch.no_grad():
        return mha(query, key, value, attn_mask=blocked, average_attn_weights=False)


def mha_einsum(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
    d = query.shape[-1]
    dh = d // num_heads
    q = torch.einsum("bld,ed->ble", query, w_q).unflatten(-1, (num_heads, dh))
    k = torch.einsum("bld,ed->ble", key, w_k).unflatten(-1, (num_heads, dh))
    v = torch.einsum("bld,ed->ble", value, w_v).unflatten(-1, (num_heads, dh))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(dh)
    if mask is not None:
        scores = torch.where(mask, scores, -torch.inf)
    weights = scores.softmax(-1)
    heads = torch.einsum("bhqk,bkhe->bqhe", weights, v).flatten(2)
    return heads @ w_o.T, weights


MHA_RIGHT = [mha_ok, mha_per_head_loop, mha_torch_module, mha_einsum]


@pytest.mark.parametrize("fn", MHA_RIGHT, ids=lambda f: f.__name__)
def test_multi_head_attention_accepts_right_answers(fn, capsys):
    assert_passes(check_multi_head_attention, fn, capsys)


def _mha(transpose_w=True, kv_from_query=False, swap_kv=False, scale="head",
         split="slices", merge="slices", w_o=True, average=False, scores_out=False, axis=-1,
         use_mask=True, invert=False):
    def fn(query, key, value, w_q, w_k, w_v, w_o_, num_heads, mask=None):
        b, lq, d = query.shape
        dh = d // num_heads

        def proj(x, w):
            return x @ w.T if transpose_w else x @ w

        def heads(x):
            n = x.shape[1]
            if split == "direct":
                return x.view(b, num_heads, n, dh)
            if split == "strided":
                return x.view(b, n, dh, num_heads).permute(0, 3, 1, 2)
            return x.view(b, n, num_heads, dh).transpose(1, 2)

        k_in, v_in = (query, query) if kv_from_query else (key, value)
        wk, wv = (w_v, w_k) if swap_kv else (w_k, w_v)
        q, k, v = heads(proj(query, w_q)), heads(proj(k_in, wk)), heads(proj(v_in, wv))
        s = q @ k.transpose(-2, -1) / {"head": dh**0.5, "model": d**0.5, "none": 1.0}[scale]
        if mask is not None and use_mask:
            s = s.masked_fill(mask if invert else ~mask, float("-inf"))
        w = s.softmax(dim=axis)
        o = w @ v
        o = o.reshape(b, lq, d) if merge == "direct" else o.transpose(1, 2).reshape(b, lq, d)
        if w_o:
            o = proj(o, w_o_)
        if scores_out:
            w = s
        return o, (w.mean(1) if average else w)
    return fn


def mha_mask_unsqueezed(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
    if mask is not None:
        mask = mask.unsqueeze(1)  # "one more axis for the heads"
    return mha_ok(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask)


def mha_float_head_width(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, lq, d = query.shape
    q = (query @ w_q.T).view(b, lq, num_heads, d / num_heads)
    return q, q


def mha_query_length_everywhere(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, n, d = query.shape  # n is the *query* length, used for keys too

    def heads(x):
        return x.view(b, n, num_heads, d // num_heads).transpose(1, 2)
    q, k, v = heads(query @ w_q.T), heads(key @ w_k.T), heads(value @ w_v.T)
    w = (q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(b, n, d) @ w_o.T, w


MHA_MISTAKES = [
    (_mha(transpose_w=False), "project with x @ w.T, not x @ w"),
    (_mha(kv_from_query=True), "you computed the keys and values from query"),
    (_mha(swap_kv=True), "you swapped w_k and w_v"),
    (_mha(scale="model"), "you scaled by √d_model"),
    (_mha(scale="none"), "the scores are not scaled"),
    (_mha(split="direct"), "you reshaped (B, L, D) straight to (B, H, L, Dh)"),
    (_mha(split="strided"), "each head got every H-th feature"),
    (_mha(merge="direct"), "you merged (B, H, L, Dh) straight to (B, L, D)"),
    (_mha(w_o=False), "you left out the output projection"),
    (_mha(average=True), "you averaged the weights over the heads"),
    (_mha(scores_out=True), "you returned the scores"),
    (_mha(axis=-2), "softmax over the wrong axis"),
    (_mha(use_mask=False), "the mask is ignored"),
    (_mha(invert=True), "the mask is inverted"),
    (mha_mask_unsqueezed, "no longer broadcasts against the (B, H, Lq, Lk) scores"),
    (mha_float_head_width, "use integer division, D // H"),
    (mha_query_length_everywhere, "using each tensor's own length"),
]


@pytest.mark.parametrize("fn, fragment", MHA_MISTAKES, ids=[f for _, f in MHA_MISTAKES])
def test_multi_head_attention_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_multi_head_attention, fn, fragment, capsys)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("with_mask", [False, True])
def test_multi_head_reference_is_torch_multihead_attention(seed, with_mask):
    """The checker's reference (the package's MultiHeadAttention) equals
    torch.nn.MultiheadAttention with the same weights, per head."""
    from minitransformer.exercises.multihead import _reference
    torch.manual_seed(seed)
    b, lq, lk, d, h = 2, 4, 6, 12, 3
    query, key = torch.randn(b, lq, d), torch.randn(b, lk, d)
    w_q, w_k, w_v, w_o = (torch.randn(d, d) / d**0.5 for _ in range(4))
    mask = torch.rand(b, 1, 1, lk) < 0.7 if with_mask else None
    if mask is not None:
        mask[..., 0] = True
    out, weights = _reference(query, key, key, w_q, w_k, w_v, w_o, h, mask)
    ref = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        ref.out_proj.weight.copy_(w_o)
        expected, expected_w = ref(query, key, key, average_attn_weights=False,
                                   key_padding_mask=None if mask is None else ~mask[:, 0, 0])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights, expected_w, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- KV-cache step
def kv_ok(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads):
    b, _, d = x.shape
    k = torch.cat([cache_k, _split(x @ w_k.T, num_heads)], dim=2)  # (B, H, t + 1, Dh)
    v = torch.cat([cache_v, _split(x @ w_v.T, num_heads)], dim=2)
    q = _split(x @ w_q.T, num_heads)
    w = (q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(b, 1, d) @ w_o.T, k, v


def kv_fused(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads):
    """One projection for k and v, PyTorch's fused attention."""
    b, _, d = x.shape
    k_new, v_new = (x @ torch.cat([w_k, w_v]).T).chunk(2, dim=-1)
    k = torch.cat([cache_k, _split(k_new, num_heads)], dim=2)
    v = torch.cat([cache_v, _split(v_new, num_heads)], dim=2)
    out = F.scaled_dot_product_attention(_split(x @ w_q.T, num_heads), k, v)
    return out.transpose(1, 2).flatten(2) @ w_o.T, k, v


def kv_last_causal_row(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads):
    """Uses the last row of a causal mask (all True): right, if unnecessary."""
    b, _, d = x.shape
    k = torch.cat([cache_k, _split(x @ w_k.T, num_heads)], dim=2)
    v = torch.cat([cache_v, _split(x @ w_v.T, num_heads)], dim=2)
    n = k.shape[2]
    mask = torch.ones(n, n, dtype=torch.bool).tril()[-1:]  # (1, t + 1)
    scores = _split(x @ w_q.T, num_heads) @ k.transpose(-2, -1) / math.sqrt(d // num_heads)
    w = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return (w @ v).transpose(1, 2).reshape(b, 1, d) @ w_o.T, k, v


KV_RIGHT = [kv_ok, kv_fused, kv_last_causal_row]


@pytest.mark.parametrize("fn", KV_RIGHT, ids=lambda f: f.__name__)
def test_kv_cache_step_accepts_right_answers(fn, capsys):
    assert_passes(check_kv_cache_step, fn, capsys)


def _kv(attend="all", store="append", order="kv", mask_first=False, raw=False, swap=False,
        transpose_w=True, scale="head", strided=False, w_o=True, cat_dim=2):
    def fn(x, cache_k, cache_v, w_q, w_k, w_v, w_o_, num_heads):
        b, _, d = x.shape
        dh = d // num_heads

        def proj(inp, w):
            return inp @ w.T if transpose_w else inp @ w

        def heads(t):
            if strided:
                return t.view(b, 1, dh, num_heads).permute(0, 3, 1, 2)
            return t.view(b, 1, num_heads, dh).transpose(1, 2)

        wk, wv = (w_v, w_k) if swap else (w_k, w_v)
        k_new = heads(x) if raw else heads(proj(x, wk))
        v_new = heads(x) if raw else heads(proj(x, wv))
        if store == "prepend":
            k, v = torch.cat([k_new, cache_k], dim=2), torch.cat([v_new, cache_v], dim=2)
        else:
            k = torch.cat([cache_k, k_new], dim=cat_dim)
            v = torch.cat([cache_v, v_new], dim=cat_dim)
        keys, values = {"all": (k, v), "cache": (cache_k, cache_v), "new": (k_new, v_new)}[attend]
        s = heads(proj(x, w_q)) @ keys.transpose(-2, -1)
        s = s / {"head": dh**0.5, "model": d**0.5, "none": 1.0}[scale]
        if mask_first:
            n = keys.shape[2]
            s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril()[:1], float("-inf"))
        o = s.softmax(-1) @ values
        o = o.permute(0, 2, 3, 1).reshape(b, 1, d) if strided else o.transpose(1, 2).reshape(
            b, 1, d)
        if w_o:
            o = proj(o, w_o_)
        if store == "old":
            k, v = cache_k, cache_v
        return (o, k, v) if order == "kv" else (o, v, k)
    return fn


KV_MISTAKES = [
    (_kv(order="vk"), "you returned (output, value cache, key cache)"),
    (_kv(attend="cache", store="old"), "the new position is neither attended to nor cached"),
    (_kv(store="old"), "you returned the old caches"),
    (_kv(attend="cache"), "you attended to the cache before appending"),
    (_kv(attend="new"), "your output ignores the cached positions"),
    (_kv(store="prepend"), "you put the new key and value in front of the cache"),
    (_kv(mask_first=True), "you masked the new query down to position 0"),
    (_kv(raw=True), "you cached x itself"),
    (_kv(swap=True), "you swapped w_k and w_v"),
    (_kv(transpose_w=False), "project with x @ w.T"),
    (_kv(scale="model"), "you scaled by √d_model"),
    (_kv(scale="none"), "the scores are not scaled"),
    (_kv(strided=True), "each head got every H-th feature"),
    (_kv(w_o=False), "you left out the output projection"),
    (_kv(cat_dim=1), "append along the length, dim=2"),
    (_kv(cat_dim=-1), "append along the length, dim=2"),
]


@pytest.mark.parametrize("fn, fragment", KV_MISTAKES, ids=[f for _, f in KV_MISTAKES])
def test_kv_cache_step_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_kv_cache_step, fn, fragment, capsys)


@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_kv_cache_reference_equals_recomputation(num_heads):
    """Step by step from an empty cache, the checker's reference gives the
    outputs of causal torch.nn.MultiheadAttention over the whole sequence."""
    from minitransformer.exercises.kv_cache import _reference
    b, n, d = 2, 6, 8
    x = torch.randn(b, n, d)
    w_q, w_k, w_v, w_o = (torch.randn(d, d) / d**0.5 for _ in range(4))
    ref = torch.nn.MultiheadAttention(d, num_heads, bias=False, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        ref.out_proj.weight.copy_(w_o)
        blocked = torch.ones(n, n, dtype=torch.bool).triu(1)  # True = blocked
        expected = ref(x, x, x, attn_mask=blocked, need_weights=False)[0]
    cache_k = cache_v = torch.zeros(b, num_heads, 0, d // num_heads)
    outputs = []
    for i in range(n):
        out, cache_k, cache_v = _reference(x[:, i:i + 1], cache_k, cache_v, w_q, w_k, w_v, w_o,
                                           num_heads)
        outputs.append(out)
    torch.testing.assert_close(torch.cat(outputs, dim=1), expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(cache_k, _split(x @ w_k.T, num_heads))
