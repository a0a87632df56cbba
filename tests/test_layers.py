"""LayerNorm, feed-forward, positional encodings and encoder/decoder layers
against PyTorch's modules and closed forms."""

import math

import pytest
import torch
from torch import nn

import minitransformer as mt


@pytest.mark.parametrize("shape", [(4, 8), (2, 3, 16), (1, 1, 5)])
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
@pytest.mark.parametrize("fused", [True, False])
def test_layernorm_matches_torch(shape, eps, fused):
    d = shape[-1]
    ours, ref = mt.LayerNorm(d, eps=eps, fused=fused), nn.LayerNorm(d, eps=eps)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    ours.load_state_dict(ref.state_dict())  # same parameter names: weight (α), bias (β)
    x = torch.randn(shape) * 3 + 1
    torch.testing.assert_close(ours(x), ref(x))


@pytest.mark.parametrize("fused", [True, False])
def test_layernorm_normalises_each_token(fused):
    x = torch.randn(3, 5, 32) * 7 - 2
    y = mt.LayerNorm(32, fused=fused)(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(3, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(3, 5), atol=1e-3, rtol=0)


def test_written_out_layer_norm_equals_fused_in_value_and_gradient():
    x = torch.randn(4, 7, 12, requires_grad=True)
    w, b = torch.randn(12, requires_grad=True), torch.randn(12, requires_grad=True)
    ours = mt.layer_norm(x, w, b, 1e-5)
    ref = torch.nn.functional.layer_norm(x, (12,), w, b, 1e-5)
    torch.testing.assert_close(ours, ref)
    g = torch.randn_like(ref)
    grads = torch.autograd.grad(ours, (x, w, b), g)
    ref_grads = torch.autograd.grad(ref, (x, w, b), g)
    for a, e in zip(grads, ref_grads):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fused", [True, False])
def test_layernorm_gradcheck(fused):
    ln = mt.LayerNorm(6, fused=fused).double()
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ln, (x,))
    w, b = ln.weight.detach().clone(), ln.bias.detach().clone()
    w.requires_grad_(True)
    b.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda w, b: torch.func.functional_call(ln, {"weight": w, "bias": b}, (x.detach(),)),
        (w, b),
    )


def test_layernorm_rejects_wrong_width():
    with pytest.raises(ValueError, match="last dimension 8"):
        mt.LayerNorm(8)(torch.randn(2, 7))


def test_ffn_is_relu_mlp_at_every_position():
    ffn = mt.PositionwiseFeedForward(8, 32).eval()
    x = torch.randn(2, 5, 8)
    expected = ffn.linear2(torch.relu(ffn.linear1(x)))
    torch.testing.assert_close(ffn(x), expected)
    # position-wise: each position alone gives the same result
    torch.testing.assert_close(ffn(x[:, 2:3]), ffn(x)[:, 2:3])


@pytest.mark.parametrize("d_model", [4, 16, 7])
def test_sinusoid_closed_form(d_model):
    pe = mt.SinusoidalPositionalEncoding(d_model, max_len=50).pe
    assert pe.shape == (50, d_model)
    for pos in (0, 1, 13, 49):
        for j in range(d_model):
            i2 = j - j % 2
            angle = pos / 10000 ** (i2 / d_model)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, j].item() - expected) < 1e-6


def test_positional_modules_add_and_check_length():
    x = torch.zeros(2, 6, 8)
    sin = mt.SinusoidalPositionalEncoding(8, max_len=10)
    torch.testing.assert_close(sin(x), sin.pe[:6].expand(2, 6, 8))
    learned = mt.LearnedPositionalEmbedding(10, 8)
    torch.testing.assert_close(learned(x), learned.embedding.weight[:6].expand(2, 6, 8))
    for module in (sin, learned):
        with pytest.raises(ValueError, match="longer than max_len=10"):
            module(torch.zeros(1, 11, 8))
        with pytest.raises(ValueError, match="d_model=8"):
            module(torch.zeros(1, 3, 5))
    assert "pe" in sin.state_dict() and not list(sin.parameters())


@pytest.mark.parametrize("kind", ["sinusoidal", "learned", "none"])
def test_positional_modules_with_an_offset_equal_a_slice_of_the_whole(kind):
    # incremental decoding feeds position t alone with start=t
    module = {
        "sinusoidal": mt.SinusoidalPositionalEncoding(8, max_len=10),
        "learned": mt.LearnedPositionalEmbedding(10, 8),
        "none": mt.NoPositionalEncoding(),
    }[kind]
    assert isinstance(module, mt.PositionalEncoding)
    x = torch.randn(2, 10, 8)
    whole = module(x)
    for t in (0, 3, 9):
        torch.testing.assert_close(module(x[:, t : t + 1], start=t), whole[:, t : t + 1])
    torch.testing.assert_close(module(x[:, 4:7], start=4), whole[:, 4:7])
    if kind == "none":
        torch.testing.assert_close(whole, x)
    else:
        with pytest.raises(ValueError, match="go beyond max_len=10"):
            module(x[:, :2], start=9)


