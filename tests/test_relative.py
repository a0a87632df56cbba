"""Relative position representations (Shaw et al. 2018) against a loop over
the paper's equations 3 and 4, and their invariants."""

import math

import pytest
import torch
from decoding_helpers import assert_incremental_matches_full

import minitransformer as mt
from minitransformer.variants.relative import (
    RelativeMultiHeadAttention,
    relative_position_index,
    use_relative_positions,
)


def reference(attn: RelativeMultiHeadAttention, x: torch.Tensor, mask=None) -> torch.Tensor:
    """Shaw et al. (2018), eqs. 3-4, one query, key and head at a time."""
    b, n, d = x.shape
    h, dh, kk = attn.num_heads, attn.head_dim, attn.max_distance
    q, k, v = attn.w_q(x), attn.w_k(x), attn.w_v(x)
    out = torch.zeros(b, n, d, dtype=x.dtype)
    for bi in range(b):
        for hi in range(h):
            sl = slice(hi * dh, (hi + 1) * dh)
            for i in range(n):
                e = torch.empty(n, dtype=x.dtype)
                for j in range(n):
                    r = max(-kk, min(kk, j - i)) + kk
                    e[j] = q[bi, i, sl] @ (k[bi, j, sl] + attn.rel_k.weight[r]) / math.sqrt(dh)
                    if mask is not None and not mask[bi, j]:
                        e[j] = float("-inf")
                alpha = e.softmax(0)
                for j in range(n):
                    r = max(-kk, min(kk, j - i)) + kk
                    rel_v = attn.rel_v.weight[r] if attn.rel_v is not None else 0.0
                    out[bi, i, sl] += alpha[j] * (v[bi, j, sl] + rel_v)
    return attn.w_o(out)


@pytest.mark.parametrize("heads,max_distance,values", [(1, 2, True), (2, 3, True), (4, 1, False)])
def test_matches_loop_over_the_papers_equations(heads, max_distance, values):
    attn = RelativeMultiHeadAttention(8, heads, max_distance, values=values).double().eval()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    ours, _ = attn(x, x, x)
    torch.testing.assert_close(ours, reference(attn, x))


def test_padding_mask_matches_reference_and_hides_padding():
    attn = RelativeMultiHeadAttention(8, 2, 3).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    ours, _ = attn(x, x, x, mask=keep[:, None, None, :])
    torch.testing.assert_close(ours, reference(attn, x, keep))
    # changing the padded positions changes nothing at the real ones
    y = x.clone()
    y[1, 3:] = torch.randn(2, 8, dtype=torch.float64)
    other, _ = attn(y, y, y, mask=keep[:, None, None, :])
    torch.testing.assert_close(other[1, :3], ours[1, :3])


def test_zero_tables_give_plain_multi_head_attention():
    rel = RelativeMultiHeadAttention(16, 4, 5).eval()
    plain = mt.MultiHeadAttention(16, 4).eval()
    plain.load_state_dict(rel.state_dict(), strict=False)
    with torch.no_grad():
        rel.rel_k.weight.zero_()
        rel.rel_v.weight.zero_()
    x = torch.randn(3, 7, 16)
    mask = mt.causal_mask(7)
    torch.testing.assert_close(rel(x, x, x, mask)[0], plain(x, x, x, mask)[0])


def test_sees_order_unlike_plain_attention():
    rel = RelativeMultiHeadAttention(16, 4, 4).eval()
    plain = mt.MultiHeadAttention(16, 4).eval()
    x = torch.randn(1, 6, 16)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    xp = x[:, perm]
    torch.testing.assert_close(plain(xp, xp, xp)[0], plain(x, x, x)[0][:, perm])
    diff = (rel(xp, xp, xp)[0] - rel(x, x, x)[0][:, perm]).abs().max()
    assert diff > 1e-3


