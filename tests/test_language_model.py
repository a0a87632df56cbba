"""LanguageModel and MaskedLanguageModel against PyTorch's own encoder, their
masks (causal, bidirectional, padding), the tied output layer, the key/value
cache and checkpoints.

The reference computation is written out here: the embedding row times √D,
the sinusoidal code of each position from its closed form, the stack of
``nn.TransformerEncoder`` (weights copied with ``load_torch_encoder``) and
the output layer as a plain matrix product.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import minitransformer as mt
from minitransformer.training.checkpoint import (
    MODEL_CLASSES,
    build_model,
    load_checkpoint,
    save_checkpoint,
)

V, D, H, N, FF, MAX_LEN = 23, 32, 4, 2, 64, 40

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only cost


def lm_config(**kw) -> mt.LanguageModelConfig:
    base = dict(vocab_size=V, d_model=D, num_heads=H, num_layers=N, d_ff=FF, dropout=0.0,
                max_len=MAX_LEN)
    return mt.LanguageModelConfig(**{**base, **kw})


def make(cls=mt.LanguageModel, seed: int = 0, **kw) -> nn.Module:
    torch.manual_seed(seed)
    return cls(lm_config(**kw)).eval()


def random_tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, V, (batch, length), generator=g)  # no padding


def padded_tokens(seed: int = 0) -> torch.Tensor:
    tokens = random_tokens(3, 9, seed)
    tokens[1, 5:] = 0  # right padding
    tokens[2, 8:] = 0
    return tokens


def sinusoid(length: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), element by element."""
    pe = torch.zeros(length, d, dtype=torch.float64)
    for pos in range(length):
        for i in range(0, d, 2):
            angle = pos / 10000 ** (i / d)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


def torch_stack(norm_first: bool, seed: int) -> nn.TransformerEncoder:
    torch.manual_seed(seed + 100)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True,
                                       norm_first=norm_first)
    # nn.TransformerEncoder has a final norm only if given one; ours has one only pre-LN.
    final = nn.LayerNorm(D) if norm_first else None
    theirs = nn.TransformerEncoder(layer, N, norm=final, enable_nested_tensor=False).eval()
    with torch.no_grad():  # LayerNorms away from (1, 0), so that copying them is tested
        for m in theirs.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
    return theirs


def reference_logits(model: nn.Module, theirs: nn.TransformerEncoder, tokens: torch.Tensor,
                     causal: bool) -> torch.Tensor:
    """Embedding·√D + sinusoid → nn.TransformerEncoder → x Wᵀ + b, masks built by hand
    in torch's convention (True = blocked)."""
    length = tokens.shape[1]
    x = model.embed.weight[tokens] * math.sqrt(D) + sinusoid(length, D).float()
    blocked_future = torch.ones(length, length, dtype=torch.bool).triu(1)
    h = theirs(x, mask=blocked_future if causal else None, src_key_padding_mask=tokens == 0)
    return h @ model.output.weight.T + model.output.bias


# --- against nn.TransformerEncoder ---------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("cls", [mt.LanguageModel, mt.MaskedLanguageModel])
@pytest.mark.parametrize("seed", [0, 1])
def test_model_matches_torch_encoder_with_embedding_positions_and_output(cls, norm_first, seed):
    model = make(cls, seed, norm_first=norm_first)
    theirs = torch_stack(norm_first, seed)
    mt.load_torch_encoder(model.encoder, theirs)
    tokens = padded_tokens(seed)
    with torch.no_grad():
        got = model(tokens)
        expected = reference_logits(model, theirs, tokens, causal=cls is mt.LanguageModel)
    assert got.shape == (3, 9, V)
    real = tokens != 0
    torch.testing.assert_close(got[real], expected[real], rtol=1e-5, atol=1e-5)


def test_the_reference_sees_a_missing_causal_mask():
    """The comparison can fail: the GPT's logits are not the bidirectional stack's."""
    model = make(mt.LanguageModel)
    theirs = torch_stack(False, 0)
    mt.load_torch_encoder(model.encoder, theirs)
    tokens = random_tokens(2, 7)
    with torch.no_grad():
        bidirectional = reference_logits(model, theirs, tokens, causal=False)
        got = model(tokens)
    assert not torch.allclose(got, bidirectional, atol=1e-3)