def test_positional_modules_initialise_themselves():
    sin = mt.SinusoidalPositionalEncoding(6, max_len=20)
    sin.pe.zero_()
    sin.reset_parameters()
    torch.testing.assert_close(sin.pe, mt.sinusoidal_table(20, 6))
    torch.manual_seed(0)
    learned = mt.LearnedPositionalEmbedding(4000, 16)
    std = learned.embedding.weight.std().item()
    assert abs(std - 2**-0.5) < 0.01  # N(0, 1/2): the sinusoidal codes' RMS size


def _torch_encoder_layer(d, h, f, norm_first):
    return nn.TransformerEncoderLayer(d, h, f, dropout=0.0, batch_first=True, norm_first=norm_first)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("use_mask", [False, True])
def test_encoder_layer_matches_torch(norm_first, seed, use_mask):
    torch.manual_seed(seed)
    d, h, f = 16, 4, 32
    ref = _torch_encoder_layer(d, h, f, norm_first).eval()
    ours = mt.EncoderLayer(d, h, f, dropout=0.0, norm_first=norm_first).eval()
    mt.load_torch_encoder_layer(ours, ref)
    tokens = torch.randint(1, 9, (3, 7))
    tokens[1, 5:] = 0
    x = torch.randn(3, 7, d)
    if use_mask:
        expected = ref(x, src_key_padding_mask=mt.torch_key_padding_mask(tokens, 0))
        got = ours(x, mt.padding_mask(tokens, 0))
        keep = tokens != 0  # PyTorch's fast path may zero padded rows; compare real tokens
        torch.testing.assert_close(got[keep], expected[keep], rtol=1e-5, atol=1e-5)
    else:
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_decoder_layer_matches_torch(norm_first, seed):
    torch.manual_seed(seed)
    d, h, f = 16, 4, 32
    ref = nn.TransformerDecoderLayer(
        d, h, f, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    ours = mt.DecoderLayer(d, h, f, dropout=0.0, norm_first=norm_first).eval()
    mt.load_torch_decoder_layer(ours, ref)
    src = torch.randint(1, 9, (2, 6))
    src[0, 4:] = 0
    x, memory = torch.randn(2, 5, d), torch.randn(2, 6, d)
    expected = ref(
        x, memory,
        tgt_mask=mt.to_torch_bool_mask(mt.causal_mask(5)),
        memory_key_padding_mask=mt.torch_key_padding_mask(src, 0),
    )
    got = ours(x, memory, mt.causal_mask(5), mt.padding_mask(src, 0))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_match_torch_stacks(norm_first):
    d, h, f, n = 16, 2, 24, 3
    enc_layer = _torch_encoder_layer(d, h, f, norm_first)
    ref_enc = nn.TransformerEncoder(
        enc_layer, n, norm=nn.LayerNorm(d) if norm_first else None, enable_nested_tensor=False
    ).eval()
    ours = mt.Encoder(n, d, h, f, dropout=0.0, norm_first=norm_first).eval()
    for a, b in zip(ours.layers, ref_enc.layers):
        mt.load_torch_encoder_layer(a, b)
    if norm_first:
        ours.norm.load_state_dict(ref_enc.norm.state_dict())
    x = torch.randn(2, 5, d)
    torch.testing.assert_close(ours(x), ref_enc(x), rtol=1e-5, atol=1e-5)


def test_layer_submodule_names():
    enc = mt.EncoderLayer(8, 2, 16)
    dec = mt.DecoderLayer(8, 2, 16)
    assert {"self_attn", "ffn", "norm1", "norm2"} <= dict(enc.named_children()).keys()
    assert {"self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3"} <= dict(
        dec.named_children()
    ).keys()


# --- built from the config; parts from the factories -----------------------------


def _config(**kw):
    base = dict(src_vocab_size=11, tgt_vocab_size=11, d_model=16, num_heads=4, d_ff=24,
                dropout=0.0, num_encoder_layers=2, num_decoder_layers=3, norm_first=True)
    return mt.TransformerConfig(**{**base, **kw})


@pytest.mark.parametrize("cls", [mt.EncoderLayer, mt.DecoderLayer])
def test_a_layer_built_from_the_config_equals_one_built_from_sizes(cls):
    config = _config()
    torch.manual_seed(0)
    from_config = cls(config)
    torch.manual_seed(0)
    from_sizes = cls(16, 4, d_ff=24, dropout=0.0, norm_first=True)
    a, b = from_config.state_dict(), from_sizes.state_dict()
    assert list(a) == list(b)  # same parameters, registered in the same order
    for name in a:
        torch.testing.assert_close(a[name], b[name])
    assert from_config.norm_first and from_config.self_attn.num_heads == 4
    assert from_config.ffn.linear1.out_features == 24


def test_stacks_take_their_depth_from_the_config():
    config = _config()
    assert len(mt.Encoder(config).layers) == 2 and len(mt.Decoder(config).layers) == 3
    assert isinstance(mt.Encoder(config).norm, mt.LayerNorm)  # pre-LN: a final norm
    assert len(mt.Encoder(4, 16, 2, 24).layers) == 4  # the sizes, as the chapters build it


def test_layer_constructor_errors():
    with pytest.raises(TypeError, match="not both"):
        mt.EncoderLayer(_config(), d_model=8)
    with pytest.raises(TypeError, match="at most 5 sizes"):
        mt.EncoderLayer(16, 4, 24, 0.0, True, 3)
    with pytest.raises(TypeError, match="d_model given by position and by keyword"):
        mt.EncoderLayer(16, d_model=16)
    with pytest.raises(ValueError, match="divisible"):
        mt.DecoderLayer(d_model=10, num_heads=3)


def test_factories_build_what_the_config_names():
    from minitransformer import factories

    config = _config(positional="learned")
    assert isinstance(factories.make_norm(config), mt.LayerNorm)
    assert isinstance(factories.make_feed_forward(config), mt.PositionwiseFeedForward)
    assert isinstance(factories.make_positional(config), mt.LearnedPositionalEmbedding)
    assert factories.make_positional(_config(positional="none")).__class__ is (
        mt.NoPositionalEncoding
    )
    # each config field's Literal lists exactly its factory table's kinds
    import typing

    hints = typing.get_type_hints(mt.TransformerConfig)
    for field, table in factories.KINDS.items():
        assert set(typing.get_args(hints[field])) == set(table), field


def test_a_new_kind_is_one_table_entry(monkeypatch):
    """Adding a normalisation is an entry in ``NORMS`` (plus its name in the
    config's Literal): the layers, stacks and model pick it up unchanged."""
    from minitransformer import factories

    monkeypatch.setitem(factories.NORMS, "rms", lambda c: nn.RMSNorm(c.d_model))
    model = mt.Transformer(_config(norm="rms"))
    norms = [m for m in model.modules() if isinstance(m, nn.RMSNorm)]
    assert len(norms) == 2 * 2 + 3 * 3 + 2  # every sub-layer, and the two pre-LN final norms
    assert not any(isinstance(m, mt.LayerNorm) for m in model.modules())
    # and the interop loaders refuse it: nn.TransformerEncoderLayer has LayerNorms only
    theirs = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, batch_first=True)
    with pytest.raises(ValueError, match=r"ours.norm1 is a RMSNorm, which torch.nn has no"):
        mt.load_torch_encoder_layer(mt.EncoderLayer(_config(norm="rms")), theirs)


