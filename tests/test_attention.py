"""Scaled dot-product and multi-head attention against PyTorch's own."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minitransformer as mt


def _mask(kind, b, lq, lk):
    if kind is None:
        return None
    if kind == "causal":
        # bottom-right aligned, so that no query row is fully masked
        return torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=max(lk - lq, 0))
    if kind == "padding":
        m = torch.ones(b, 1, 1, lk, dtype=torch.bool)
        m[0, ..., lk - min(2, lk - 1):] = False  # keep at least one key
        return m
    if kind == "random":
        m = torch.rand(b, 1, lq, lk) > 0.5
        m[..., 0] = True
        return m
    if kind == "float":
        return torch.randn(lq, lk)
    raise ValueError(kind)


SHAPES = [(1, 1, 1, 4), (2, 5, 5, 8), (3, 4, 7, 16)]
MASKS = [None, "causal", "padding", "random", "float"]


@pytest.mark.parametrize("b,lq,lk,d", SHAPES)
@pytest.mark.parametrize("kind", MASKS)
def test_sdpa_matches_torch(b, lq, lk, d, kind):
    q, k, v = torch.randn(b, 2, lq, d), torch.randn(b, 2, lk, d), torch.randn(b, 2, lk, 3)
    mask = _mask(kind, b, lq, lk)
    out, weights = mt.scaled_dot_product_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert weights.shape == (b, 2, lq, lk)
    torch.testing.assert_close(weights.sum(-1), torch.ones(b, 2, lq))
    assert (weights >= 0).all()


def test_sdpa_closed_form_one_query():
    q = torch.tensor([[1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    v = torch.tensor([[10.0], [20.0]])
    _, w = mt.scaled_dot_product_attention(q, k, v)
    e = math.exp(1 / math.sqrt(2))
    torch.testing.assert_close(w, torch.tensor([[e / (e + 1), 1 / (e + 1)]]))


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[0, 1] = False
    q.requires_grad_(True)
    out, w = mt.scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.equal(out[0, 1], torch.zeros(4)) and torch.equal(w[0, 1], torch.zeros(5))
    out.sum().backward()
    assert not torch.isnan(q.grad).any()
    # the same through the float form and through the fused path of the module
    out_f, _ = mt.scaled_dot_product_attention(q, k, v, mt.to_additive_mask(mask))
    torch.testing.assert_close(out_f, out)
    mha = mt.MultiHeadAttention(8, 2).eval()
    x, mem = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    fused, _ = mha(x, mem, mem, mask)
    readable, _ = mha(x, mem, mem, mask, need_weights=True)
    assert not torch.isnan(fused).any()
    torch.testing.assert_close(fused, readable)


@pytest.mark.parametrize("dtype", [torch.float64])
def test_sdpa_gradcheck(dtype):
    q = torch.randn(2, 3, 4, dtype=dtype, requires_grad=True)
    k = torch.randn(2, 5, 4, dtype=dtype, requires_grad=True)
    v = torch.randn(2, 5, 3, dtype=dtype, requires_grad=True)
    mask = torch.rand(2, 3, 5) > 0.3
    mask[..., 0] = True
    assert torch.autograd.gradcheck(
        lambda q, k, v: mt.scaled_dot_product_attention(q, k, v, mask)[0], (q, k, v)
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "b,lq,lk,d,h", [(1, 1, 1, 8, 1), (3, 1, 9, 32, 8), (2, 5, 5, 16, 4), (3, 4, 9, 32, 8)]
)
@pytest.mark.parametrize("kind", [None, "causal", "padding", "random"])
@pytest.mark.parametrize("self_attention", [True, False])
def test_mha_matches_nn_multiheadattention(seed, b, lq, lk, d, h, kind, self_attention):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d, h, batch_first=True).eval()
    ours = mt.MultiHeadAttention(d, h).eval()
    mt.load_torch_attention(ours, ref)
    if self_attention:
        lk = lq
        q = k = v = torch.randn(b, lq, d)
    else:
        q, k, v = torch.randn(b, lq, d), torch.randn(b, lk, d), torch.randn(b, lk, d)
    mask = _mask(kind, b, lq, lk)
    kw = {}
    if kind == "padding":
        kw["key_padding_mask"] = mt.to_torch_bool_mask(mask[:, 0, 0])
    elif mask is not None:
        m = mask if mask.dim() == 2 else mask[:, 0].repeat_interleave(h, dim=0)
        kw["attn_mask"] = mt.to_torch_bool_mask(m)
    expected, expected_w = ref(q, k, v, need_weights=True, average_attn_weights=False, **kw)
    fused, none = ours(q, k, v, mask)
    readable, weights = ours(q, k, v, mask, need_weights=True)
    assert none is None
    torch.testing.assert_close(fused, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(readable, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weights, expected_w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_one_query_against_a_cache_equals_the_readable_path(kind):
    # a decoding step: one query against cached keys/values; the readable
    # path (checked against PyTorch above) is the reference, here with a
    # float mask and a row whose keys are all blocked (output zeros)
    torch.manual_seed(0)
    mha = mt.MultiHeadAttention(32, 8).eval()
    query, memory = torch.randn(4, 1, 32), torch.randn(4, 9, 32)
    keep = torch.ones(4, 1, 1, 9, dtype=torch.bool)
    keep[1, ..., 6:] = False
    keep[3] = False  # every key blocked
    mask = keep if kind == "bool" else torch.zeros(4, 1, 1, 9).masked_fill(~keep, float("-inf"))
    if kind == "float":
        mask = mask + torch.randn(4, 1, 1, 9).masked_fill(~keep, 0.0)
    expected, _ = mha(query, memory, memory, mask, need_weights=True)
    with torch.no_grad():
        cached, _ = mha(query, None, None, mask, cache=mha.project_kv(memory))
    torch.testing.assert_close(cached, expected, rtol=1e-5, atol=1e-5)
    assert not cached.isnan().any()
    torch.testing.assert_close(cached[3], mha.w_o.bias.expand(1, 32))  # zeros through w_o


def test_self_attention_one_position_at_a_time_with_a_cache_equals_causal_full_pass():
    # the decoder's incremental path: each call appends its keys/values to the cache
    torch.manual_seed(0)
    mha = mt.MultiHeadAttention(16, 4).eval()
    x = torch.randn(3, 6, 16)
    full, _ = mha(x, x, x, mt.causal_mask(6))
    cache = mt.KVCache(torch.zeros(3, 4, 0, 4), torch.zeros(3, 4, 0, 4))
    with torch.no_grad():
        steps = [mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0]
                 for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache.k.shape == (3, 4, 6, 4)
    # two new positions at once: the mask spans the cached and the new keys
    cache = mt.KVCache(torch.zeros(3, 4, 0, 4), torch.zeros(3, 4, 0, 4))
    with torch.no_grad():
        first, _ = mha(x[:, :4], x[:, :4], x[:, :4], mt.causal_mask(4), cache=cache)
        last, _ = mha(x[:, 4:], x[:, 4:], x[:, 4:], mt.causal_mask(6)[4:], cache=cache)
    torch.testing.assert_close(torch.cat([first, last], 1), full, rtol=1e-5, atol=1e-5)


def test_fused_kernel_gives_zeros_for_fully_masked_rows():
    # MultiHeadAttention passes masks to F.scaled_dot_product_attention without
    # looking at their values; that relies on PyTorch's kernel giving zeros (not
    # NaN) for a query whose keys are all blocked, in value and in gradient.
    q = torch.randn(2, 2, 3, 4, requires_grad=True)
    k, v = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    keep = torch.ones(2, 1, 3, 5, dtype=torch.bool)
    keep[1, :, 2] = False
    for mask in (keep, mt.to_additive_mask(keep)):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert torch.equal(out[1, :, 2], torch.zeros(2, 4))
        (grad,) = torch.autograd.grad(out.sum(), q)
        assert not grad.isnan().any() and torch.equal(grad[1, :, 2], torch.zeros(2, 4))


@pytest.mark.parametrize("mask_shape", [None, (3, 1, 1, 6), (3, 1, 5, 6), (3, 4, 5, 6),
                                        (5, 6)])
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_short_attention_equals_pytorchs_kernel_with_dead_rows_and_groups(mask_shape, kv_heads):
    """The written-out path of short sequences against F.scaled_dot_product_attention
    in float64: values and gradients, every mask shape the model passes (and a
    2-d one), a query with no key left (zeros, zero gradients), grouped heads."""
    from minitransformer.attention import short_attention

    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 4, 5, 8, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(3, kv_heads, 6, 8, generator=g, dtype=torch.float64,
                        requires_grad=True) for _ in range(2))
    mask = None
    if mask_shape is not None:
        mask = torch.rand(mask_shape, generator=g) < 0.7
        mask[..., -1, :] = False  # the last query (of the first row, at least) sees no key
        mask[..., 0, 0] = True
    ours = short_attention(q, k, v, mask, enable_gqa=kv_heads != 4)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=kv_heads != 4)
    torch.testing.assert_close(ours, theirs)
    if mask is not None and mask.shape[-2] > 1:  # a mask per query: the last one has none
        assert torch.equal(ours[0, :, -1], torch.zeros(4, 8))
    grad = torch.randn(ours.shape, generator=g, dtype=torch.float64)
    mine = torch.autograd.grad(ours, (q, k, v), grad)
    reference = torch.autograd.grad(theirs, (q, k, v), grad)
    for a, b in zip(mine, reference, strict=True):
        assert not a.isnan().any()
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_short_attention_blocks_keys_whatever_the_scores(dtype):
    """A blocked key gets no weight even when the scores are huge (activations
    of 10⁴, as in a deep stack without normalisation: scores of about 10¹⁰,
    beyond any fixed "large negative" score)."""
    from minitransformer.attention import short_attention

    g = torch.Generator().manual_seed(0)
    q, k = (1e4 * torch.randn(2, 2, 4, 8, generator=g, dtype=dtype) for _ in range(2))
    v = torch.randn(2, 2, 4, 8, generator=g, dtype=dtype)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool).tril()
    out = short_attention(q, k, v, mask)
    weights = mt.masked_softmax(q @ k.transpose(-2, -1) / 8**0.5, mask)
    assert torch.equal(weights.masked_select(~mask.expand_as(weights)),
                       torch.zeros(int((~mask.expand_as(weights)).sum()), dtype=dtype))
    torch.testing.assert_close(out, weights @ v)
    assert torch.isfinite(out).all()


def test_fused_attention_takes_the_short_path_on_a_cpu_up_to_its_length(monkeypatch):
    """Which kernel runs is read from metadata: in training, the short path for
    at most SHORT_ON_CPU queries and keys with a bool mask or none; PyTorch's
    beyond that, for a float mask, or without gradients."""
    import minitransformer.attention as attention

    calls = []
    real = attention.short_attention
    monkeypatch.setattr(attention, "short_attention",
                        lambda *a, **k: calls.append("short") or real(*a, **k))
    n = attention.SHORT_ON_CPU
    for lq, lk, kind, expected in [(n, n, "bool", ["short"]), (1, n, None, ["short"]),
                                   (n, n + 1, "bool", []), (n + 1, 1, "bool", []),
                                   (4, 4, "float", [])]:
        for grad, taken in ((True, expected), (False, [])):  # without gradients: PyTorch's
            calls.clear()
            q, k = torch.randn(1, 2, lq, 4), torch.randn(1, 2, lk, 4).requires_grad_(grad)
            keep = torch.ones(1, 1, lq, lk, dtype=torch.bool)
            mask = {"bool": keep, "float": mt.to_additive_mask(keep), None: None}[kind]
            out = attention.fused_attention(q, k, k, mask)
            assert calls == taken, (lq, lk, kind, grad)
            torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, k,
                                                                           attn_mask=mask))
    calls.clear()
    q = torch.randn(1, 2, 4, 4, requires_grad=True)
    with torch.no_grad():  # inputs that require grad, but nothing is recorded
        attention.fused_attention(q, q, q, None)
    assert calls == []


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masked_softmax_is_softmax_over_allowed_keys_and_zero_for_dead_rows(kind):
    scores = torch.randn(3, 4, 6, requires_grad=True)
    keep = torch.rand(3, 4, 6) > 0.4
    keep[..., 0] = True
    keep[1, 2] = False  # a row with no key allowed
    mask = keep if kind == "bool" else mt.to_additive_mask(keep)
    w = mt.masked_softmax(scores, mask)
    expected = torch.where(keep, scores.exp(), 0.0)
    expected = expected / expected.sum(-1, keepdim=True).clamp_min(1e-30)
    torch.testing.assert_close(w, expected)
    assert torch.equal(w[1, 2], torch.zeros(6))
    (grad,) = torch.autograd.grad((w * torch.randn(3, 4, 6)).sum(), scores)
    assert not grad.isnan().any() and torch.equal(grad[1, 2], torch.zeros(6))


def test_mha_three_d_mask_applies_to_every_head():
    mha = mt.MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 4, 8)
    mask3 = torch.rand(2, 4, 4) > 0.5
    mask3[..., 0] = True
    a, _ = mha(x, x, x, mask3)
    b, _ = mha(x, x, x, mask3[:, None])
    torch.testing.assert_close(a, b)


def test_mha_parameter_names_and_count():
    mha = mt.MultiHeadAttention(16, 4)
    names = {n for n, _ in mha.named_parameters()}
    assert names == {f"w_{p}.{t}" for p in "qkvo" for t in ("weight", "bias")}
    assert sum(p.numel() for p in mha.parameters()) == 4 * (16 * 16 + 16)


def test_mha_train_mode_dropout_is_random_but_shape_preserving():
    mha = mt.MultiHeadAttention(8, 2, dropout=0.5).train()
    x = torch.randn(2, 6, 8)
    a, _ = mha(x, x, x)
    b, _ = mha(x, x, x)
    assert a.shape == (2, 6, 8) and not torch.allclose(a, b)


# --- bad input -----------------------------------------------------------------

def test_sdpa_errors():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    with pytest.raises(ValueError, match="share their last dimension"):
        mt.scaled_dot_product_attention(q, torch.randn(2, 5, 3), v)
    with pytest.raises(ValueError, match="same length"):
        mt.scaled_dot_product_attention(q, k, torch.randn(2, 4, 6))
    with pytest.raises(ValueError, match="does not broadcast"):
        mt.scaled_dot_product_attention(q, k, v, torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        mt.scaled_dot_product_attention(q, k, v, torch.ones(3, 5, dtype=torch.long))
    with pytest.raises(TypeError, match="tensor"):
        mt.scaled_dot_product_attention(q.tolist(), k, v)
    with pytest.raises(ValueError, match="at least 2 dims"):
        mt.scaled_dot_product_attention(torch.randn(4), k, v)


def test_mha_errors():
    with pytest.raises(ValueError, match="divisible"):
        mt.MultiHeadAttention(10, 3)
    mha = mt.MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="d_model=8"):
        mha(torch.randn(2, 3, 6), x, x)
    with pytest.raises(ValueError, match="same batch and length"):
        mha(x, x, torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match="same batch size"):
        mha(torch.randn(3, 3, 8), x, x)
    with pytest.raises(ValueError, match="does not broadcast"):
        mha(x, x, x, torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        mha(x, x, x, torch.ones(3, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match="only with a cache"):
        mha(x, None, None)
    cache = mha.project_kv(torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match="does not broadcast"):
        mha(x, None, None, torch.ones(2, 1, 3, 4, dtype=torch.bool), cache=cache)


def test_fused_attention_runs_bf16_cpu_inputs_in_float32():
    """Under bf16 autocast on a CPU, attention itself computes in float32
    (PyTorch's CPU kernel is slow in bf16): the result equals float32
    attention of the same bf16 inputs, rounded once, and gradients flow."""
    from minitransformer.attention import fused_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g).to(torch.bfloat16).requires_grad_()
               for _ in range(3))
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused_attention(q, k, v, mask)
    assert out.dtype == torch.bfloat16
    expected = mt.scaled_dot_product_attention(q.float(), k.float(), v.float(), mask)[0]
    torch.testing.assert_close(out, expected.to(torch.bfloat16))
    out.float().sum().backward()
    assert q.grad is not None and q.grad.dtype == torch.bfloat16
    x = torch.randn(2, 4, 5, 8, generator=g)  # float32 inputs: the plain kernel
    torch.testing.assert_close(fused_attention(x, x, x, mask),
                               mt.scaled_dot_product_attention(x, x, x, mask)[0])


@pytest.mark.parametrize("bias", [True, False])
def test_stacked_linear_equals_each_layer_alone(bias):
    """One matmul of stacked weights gives each layer's own output (also for
    layers of different output widths)."""
    from minitransformer.attention import stacked_linear

    torch.manual_seed(0)
    layers = [nn.Linear(8, 8, bias=bias), nn.Linear(8, 3, bias=bias), nn.Linear(8, 5, bias=bias)]
    x = torch.randn(2, 4, 8)
    outs = stacked_linear(x, *layers)
    assert [o.shape for o in outs] == [(2, 4, 8), (2, 4, 3), (2, 4, 5)]
    for out, layer in zip(outs, layers, strict=True):
        torch.testing.assert_close(out, layer(x))


def test_projection_of_a_shared_input_equals_separate_inputs():
    """``project`` stacks the weights when one tensor is passed as query, key
    and value (or as key and value): the same as three separate projections."""
    torch.manual_seed(0)
    mha = mt.MultiHeadAttention(8, 2)
    x, m = torch.randn(2, 5, 8), torch.randn(2, 6, 8)
    for shared, separate in [((x, x, x), (x, x.clone(), x.clone())),
                             ((x, m, m), (x, m, m.clone()))]:
        for a, b in zip(mha.project(*shared), mha.project(*separate), strict=True):
            torch.testing.assert_close(a, b)
