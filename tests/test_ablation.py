"""Removing the feed-forward networks, and counting parameters."""

import pytest
import torch

import minitransformer as mt
from minitransformer.instruments.ablation import NoFeedForward, remove_feed_forward
from minitransformer.instruments.summary import count_parameters


def _model(norm_first=False):
    cfg = mt.TransformerConfig(11, 11, d_model=16, num_heads=2, num_encoder_layers=2,
                               num_decoder_layers=2, d_ff=40, dropout=0.0, norm_first=norm_first)
    return mt.Transformer(cfg).eval()


def test_parameter_count_drops_by_exactly_the_ffns():
    model = _model()
    d, f, layers = 16, 40, 4
    before = count_parameters(model)
    assert before == sum(p.numel() for p in model.parameters())
    remove_feed_forward(model)
    assert before - count_parameters(model) == layers * (2 * d * f + f + d)
    assert all(isinstance(layer.ffn, NoFeedForward)
               for layer in [*model.encoder.layers, *model.decoder.layers])


@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_without_ffn_is_attention_then_add_and_norm(norm_first):
    model = remove_feed_forward(_model(norm_first))
    layer = model.encoder.layers[0]
    x = torch.randn(2, 5, 16)
    sa = layer.self_attn
    if norm_first:
        h = x + sa(layer.norm1(x), layer.norm1(x), layer.norm1(x))[0]
        expected = h  # x + 0
    else:
        h = layer.norm1(x + sa(x, x, x)[0])
        expected = layer.norm2(h)  # norm(x + 0)
    torch.testing.assert_close(layer(x), expected)


def test_errors():
    with pytest.raises(ValueError, match="PositionwiseFeedForward"):
        remove_feed_forward(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="nn.Module"):
        count_parameters(torch.zeros(3))


def test_count_parameters_counts_shared_tensors_once():
    cfg = mt.TransformerConfig(11, 11, d_model=16, num_heads=2, num_encoder_layers=1,
                               num_decoder_layers=1, d_ff=8, share_embeddings=True,
                               tie_output=True)
    model = mt.Transformer(cfg)
    unique = {id(p): p.numel() for m in model.modules() for p in m.parameters(recurse=False)}
    assert count_parameters(model) == sum(unique.values())