@pytest.mark.parametrize("cls", [mt.LanguageModel, mt.MaskedLanguageModel])
@pytest.mark.parametrize("norm_first", [False, True])
def test_appended_padding_changes_no_real_logit(cls, norm_first):
    model = make(cls, norm_first=norm_first)
    tokens = padded_tokens(3)
    longer = torch.cat([tokens, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    with torch.no_grad():
        short, long = model(tokens), model(longer)
    real = tokens != 0
    torch.testing.assert_close(long[:, :9][real], short[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [mt.LanguageModel, mt.MaskedLanguageModel])
def test_padding_is_hidden_as_keys_whatever_its_vector(cls):
    """Padding keys are masked, not merely zero: a non-zero padding row changes
    no real position's logits."""
    model = make(cls)
    tokens = padded_tokens(4)
    with torch.no_grad():
        before = model(tokens)
        model.embed.weight[0].normal_(0.0, 3.0)
        after = model(tokens)
    real = tokens != 0
    torch.testing.assert_close(after[real], before[real], rtol=1e-5, atol=1e-5)


# --- what each model may see --------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("t", [1, 4, 8])
def test_later_tokens_never_change_earlier_logits(norm_first, t):
    model = make(mt.LanguageModel, norm_first=norm_first)
    tokens = random_tokens(2, 9, seed=t)
    changed = tokens.clone()
    changed[:, t] = (changed[:, t] % (V - 1)) + 1  # another non-pad id
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    torch.testing.assert_close(b[:, :t], a[:, :t], rtol=0, atol=1e-6)
    assert (b[:, t:] - a[:, t:]).abs().amax() > 1e-3  # the change is seen from t on


@pytest.mark.parametrize("norm_first", [False, True])
def test_masked_lm_sees_later_tokens(norm_first):
    model = make(mt.MaskedLanguageModel, norm_first=norm_first)
    tokens = random_tokens(2, 9, seed=5)
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] % (V - 1)) + 1
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert ((b[:, :-1] - a[:, :-1]).abs().amax(dim=-1) > 1e-4).all()  # every earlier position


def test_the_masks_are_what_each_model_promises():
    tokens = torch.tensor([[5, 6, 7, 0]])
    causal = make(mt.LanguageModel).mask(tokens)
    bidirectional = make(mt.MaskedLanguageModel).mask(tokens)
    real_keys = torch.tensor([True, True, True, False])
    expected_causal = torch.ones(4, 4, dtype=torch.bool).tril() & real_keys
    assert torch.equal(causal.reshape(4, 4), expected_causal)
    assert torch.equal(bidirectional.reshape(-1), real_keys)


# --- the tied output layer ----------------------------------------------------------------------


@pytest.mark.parametrize("cls", [mt.LanguageModel, mt.MaskedLanguageModel])
def test_tie_output_shares_the_embedding_matrix(cls):
    untied, tied = make(cls), make(cls, tie_output=True)
    assert tied.output.weight is tied.embed.weight
    assert untied.output.weight is not untied.embed.weight
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731 (unique parameters)
    assert count(untied) - count(tied) == V * D
    # one matrix: a gradient through the output reaches the embedding, and an edit is seen by both
    tokens = random_tokens(2, 5)
    tied(tokens).sum().backward()
    assert tied.embed.weight.grad is tied.output.weight.grad
    with torch.no_grad():
        tied.output.weight[7].fill_(0.25)
    assert torch.equal(tied.embed.weight[7], torch.full((D,), 0.25))


def test_tied_logits_are_the_embedding_product():
    model = make(mt.LanguageModel, tie_output=True, num_layers=0)  # no layers: x itself
    tokens = random_tokens(1, 6)
    with torch.no_grad():
        x = model.embed.weight[tokens] * math.sqrt(D) + sinusoid(6, D).float()
        expected = x @ model.embed.weight.T + model.output.bias
        torch.testing.assert_close(model(tokens), expected, rtol=1e-5, atol=1e-5)


# --- the key/value cache ------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_step_over_a_prompt_then_one_token_at_a_time_equals_forward(norm_first, positional):
    model = make(mt.LanguageModel, norm_first=norm_first, positional=positional).double()
    tokens = random_tokens(3, 11, seed=7)
    with torch.no_grad():
        full = model(tokens)
        state = model.start(3)
        prompt_logits, state = model.step(tokens[:, :4], state)
        pieces = [prompt_logits]
        for t in range(4, 11):
            logits, state = model.step(tokens[:, t : t + 1], state)
            pieces.append(logits)
    assert state.step == 11
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-9, atol=1e-9)


