"""The convolutional encoder against plain torch.nn.functional arithmetic,
closed forms (receptive field) and invariants (translation, padding)."""

import pytest
import torch
import torch.nn.functional as F

from minitransformer.layers import Encoder
from minitransformer.masks import padding_mask
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.variants.conv import ConvEncoder, ConvEncoderLayer


def _reference_layer(layer: ConvEncoderLayer, x: torch.Tensor) -> torch.Tensor:
    """The same layer written with F.conv1d, F.layer_norm and F.linear only."""
    d = layer.d_model

    def ln(t, norm):
        return F.layer_norm(t, (d,), norm.weight, norm.bias, norm.eps)

    def conv(t):
        pad = layer.dilation * (layer.kernel_size // 2)
        y = F.conv1d(
            F.pad(t.transpose(1, 2), (pad, pad)), layer.conv.weight, layer.conv.bias,
            dilation=layer.dilation,
        )
        return y.transpose(1, 2)

    def ffn(t):
        f = layer.ffn
        return F.linear(F.relu(F.linear(t, f.linear1.weight, f.linear1.bias)),
                        f.linear2.weight, f.linear2.bias)

    if layer.norm_first:
        x = x + conv(ln(x, layer.norm1))
        return x + ffn(ln(x, layer.norm2))
    x = ln(x + conv(x), layer.norm1)
    return ln(x + ffn(x), layer.norm2)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kernel_size,dilation", [(1, 1), (3, 1), (5, 2)])
def test_layer_matches_functional_reference(norm_first, kernel_size, dilation):
    layer = ConvEncoderLayer(16, kernel_size, 32, dropout=0.0, norm_first=norm_first,
                             dilation=dilation).eval()
    with torch.no_grad():
        layer.norm1.weight.normal_()
        layer.norm2.bias.normal_()
    x = torch.randn(3, 11, 16)
    torch.testing.assert_close(layer(x), _reference_layer(layer, x))


def _reach(encoder, length: int, position: int) -> torch.Tensor:
    """Bool (length,): which input positions output ``position`` depends on."""
    x = torch.randn(1, length, encoder.layers[0].d_model, requires_grad=True)
    y = encoder(x)[0, position]  # (D,)
    (y * torch.randn_like(y)).sum().backward()  # random projection: LN outputs sum to a constant
    return x.grad[0].abs().sum(-1) > 0


@pytest.mark.parametrize("num_layers,kernel_size,base", [(1, 3, 1), (3, 3, 1), (2, 5, 1),
                                                         (3, 3, 2), (4, 3, 2)])
def test_receptive_field_closed_form(num_layers, kernel_size, base):
    enc = ConvEncoder(num_layers, 8, kernel_size, 16, dropout=0.0, dilation_base=base).eval()
    expected = 1 + (kernel_size - 1) * sum(base**i for i in range(num_layers))
    assert enc.receptive_field == expected
    length, centre = 2 * expected + 5, expected + 2
    reach = _reach(enc, length, centre)
    half = (expected - 1) // 2
    assert reach.sum().item() == expected
    assert reach[centre - half] and reach[centre + half]
    assert not reach[centre - half - 1] and not reach[centre + half + 1]


def test_translation_equivariant_away_from_the_ends():
    enc = ConvEncoder(2, 8, 3, 16, dropout=0.0).eval()
    x = torch.zeros(1, 30, 8)
    x[0, 8:14] = torch.randn(6, 8)
    shifted = torch.roll(x, 5, dims=1)
    # Receptive field 5: outputs within 2 positions of an end see the zero padding.
    torch.testing.assert_close(torch.roll(enc(x), 5, dims=1)[:, 7:28], enc(shifted)[:, 7:28])


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_changes_nothing_for_real_tokens(norm_first):
    enc = ConvEncoder(3, 8, 3, 16, dropout=0.0, norm_first=norm_first).eval()
    tokens = torch.tensor([[5, 6, 7, 8, 9, 0, 0, 0], [4, 5, 6, 7, 8, 9, 10, 11]])
    x = torch.randn(2, 8, 8) * 5  # garbage at the padded positions too
    out = enc(x, padding_mask(tokens, pad_id=0))  # (B, 1, 1, S) mask
    alone = enc(x[:1, :5])
    torch.testing.assert_close(out[0, :5], alone[0])
    out2d = enc(x, tokens != 0)  # (B, S) mask works the same
    torch.testing.assert_close(out2d, out)


def test_same_interface_as_encoder_and_drop_in_for_transformer():
    x = torch.randn(2, 7, 16)
    conv, attn = ConvEncoder(2, 16, 3, 32), Encoder(2, 16, 4, 32)
    assert conv(x).shape == attn(x).shape == (2, 7, 16)
    cfg = TransformerConfig(12, 12, d_model=16, num_heads=4, num_encoder_layers=2,
                            num_decoder_layers=1, d_ff=32)
    model = Transformer(cfg)
    model.encoder = ConvEncoder(2, 16, 3, 32)
    src = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 10]])
    tgt = torch.tensor([[1, 4, 5], [1, 7, 8]])
    assert model(src, tgt).shape == (2, 3, 12)


def test_pre_ln_stack_ends_with_a_norm():
    enc = ConvEncoder(2, 16, 3, 32, dropout=0.0, norm_first=True).eval()
    y = enc(torch.randn(2, 5, 16) * 10)
    torch.testing.assert_close(y.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)


def test_clear_errors():
    with pytest.raises(ValueError, match="odd"):
        ConvEncoderLayer(8, kernel_size=4)
    with pytest.raises(ValueError, match="dilation"):
        ConvEncoderLayer(8, dilation=0)
    layer = ConvEncoderLayer(8, 3, 16)
    with pytest.raises(ValueError, match="d_model=8"):
        layer(torch.randn(2, 5, 7))
    with pytest.raises(ValueError, match="padding mask"):
        layer(torch.randn(2, 5, 8), torch.ones(2, 1, 5, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        layer(torch.randn(2, 5, 8), torch.ones(2, 5))
