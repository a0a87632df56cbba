"""Additive segment / language embeddings."""

import pytest
import torch
import torch.nn.functional as F

from minitransformer.variants.segment import SegmentEmbedding


def test_adding_equals_one_hot_times_table():
    seg = SegmentEmbedding(3, 8)
    x = torch.randn(2, 5, 8)
    ids = torch.tensor([[0, 0, 1, 1, 2], [2, 1, 0, 0, 0]])
    expected = x + F.one_hot(ids, 3).float() @ seg.embedding.weight
    torch.testing.assert_close(seg(x, ids), expected)


def test_same_token_different_segments_differ_and_gradients_reach_only_used_rows():
    seg = SegmentEmbedding(3, 4)
    x = torch.ones(1, 2, 4)
    out = seg(x, torch.tensor([[0, 1]]))
    assert not torch.allclose(out[0, 0], out[0, 1])
    out.sum().backward()
    assert seg.embedding.weight.grad[2].abs().sum() == 0
    assert seg.embedding.weight.grad[:2].abs().sum() > 0


def test_errors():
    seg = SegmentEmbedding(2, 4)
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        seg(torch.randn(1, 3, 4), torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="shape"):
        seg(torch.randn(1, 3, 4), torch.tensor([[0, 1]]))
    with pytest.raises(TypeError, match="integer"):
        seg(torch.randn(1, 3, 4), torch.zeros(1, 3))
    with pytest.raises(ValueError, match="num_segments"):
        SegmentEmbedding(0, 4)