def test_output_depends_only_on_offsets_not_absolute_positions():
    # With a causal mask, query i sees keys 0..i. Prepending tokens that are
    # blocked for everyone (padding) shifts absolute positions but no offset.
    attn = RelativeMultiHeadAttention(8, 2, 2).eval()
    x = torch.randn(1, 5, 8)
    prefix = torch.randn(1, 3, 8)
    y = torch.cat([prefix, x], dim=1)
    keep = torch.tensor([[False] * 3 + [True] * 5])[:, None, None, :]
    out_x, _ = attn(x, x, x)
    out_y, _ = attn(y, y, y, mask=keep)
    torch.testing.assert_close(out_y[:, 3:], out_x)


def test_relative_position_index_is_clipped_offset():
    idx = relative_position_index(4, 6, 2)
    for i in range(4):
        for j in range(6):
            assert idx[i, j] == max(-2, min(2, j - i)) + 2
    with pytest.raises(ValueError, match="max_distance"):
        relative_position_index(3, 3, 0)


def test_weights_rows_sum_to_one_and_dead_rows_are_zero():
    attn = RelativeMultiHeadAttention(8, 2, 2).eval()
    x = torch.randn(2, 4, 8)
    keep = torch.tensor([[True, True, False, False], [False] * 4])
    out, w = attn(x, x, x, mask=keep[:, None, None, :], need_weights=True)
    assert w.shape == (2, 2, 4, 4)
    torch.testing.assert_close(w[0].sum(-1), torch.ones(2, 4))
    assert not torch.isnan(out).any() and torch.all(w[1] == 0)


def test_gradcheck():
    attn = RelativeMultiHeadAttention(4, 2, 2).double()
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: attn(t, t, t)[0], (x,))


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="max_distance"):
        RelativeMultiHeadAttention(8, 2, 0)
    attn = RelativeMultiHeadAttention(8, 2, 2)
    with pytest.raises(ValueError, match="d_model=8"):
        attn(torch.randn(1, 3, 6), torch.randn(1, 3, 6), torch.randn(1, 3, 6))


def test_use_relative_positions_swaps_self_attention_only():
    cfg = mt.TransformerConfig(12, 12, d_model=16, num_heads=2, num_encoder_layers=2,
                               num_decoder_layers=1, d_ff=32, dropout=0.0, positional="none")
    model = mt.Transformer(cfg).eval()
    old_q = model.encoder.layers[0].self_attn.w_q.weight.clone()
    use_relative_positions(model, max_distance=3)
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        assert isinstance(layer.self_attn, RelativeMultiHeadAttention)
    assert not isinstance(model.decoder.layers[0].cross_attn, RelativeMultiHeadAttention)
    torch.testing.assert_close(model.encoder.layers[0].self_attn.w_q.weight, old_q)
    src = torch.randint(4, 12, (2, 5))
    tgt = torch.randint(4, 12, (2, 4))
    assert model(src, tgt).shape == (2, 4, 12)
    # the encoder now tells orders apart without any absolute position
    perm = torch.tensor([4, 2, 0, 1, 3])
    mem, mem_p = model.encode(src), model.encode(src[:, perm])
    assert (mem_p - mem[:, perm]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="self_attn"):
        use_relative_positions(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("values", [True, False])
def test_cached_decoding_equals_full_decoding(values):
    # a cached step's query sits after the cached keys (offset Lk - Lq)
    cfg = mt.TransformerConfig(12, 12, d_model=16, num_heads=2, num_encoder_layers=1,
                               num_decoder_layers=2, d_ff=32, dropout=0.0, positional="none")
    torch.manual_seed(0)
    model = use_relative_positions(mt.Transformer(cfg), max_distance=2, values=values).eval()
    src = torch.randint(4, 12, (3, 5))
    src[1, 3:] = 0
    tgt = torch.randint(4, 12, (3, 7))
    tgt[:, 0] = 1
    assert_incremental_matches_full(model, src, tgt)


def test_index_with_offset_places_queries_after_the_cached_keys():
    idx = relative_position_index(2, 5, 4, offset=3)
    assert idx.tolist() == [[1, 2, 3, 4, 5], [0, 1, 2, 3, 4]]  # query 0 at position 3