def test_step_in_uneven_chunks_equals_forward():
    model = make(mt.LanguageModel).double()
    tokens = random_tokens(2, 12, seed=8)
    with torch.no_grad():
        full = model(tokens)
        state, pieces = model.start(2), []
        for a, b in [(0, 1), (1, 5), (5, 6), (6, 12)]:
            logits, state = model.step(tokens[:, a:b], state)
            pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("layers, batch, length", [(2, 3, 7), (3, 1, 12)])
def test_cache_memory_is_two_layers_batch_length_width_floats(layers, batch, length):
    model = make(mt.LanguageModel, num_layers=layers)
    with torch.no_grad():
        state = model.start(batch)
        assert state.num_bytes() == 0
        _, state = model.step(random_tokens(batch, length - 1), state)
        _, state = model.step(random_tokens(batch, 1, seed=1), state)
    assert state.num_bytes() == 2 * layers * batch * length * D * 4  # keys and values, float32
    assert len(state.caches) == layers
    sizes = 0
    for cache in state.caches:
        for t in (cache.k, cache.v):
            assert t.shape == (batch, H, length, D // H) and t.dtype == torch.float32
            sizes += t.numel() * t.element_size()
    assert state.num_bytes() == sizes


def test_step_refuses_a_batch_of_another_size_and_positions_past_max_len():
    model = make(mt.LanguageModel)
    with torch.no_grad():
        state = model.start(2)
        _, state = model.step(random_tokens(2, 3), state)
        with pytest.raises(ValueError, match="rows"):
            model.step(random_tokens(3, 1), state)
        with pytest.raises(ValueError):
            model.step(random_tokens(2, MAX_LEN - 2), state)  # 3 + 38 > 40 positions
    with pytest.raises(ValueError, match="batch"):
        model.start(0)


# --- checkpoints --------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [mt.LanguageModel, mt.MaskedLanguageModel])
@pytest.mark.parametrize("tie_output", [False, True])
def test_checkpoint_rebuilds_both_models_with_identical_logits(tmp_path, cls, tie_output):
    model = make(cls, seed=3, tie_output=tie_output, norm_first=True, positional="learned")
    with torch.no_grad():  # move every weight off its initial value
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    path = save_checkpoint(tmp_path / "lm.pt", model)
    ckpt = load_checkpoint(path)
    assert ckpt["model_class"] in MODEL_CLASSES
    assert MODEL_CLASSES[ckpt["model_class"]] == (cls, mt.LanguageModelConfig)
    rebuilt = build_model(path)
    assert type(rebuilt) is cls and rebuilt.config == model.config
    assert (rebuilt.output.weight is rebuilt.embed.weight) == tie_output
    tokens = padded_tokens(6)
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(tokens), model(tokens), rtol=0, atol=0)


def test_a_checkpoint_naming_another_class_is_refused(tmp_path):
    ckpt = load_checkpoint(save_checkpoint(tmp_path / "lm.pt", make(mt.LanguageModel)))
    ckpt["model_class"] = "os:system"
    with pytest.raises(ValueError, match="not one of the package's models"):
        build_model(ckpt)
    ckpt["model_class"] = "minitransformer.lm.models:MaskedLanguageModel"
    assert ckpt["model_class"] in MODEL_CLASSES
    assert type(build_model(ckpt)) is mt.MaskedLanguageModel  # same weights, other mask


# --- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize("field, value, words", [
    ("vocab_size", 0, "vocab_size"),
    ("num_heads", 5, "num_heads"),
    ("pad_id", V, "pad_id"),
    ("dropout", 1.5, "dropout"),
    ("positional", "rotary", "positional"),
])
def test_bad_config_values_are_refused_by_name(field, value, words):
    with pytest.raises(ValueError, match=words):
        lm_config(**{field: value})


def test_forward_refuses_ids_outside_the_vocabulary_and_too_long_rows():
    model = make(mt.LanguageModel)
    with pytest.raises(ValueError):
        model(torch.tensor([[1, V]]))
    with pytest.raises(ValueError):
        model(random_tokens(1, MAX_LEN + 1))
