"""Additive, dot-product and general attention scoring against independent references."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from minitransformer.attention import masked_softmax
from minitransformer.masks import padding_mask
from minitransformer.rnn.attention_scorers import (
    AdditiveAttention,
    DotProductAttention,
    GeneralAttention,
)


def _qkv(b=2, lq=3, lk=5, dq=4, dk=4, dv=6, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, lq, dq, generator=g, dtype=dtype)
    k = torch.randn(b, lk, dk, generator=g, dtype=dtype)
    v = torch.randn(b, lk, dv, generator=g, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("seed", [0, 1])
def test_scaled_dot_product_matches_torch(seed):
    q, k, v = _qkv(seed=seed)
    mask = torch.rand(2, 3, 5, generator=torch.Generator().manual_seed(seed)) > 0.3
    mask[..., 0] = True  # at least one key per row
    out, w = DotProductAttention(scale=True)(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref)
    assert torch.all(w[~mask] == 0)


def test_unscaled_dot_product_is_sqrt_d_sharper():
    q, k, v = _qkv(dq=16, dk=16)
    _, w = DotProductAttention(scale=False)(q, k, v)
    ref = torch.softmax(torch.einsum("bqd,bkd->bqk", q, k), dim=-1)
    torch.testing.assert_close(w, ref)
    _, w_scaled = DotProductAttention(scale=True)(q, k, v)
    ref_scaled = torch.softmax(torch.einsum("bqd,bkd->bqk", q, k) / 4.0, dim=-1)
    torch.testing.assert_close(w_scaled, ref_scaled)


def test_general_is_bilinear_form():
    q, k, v = _qkv(dq=4, dk=7)
    att = GeneralAttention(4, 7)
    W = att.w.weight  # (Dq, Dk)
    scores = torch.einsum("bqi,ij,bkj->bqk", q, W, k)
    torch.testing.assert_close(att.score(q, k), scores)
    out, w = att(q, k, v)
    torch.testing.assert_close(w, scores.softmax(-1))
    torch.testing.assert_close(out, scores.softmax(-1) @ v)


def test_general_with_identity_equals_unscaled_dot():
    q, k, v = _qkv()
    att = GeneralAttention(4)
    with torch.no_grad():
        att.w.weight.copy_(torch.eye(4))
    torch.testing.assert_close(att(q, k, v)[0], DotProductAttention(scale=False)(q, k, v)[0])


def test_additive_matches_pairwise_loop():
    q, k, v = _qkv(dq=3, dk=5)
    att = AdditiveAttention(3, 5, 8)
    Wq, Wk, bk, w = att.w_q.weight, att.w_k.weight, att.w_k.bias, att.w.weight[0]
    b, lq, lk = q.shape[0], q.shape[1], k.shape[1]
    scores = torch.empty(b, lq, lk)
    for i in range(b):
        for s in range(lq):
            for t in range(lk):
                scores[i, s, t] = w @ torch.tanh(Wq @ q[i, s] + Wk @ k[i, t] + bk)
    torch.testing.assert_close(att.score(q, k), scores)
    out, weights = att(q, k, v)
    torch.testing.assert_close(weights, scores.softmax(-1))
    torch.testing.assert_close(out, scores.softmax(-1) @ v)


def test_additive_gradcheck():
    q, k, v = _qkv(b=1, lq=2, lk=3, dq=3, dk=2, dv=2, dtype=torch.float64)
    att = AdditiveAttention(3, 2, 4).double()
    for t in (q, k, v):
        t.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b_, c: att(a, b_, c)[0], (q, k, v))


@pytest.mark.parametrize(
    "make",
    [DotProductAttention, lambda: GeneralAttention(4), lambda: AdditiveAttention(4, 4, 5)],
)
def test_padding_mask_ignores_padded_keys(make):
    torch.manual_seed(0)
    att = make()
    q, k, v = _qkv()
    tokens = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    out, w = att(q, k, v, padding_mask(tokens, 0))  # (B, 1, 1, Lk) accepted
    assert torch.all(w[0, :, 3:] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3))
    # Changing what sits at padded positions changes nothing.
    k2, v2 = k.clone(), v.clone()
    k2[0, 3:] = 100.0
    v2[0, 3:] = -100.0
    out2, _ = att(q, k2, v2, padding_mask(tokens, 0))
    torch.testing.assert_close(out, out2)
    # Same as attending to the real keys alone.
    out_short, _ = att(q[:1], k[:1, :3], v[:1, :3])
    torch.testing.assert_close(out[:1], out_short)


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = _qkv()
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[1, 2] = False
    for att in (DotProductAttention(), AdditiveAttention(4, 4, 3)):
        out, w = att(q, k, v, mask)
        assert not torch.isnan(out).any()
        assert torch.all(w[1, 2] == 0) and torch.all(out[1, 2] == 0)


def test_masked_softmax_equals_softmax_over_allowed_keys():
    scores = torch.randn(4, 6)
    mask = torch.tensor([True, False, True, True, False, True])
    w = masked_softmax(scores, mask)
    ref = torch.zeros(4, 6)
    ref[:, mask] = scores[:, mask].softmax(-1)
    torch.testing.assert_close(w, ref)
    assert math.isclose(float(masked_softmax(scores).sum()), 4.0, rel_tol=1e-6)


def test_clear_errors():
    q, k, v = _qkv(dq=4, dk=5)
    with pytest.raises(ValueError, match="share their last dimension"):
        DotProductAttention()(q, k, v)
    with pytest.raises(ValueError, match="expected query"):
        GeneralAttention(4, 4)(q, k, v)
    with pytest.raises(ValueError, match="keys must have last dimension 4"):
        AdditiveAttention(4, 4, 3)(q, k, v)
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="same batch and length"):
        DotProductAttention()(q, k, v[:, :2])
    with pytest.raises(TypeError, match="bool tensor"):
        DotProductAttention()(q, k, v, torch.ones(2, 3, 5))
    with pytest.raises(ValueError, match="does not broadcast"):
        DotProductAttention()(q, k, v, torch.ones(2, 3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(batch, len, dim\)"):
        DotProductAttention()(q[0], k, v)
