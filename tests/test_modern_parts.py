"""The parts later models swapped in (chapter 12), each against an independent
reference: RMSNorm (torch.nn.RMSNorm), GELU and SwiGLU feed-forward networks
(torch.nn's GELU layer, the closed form, the parameter count), rotary
positions (a closed-form rotation, the offset property, cached decoding),
grouped-query attention (F.scaled_dot_product_attention with enable_gqa),
blocked attention with the online softmax (scaled_dot_product_attention),
the bias switch and the 2020s preset."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minitransformer as mt
from minitransformer import factories
from minitransformer.training import options
from minitransformer.training.presets import (
    CPU_MODEL,
    CPU_MODEL_2020S,
    ERA_PARTS,
    cpu_model_config,
    language_model_config,
)

SMALL = dict(d_model=32, num_heads=4, d_ff=48, dropout=0.0, norm_first=True)
MODERN = dict(norm="rmsnorm", feed_forward="swiglu", positional="rope", num_kv_heads=2,
              bias=False)


def _lm(**kw) -> mt.LanguageModel:
    torch.manual_seed(0)
    return mt.LanguageModel(mt.LanguageModelConfig(vocab_size=40, num_layers=2,
                                                   **{**SMALL, **kw})).eval()


def _translator(**kw) -> mt.Transformer:
    torch.manual_seed(0)
    config = mt.TransformerConfig(40, 44, num_encoder_layers=2, num_decoder_layers=2,
                                  **{**SMALL, **kw})
    return mt.Transformer(config).eval()


# --- RMSNorm -------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.bfloat16, 2e-2)])
def test_rmsnorm_equals_torch_rmsnorm(fused, dtype, tol):
    torch.manual_seed(0)
    ours = mt.RMSNorm(24, eps=1e-5, fused=fused)
    theirs = nn.RMSNorm(24, eps=1e-5)
    with torch.no_grad():
        ours.weight.normal_()
    theirs.load_state_dict(ours.state_dict())  # same names: weight only, no bias
    x = (torch.randn(3, 5, 24) * 4 + 1).to(dtype)
    ours, theirs = ours.to(dtype), theirs.to(dtype)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, expected = ours(x1), theirs(x2)
    assert y.dtype == dtype
    torch.testing.assert_close(y, expected, atol=tol, rtol=tol)
    y.float().square().sum().backward()
    expected.float().square().sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=tol * 10, rtol=tol * 10)
    torch.testing.assert_close(ours.weight.grad, theirs.weight.grad, atol=tol * 10,
                               rtol=tol * 10)


def test_rmsnorm_is_layernorm_of_a_zero_mean_input_without_shift():
    x = torch.randn(4, 16)
    x = x - x.mean(-1, keepdim=True)  # mean 0: the mean square is the variance
    torch.testing.assert_close(mt.rms_norm(x, torch.ones(16)),
                               F.layer_norm(x, (16,), eps=1e-5))
    with pytest.raises(ValueError, match="expected last dimension 16"):
        mt.RMSNorm(16)(torch.randn(2, 8))


# --- feed-forward networks ---------------------------------------------------------------


@pytest.mark.parametrize("d_ff", [1, 2, 3, 48, 100, 512, 2048, 2049])
def test_swiglu_keeps_the_relu_networks_parameter_count(d_ff):
    d = 32
    hidden = mt.swiglu_hidden(d_ff)
    assert abs(hidden - 2 * d_ff / 3) <= 0.5  # the nearest integer to 2/3 of d_ff
    relu = mt.PositionwiseFeedForward(d, d_ff, bias=False)
    swiglu = mt.SwiGLUFeedForward(d, d_ff, bias=False)
    count = mt.count_parameters
    assert abs(count(swiglu) - count(relu)) <= d  # 3·D·H against 2·D·F, |3H − 2F| ≤ 1
    assert count(swiglu) == 3 * d * hidden
    with_bias = mt.SwiGLUFeedForward(d, d_ff)
    assert count(with_bias) - count(swiglu) == 2 * hidden + d


def test_swiglu_is_the_closed_form():
    torch.manual_seed(0)
    ffn = mt.SwiGLUFeedForward(8, 12)
    x = torch.randn(2, 3, 8)
    w1, w3, w2 = ffn.gate.weight, ffn.up.weight, ffn.down.weight
    a = x @ w1.T + ffn.gate.bias
    silu = a / (1 + torch.exp(-a))  # x·sigmoid(x)
    expected = (silu * (x @ w3.T + ffn.up.bias)) @ w2.T + ffn.down.bias
    torch.testing.assert_close(ffn(x), expected)
    assert w1.shape == (8, 8)  # hidden round(2·12/3) = 8


def test_gelu_network_equals_torchs_gelu_layer():
    torch.manual_seed(0)
    ours = mt.EncoderLayer(mt.TransformerConfig(1, 1, d_model=16, num_heads=4, d_ff=24,
                                                dropout=0.0, feed_forward="gelu"))
    theirs = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, activation="gelu",
                                        batch_first=True)
    mt.load_torch_encoder_layer(ours, theirs)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(ours(x), theirs(x))
    with pytest.raises(ValueError, match="activation relu, ours gelu"):
        relu = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, batch_first=True)
        mt.load_torch_encoder_layer(ours, relu)
    with pytest.raises(ValueError, match="activation must be one of"):
        mt.PositionwiseFeedForward(8, 8, activation="tanh")


# --- rotary positions ---------------------------------------------------------------


def _closed_form_rotation(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Pair i = dims (i, i + Dh/2), turned by pos·θ_i with a 2x2 rotation matrix, in float64."""
    dh = x.shape[-1]
    out = torch.empty_like(x, dtype=torch.float64)
    for row, pos in enumerate(positions.tolist()):
        for i in range(dh // 2):
            angle = pos * 10000.0 ** (-2 * i / dh)
            rot = torch.tensor([[math.cos(angle), -math.sin(angle)],
                                [math.sin(angle), math.cos(angle)]], dtype=torch.float64)
            pair = torch.stack([x[..., row, i], x[..., row, i + dh // 2]], -1).double()
            turned = pair @ rot.T
            out[..., row, i], out[..., row, i + dh // 2] = turned[..., 0], turned[..., 1]
    return out


def test_apply_rotary_is_the_closed_form_rotation():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8)
    positions = torch.tensor([0, 1, 7, 30, 200])
    torch.testing.assert_close(mt.apply_rotary(x, positions).double(),
                               _closed_form_rotation(x, positions), atol=1e-5, rtol=1e-5)
    # interleaved pairs (RoFormer, Meta's Llama: complex numbers) after a fixed permutation
    half = torch.cat([x[..., 0::2], x[..., 1::2]], -1)  # dims 2i, 2i+1 → i, i + Dh/2
    z = torch.view_as_complex(x.reshape(2, 3, 5, 4, 2).contiguous())
    angle = positions[:, None] * 10000.0 ** (-torch.arange(0, 8, 2) / 8)
    turned = torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).flatten(-2)
    expected = torch.cat([turned[..., 0::2], turned[..., 1::2]], -1)
    torch.testing.assert_close(mt.apply_rotary(half, positions), expected, atol=1e-5, rtol=1e-5)


def test_rotary_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 16).double(), torch.randn(1, 1, 1, 16).double()

    def score(m: int, n: int) -> torch.Tensor:
        qm = mt.apply_rotary(q, torch.tensor([m]))
        kn = mt.apply_rotary(k, torch.tensor([n]))
        return (qm * kn).sum()

    for m, n in [(0, 0), (5, 2), (2, 5), (17, 3)]:
        for shift in (1, 10, 123):
            torch.testing.assert_close(score(m + shift, n + shift), score(m, n))
    assert not torch.allclose(score(5, 2), score(2, 5))  # the offset's sign matters
    # a rotation keeps the length
    torch.testing.assert_close(mt.apply_rotary(q, torch.tensor([9])).norm(), q.norm())


def test_apply_rotary_checks_its_arguments():
    with pytest.raises(ValueError, match="even head_dim"):
        mt.apply_rotary(torch.randn(1, 1, 3, 5), torch.arange(3))
    with pytest.raises(ValueError, match="positions must be integer"):
        mt.apply_rotary(torch.randn(1, 1, 3, 4), torch.arange(3.0))
    with pytest.raises(ValueError, match="3 positions for a length of 2"):
        mt.apply_rotary(torch.randn(1, 1, 2, 4), torch.arange(3))
    with pytest.raises(ValueError, match="even head width"):
        mt.LanguageModelConfig(vocab_size=9, d_model=12, num_heads=4, positional="rope")


def test_rope_model_rotates_self_attention_only_and_adds_no_positions():
    model = _translator(positional="rope")
    assert type(model.src_pos) is mt.NoPositionalEncoding
    assert all(layer.self_attn.rotary for layer in [*model.encoder.layers,
                                                     *model.decoder.layers])
    assert not any(layer.cross_attn.rotary for layer in model.decoder.layers)
    assert not _translator().encoder.layers[0].self_attn.rotary
    # rotary self-attention sees the order without any position on the embeddings
    lm = _lm(positional="rope")
    x = torch.tensor([[5, 6, 7, 8]])
    assert not torch.allclose(lm(x)[0, -1], lm(x.flip(1))[0, -1], atol=1e-4)


@pytest.mark.parametrize("kw", [{"positional": "rope"}, MODERN])
@pytest.mark.parametrize("prompt", [1, 3, 6])
def test_language_model_cached_decoding_equals_full_forward(kw, prompt):
    lm = _lm(**kw)
    g = torch.Generator().manual_seed(prompt)
    tokens = torch.randint(4, 40, (2, 10), generator=g)
    full = lm(tokens)
    state = lm.start(2)
    logits, state = lm.step(tokens[:, :prompt], state)
    steps = [logits]
    for t in range(prompt, 10):
        logits, state = lm.step(tokens[:, t:t + 1], state)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kw", [{"positional": "rope"}, MODERN])
def test_translator_cached_decoding_equals_full_forward(kw):
    model = _translator(**kw)
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(4, 40, (3, 7), generator=g), torch.randint(4, 44, (3, 6), generator=g)
    src[0, -2:] = 0
    full = model(src, tgt)
    state = model.start_decoding(model.encode(src), model.src_mask(src))
    steps = []
    for t in range(6):
        logits, state = model.decode_next(tgt[:, t], state)
        steps.append(logits)
    torch.testing.assert_close(torch.stack(steps, 1), full, atol=1e-5, rtol=1e-5)
    # and through beam search's reordering
    picked = state.index_select(torch.tensor([2, 0]))
    assert picked.caches[0].self_attn.k.shape[0] == 2


# --- grouped-query attention ----------------------------------------------------------


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("need_weights", [False, True])
def test_grouped_query_attention_equals_torch_enable_gqa(num_kv_heads, need_weights):
    torch.manual_seed(0)
    d, h = 32, 4
    mha = mt.MultiHeadAttention(d, h, num_kv_heads=num_kv_heads).eval()
    assert mha.w_k.weight.shape == mha.w_v.weight.shape == (num_kv_heads * 8, d)
    x, memory = torch.randn(2, 5, d), torch.randn(2, 7, d)
    keep = torch.rand(2, 1, 5, 7) > 0.3
    keep[..., 0] = True
    for query, key, mask in [(x, x, keep[..., :5]), (x, memory, keep)]:
        out, _ = mha(query, key, key, mask, need_weights=need_weights)

        def heads(t: torch.Tensor, n: int) -> torch.Tensor:
            return t.view(2, -1, n, 8).transpose(1, 2)

        q = heads(F.linear(query, mha.w_q.weight, mha.w_q.bias), h)
        k = heads(F.linear(key, mha.w_k.weight, mha.w_k.bias), num_kv_heads)
        v = heads(F.linear(key, mha.w_v.weight, mha.w_v.bias), num_kv_heads)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        expected = mha.w_o(ref.transpose(1, 2).reshape(2, -1, d))
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_grouped_query_cache_holds_num_kv_heads_heads():
    lm = _lm(num_kv_heads=1)  # multi-query
    full_heads = _lm()
    tokens = torch.randint(4, 40, (3, 6))
    state, _ = lm.start(3), None
    _, state = lm.step(tokens, state)
    assert state.caches[0].k.shape == (3, 1, 6, 8)  # (B, Hkv, L, Dh)
    _, full_state = full_heads.step(tokens, full_heads.start(3))
    assert full_state.caches[0].k.shape == (3, 4, 6, 8)
    # 2 (keys and values) · layers · B · L · Hkv · Dh float32 numbers
    assert state.num_bytes() == 2 * 2 * 3 * 6 * 1 * 8 * 4
    assert full_state.num_bytes() == 4 * state.num_bytes()
    model = _translator(num_kv_heads=2)
    src = torch.randint(4, 40, (2, 5))
    cache = model.start_decoding(model.encode(src)).caches[0]
    assert cache.cross_attn.k.shape == (2, 2, 5, 8) and cache.self_attn.k.shape[1] == 2


def test_grouped_query_errors_and_interop_refusals():
    with pytest.raises(ValueError, match=r"num_kv_heads \(3\) must divide num_heads \(4\)"):
        mt.TransformerConfig(9, 9, d_model=32, num_heads=4, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads"):
        mt.LanguageModelConfig(vocab_size=9, d_model=32, num_heads=4, num_kv_heads=0)
    with pytest.raises(ValueError, match="must divide"):
        mt.MultiHeadAttention(32, 4, num_kv_heads=3)
    theirs = nn.MultiheadAttention(32, 4, batch_first=True)
    with pytest.raises(ValueError, match="grouped-query attention .2 key/value heads for 4"):
        mt.load_torch_attention(mt.MultiHeadAttention(32, 4, num_kv_heads=2), theirs)
    with pytest.raises(ValueError, match="rotary positions, which nn.MultiheadAttention"):
        mt.load_torch_attention(mt.MultiHeadAttention(32, 4, rotary=True), theirs)
    layer = nn.TransformerEncoderLayer(32, 4, 48, dropout=0.0, batch_first=True)
    with pytest.raises(ValueError, match="ours.self_attn is grouped-query"):
        mt.load_torch_encoder_layer(_lm(norm_first=False, num_kv_heads=2).encoder.layers[0],
                                    layer)
    with pytest.raises(ValueError, match="grouped key/value heads or rotary"):
        mt.use_relative_positions(_translator(num_kv_heads=2))


# --- blocked attention with the online softmax --------------------------------------------


@pytest.mark.parametrize("lq, lk, block", [(5, 13, 4), (7, 7, 3), (4, 9, 64), (3, 1, 2),
                                           (6, 16, 16)])
def test_flash_attention_equals_scaled_dot_product_attention(lq, lk, block):
    torch.manual_seed(lk)
    q, k, v = torch.randn(2, 3, lq, 8), torch.randn(2, 3, lk, 8), torch.randn(2, 3, lk, 6)
    torch.testing.assert_close(mt.flash_attention(q, k, v, block_size=block),
                               F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)
    keep = torch.rand(2, 1, lq, lk) > 0.4
    keep[..., 0] = True  # every row keeps a key: torch's kernel is the reference
    torch.testing.assert_close(mt.flash_attention(q, k, v, keep, block_size=block),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
                               atol=1e-5, rtol=1e-5)
    additive = torch.randn(lq, lk)  # a float mask, added, broadcast over batch and heads
    torch.testing.assert_close(mt.flash_attention(q, k, v, additive, block_size=block),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=additive),
                               atol=1e-5, rtol=1e-5)


def test_flash_attention_fully_masked_rows_are_zeros_as_masked_softmax_gives():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 10, 8), torch.randn(2, 10, 8)
    keep = torch.rand(2, 4, 10) > 0.5
    keep[0, 1] = False  # no key at all
    keep[1, 2] = False
    keep[1, 2, 9] = True  # only the last key, in the last (short) block
    out = mt.flash_attention(q, k, v, keep, block_size=4)
    expected, _ = mt.scaled_dot_product_attention(q, k, v, keep)  # masked_softmax's zeros
    assert not out.isnan().any()
    assert torch.equal(out[0, 1], torch.zeros(8))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    causal = mt.causal_mask(10)  # (10, 10)
    q10 = torch.randn(2, 10, 8)
    torch.testing.assert_close(mt.flash_attention(q10, k, v, causal, block_size=3),
                               F.scaled_dot_product_attention(q10, k, v, attn_mask=causal),
                               atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="block_size"):
        mt.flash_attention(q, k, v, block_size=0)


def test_flash_attention_gradients_match():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 4, requires_grad=True) for _ in range(3))
    grads = torch.autograd.grad(mt.flash_attention(q, k, v, block_size=4).square().sum(),
                                (q, k, v))
    expected = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v).square().sum(),
                                   (q, k, v))
    for g, e in zip(grads, expected, strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


# --- the bias switch, the configs and the presets ---------------------------------------------


def test_bias_switch_removes_the_linear_layers_biases_only():
    model = _translator(bias=False, feed_forward="swiglu")
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and name != "generator":
            assert module.bias is None, name
    assert model.generator.bias is not None
    assert model.encoder.layers[0].norm1.bias is not None  # LayerNorm keeps its shift
    assert all(m.bias is not None for m in _translator().modules() if isinstance(m, nn.Linear))


def test_language_model_config_literals_list_the_factory_tables():
    for cls in (mt.TransformerConfig, mt.LanguageModelConfig):
        hints = typing.get_type_hints(cls)
        for field, table in factories.KINDS.items():
            assert set(typing.get_args(hints[field])) == set(table), (cls, field)
    layer = mt.LanguageModelConfig(vocab_size=9, **SMALL, **MODERN).layer_config()
    assert {k: getattr(layer, k) for k in MODERN} == MODERN


def test_modern_model_builds_the_parts_it_names():
    lm = _lm(**MODERN)
    layer = lm.encoder.layers[0]
    assert isinstance(layer.norm1, mt.RMSNorm) and isinstance(lm.encoder.norm, mt.RMSNorm)
    assert isinstance(layer.ffn, mt.SwiGLUFeedForward)
    assert layer.self_attn.num_kv_heads == 2 and layer.self_attn.rotary
    assert type(lm.pos) is mt.NoPositionalEncoding


def test_the_2017_parts_are_the_defaults_and_the_2020s_preset_differs_in_parts_only():
    for cls, required in ((mt.TransformerConfig, (9, 9)), (mt.LanguageModelConfig, (9,))):
        default = cls(*required)
        assert {k: getattr(default, k) for k in ERA_PARTS["2017"]} == ERA_PARTS["2017"]
    assert cpu_model_config(9, 9, era="2017") == cpu_model_config(9, 9)
    modern = cpu_model_config(9, 9, era="2020s")
    assert {k: getattr(modern, k) for k in ERA_PARTS["2020s"]} == ERA_PARTS["2020s"]
    sizes = set(CPU_MODEL) - set(ERA_PARTS["2020s"]) - {"d_ff"}
    assert all(CPU_MODEL_2020S[k] == CPU_MODEL[k] for k in sizes)
    lm = language_model_config(40, era="2020s", **SMALL)
    assert lm.norm == "rmsnorm" and lm.positional == "rope" and not lm.bias
    mt.LanguageModel(lm)
    with pytest.raises(ValueError, match="era must be one of '2017', '2020s'"):
        cpu_model_config(9, 9, era="1990s")
    # what the 2020s parts change in the translator's size, part by part
    old = mt.count_parameters(mt.Transformer(cpu_model_config(100, 100)))
    new = mt.count_parameters(mt.Transformer(cpu_model_config(100, 100, era="2020s",
                                                              d_ff=CPU_MODEL["d_ff"])))
    d, f, h = 256, 512, mt.swiglu_hidden(512)
    attentions, ffns, norms = 3 + 3 + 3, 3 + 3, 3 * 2 + 1 + 3 * 3 + 1
    kv = 2 * (d * d - d * (d // 8) * 2)  # w_k and w_v: 2 key/value heads of 32 instead of 8
    saved = (attentions * (kv + 4 * d)  # and no biases
             + ffns * ((2 * d * f + f + d) - 3 * d * h)  # SwiGLU without biases
             + norms * d)  # RMSNorm has no shift
    assert old - new == saved


def test_train_flags_reach_every_new_field():
    from minitransformer import cli

    args = cli.build_parser().parse_args(
        ["train", "--out", "x", "--norm", "rmsnorm", "--feed-forward", "swiglu",
         "--positional", "rope", "--num-kv-heads", "2", "--no-bias"])
    config = options.config_from_args(mt.TransformerConfig, args, src_vocab_size=9,
                                      tgt_vocab_size=9, max_len=64, pad_id=0)
    assert {k: getattr(config, k) for k in MODERN} == MODERN
    defaults = cli.build_parser().parse_args(["train", "--out", "x"])
    assert defaults.num_kv_heads == 0 and defaults.bias is True  # 0: None, one per query head
    config = options.config_from_args(mt.TransformerConfig, defaults, src_vocab_size=9,
                                      tgt_vocab_size=9, max_len=64, pad_id=0)
    assert config.num_kv_heads is None
    for name in ("norm", "feed_forward", "num_kv_heads", "bias"):
        assert name in options.HELP


@pytest.mark.slow
def test_modern_models_compile_without_graph_breaks_and_match_eager():
    """Rotary positions (an arange from the cache's length) and grouped heads
    add no host synchronisation: ``fullgraph=True`` captures the whole model,
    forward and backward, on a padded batch."""
    torch._dynamo.reset()
    model = _translator(**MODERN).train()  # dropout 0
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(4, 40, (2, 7), generator=g), torch.randint(4, 44, (2, 5), generator=g)
    src[0, -3:] = 0
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out = compiled(src, tgt)
    expected = model(src, tgt)
    torch.testing.assert_close(out, expected)
    grads = torch.autograd.grad(out.square().mean(), list(model.parameters()))
    expected_grads = torch.autograd.grad(expected.square().mean(), list(model.parameters()))
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want)


def test_matched_d_ff_is_the_closest_width_found_by_counting_every_width():
    from minitransformer.instruments.summary import model_of

    for config in (mt.LanguageModelConfig(50, d_model=16, num_heads=4, num_layers=2, d_ff=40,
                                          feed_forward="swiglu", num_kv_heads=1, bias=False),
                   mt.TransformerConfig(30, 30, d_model=16, num_heads=2, num_encoder_layers=1,
                                        num_decoder_layers=1, d_ff=32)):
        target = mt.count_parameters(model_of(dataclasses.replace(config, d_ff=1))) + 5000
        counts = {d: mt.count_parameters(model_of(dataclasses.replace(config, d_ff=d)))
                  for d in range(1, 400)}
        best = min(counts, key=lambda d: (abs(counts[d] - target), d))
        assert mt.matched_d_ff(config, target) == best
    with pytest.raises(ValueError, match="parameters must be a positive int"):
        mt.matched_d_ff(config, 0)
    with pytest.raises(TypeError, match="expected a TransformerConfig or LanguageModelConfig"):
        model_of({"d_ff": 3})


@pytest.mark.parametrize("vocab", [100, 8000])
def test_the_2020s_translator_has_the_2017_ones_parameter_count(vocab):
    old = mt.count_parameters(mt.Transformer(cpu_model_config(vocab, vocab)))
    modern = cpu_model_config(vocab, vocab, era="2020s")
    assert mt.matched_d_ff(modern, old) == modern.d_ff
    new = mt.count_parameters(mt.Transformer(modern))
    assert abs(new - old) / old < 0.001