def test_interop_refuses_options_torch_has_no_equivalent_for():
    theirs = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, batch_first=True)
    ours = mt.EncoderLayer(16, 4, 24)
    mt.use_relative_positions(ours)
    with pytest.raises(ValueError, match="self_attn is a RelativeMultiHeadAttention"):
        mt.load_torch_encoder_layer(ours, theirs)
    gelu = nn.TransformerEncoderLayer(16, 4, 24, activation="gelu", batch_first=True)
    with pytest.raises(ValueError, match="activation gelu, ours relu"):
        mt.load_torch_encoder_layer(mt.EncoderLayer(16, 4, 24), gelu)
    extra = mt.EncoderLayer(16, 4, 24)
    extra.self_attn.add_module("q_norm", mt.LayerNorm(4))  # a part inside a known one
    # attention 4·(16·16 + 16), FFN 16·24 + 24 + 24·16 + 16, two norms 2·32: 1,960; q_norm 8 more
    with pytest.raises(ValueError, match="ours has 1968 parameters and theirs 1960"):
        mt.load_torch_encoder_layer(extra, theirs)
    model = mt.Transformer(_config())
    model.encoder = mt.ConvEncoder(2, 16, 3, 24, norm_first=True)
    with pytest.raises(ValueError, match="ours is a ConvEncoder"):
        mt.load_torch_transformer(model, nn.Transformer(16, 4, 2, 3, 24, batch_first=True))
