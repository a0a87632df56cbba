"""Mask helpers, and their conversion to PyTorch's two conventions."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minitransformer as mt


@pytest.mark.parametrize("length", [1, 2, 7])
def test_causal_mask_closed_form(length):
    mask = mt.causal_mask(length)
    assert mask.dtype == torch.bool and mask.shape == (length, length)
    for i in range(length):
        for j in range(length):
            assert bool(mask[i, j]) == (j <= i)


def test_causal_mask_is_negation_of_torch_square_subsequent_mask():
    torch_mask = nn.Transformer.generate_square_subsequent_mask(6)  # float, -inf above diagonal
    assert torch.equal(mt.to_torch_bool_mask(mt.causal_mask(6)), torch.isinf(torch_mask))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_causal_mask_rejects_bad_length(bad):
    with pytest.raises(ValueError, match="positive int"):
        mt.causal_mask(bad)


def test_padding_mask_shape_and_values():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 8, 9]])
    mask = mt.padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [True, False, True, True]]
    assert torch.equal(mt.torch_key_padding_mask(tokens, 0), tokens == 0)


def test_padding_mask_rejects_bad_input():
    with pytest.raises(ValueError, match=r"\(batch, len\)"):
        mt.padding_mask(torch.tensor([1, 2, 0]), 0)
    with pytest.raises(TypeError):
        mt.padding_mask([[1, 2]], 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_bool_mask_conversion_agrees_with_both_pytorch_conventions(seed):
    """Our True=attend mask gives the same result in F.scaled_dot_product_attention
    (True=attend) as its negation in nn.MultiheadAttention (True=blocked)."""
    torch.manual_seed(seed)
    d, h, lq, lk = 8, 2, 5, 6
    mha = nn.MultiheadAttention(d, h, batch_first=True).eval()
    ours = mt.MultiHeadAttention(d, h).eval()
    mt.load_torch_attention(ours, mha)
    q, kv = torch.randn(3, lq, d), torch.randn(3, lk, d)
    mask = torch.rand(lq, lk) > 0.4
    mask[:, 0] = True  # no fully masked rows (PyTorch gives NaN there)
    expected, _ = mha(q, kv, kv, attn_mask=mt.to_torch_bool_mask(mask))
    got, _ = ours(q, kv, kv, mask=mask)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    # and the additive form
    got_add, _ = ours(q, kv, kv, mask=mt.to_additive_mask(mask))
    torch.testing.assert_close(got_add, expected, rtol=1e-5, atol=1e-5)
    # F.sdpa uses our convention directly
    qh = torch.randn(3, h, lq, 4)
    kh, vh = torch.randn(3, h, lk, 4), torch.randn(3, h, lk, 4)
    ref = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
    torch.testing.assert_close(mt.scaled_dot_product_attention(qh, kh, vh, mask)[0], ref)


def test_conversions_reject_non_bool():
    with pytest.raises(TypeError, match="bool"):
        mt.to_torch_bool_mask(torch.zeros(2, 2))
    with pytest.raises(TypeError, match="bool"):
        mt.to_additive_mask(torch.zeros(2, 2))
