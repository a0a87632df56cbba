"""The whole Transformer: invariants, configuration errors and a learning test."""

import pytest
import torch
import torch.nn.functional as F

import minitransformer as mt


def small_config(**kw):
    base = dict(
        src_vocab_size=20, tgt_vocab_size=22, d_model=32, num_heads=4, num_encoder_layers=2,
        num_decoder_layers=2, d_ff=64, dropout=0.0, max_len=40,
    )
    base.update(kw)
    return mt.TransformerConfig(**base)


@pytest.mark.parametrize("norm_first", [False, True])
def test_forward_shape_and_submodules(norm_first):
    model = mt.Transformer(small_config(norm_first=norm_first))
    src, tgt = torch.randint(1, 20, (3, 7)), torch.randint(1, 22, (3, 5))
    assert model(src, tgt).shape == (3, 5, 22)
    memory = model.encode(src)
    assert memory.shape == (3, 7, 32)
    torch.testing.assert_close(model.decode(tgt, memory, model.src_mask(src)), model(src, tgt))
    names = dict(model.named_children()).keys()
    assert {"src_embed", "tgt_embed", "encoder", "decoder", "generator"} <= names


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_future_target_tokens_do_not_change_earlier_logits(norm_first, seed):
    torch.manual_seed(seed)
    model = mt.Transformer(small_config(norm_first=norm_first)).eval()
    src, tgt = torch.randint(1, 20, (2, 6)), torch.randint(1, 22, (2, 8))
    changed = tgt.clone()
    changed[:, 5:] = torch.randint(1, 22, (2, 3))
    a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_extra_source_padding_changes_nothing(norm_first):
    model = mt.Transformer(small_config(norm_first=norm_first)).eval()
    src, tgt = torch.randint(1, 20, (2, 6)), torch.randint(1, 22, (2, 4))
    padded = torch.cat([src, torch.zeros(2, 5, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(src, tgt), model(padded, tgt), rtol=1e-5, atol=1e-5)


def test_encoder_without_positions_is_permutation_equivariant():
    model = mt.Transformer(small_config(positional="none")).eval()
    src = torch.randint(1, 20, (2, 9))
    perm = torch.randperm(9)
    torch.testing.assert_close(model.encode(src)[:, perm], model.encode(src[:, perm]))
    # ...and with sinusoidal positions it is not
    with_pe = mt.Transformer(small_config()).eval()
    assert not torch.allclose(with_pe.encode(src)[:, perm], with_pe.encode(src[:, perm]))


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = mt.Transformer(small_config(positional="none", num_encoder_layers=0)).eval()
    src = torch.randint(1, 20, (1, 4))
    torch.testing.assert_close(model.encode(src), model.src_embed(src) * 32**0.5)


def test_shared_and_tied_embeddings():
    model = mt.Transformer(small_config(tgt_vocab_size=20, share_embeddings=True, tie_output=True))
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight
    untied = mt.Transformer(small_config())
    n_tied = sum(p.numel() for p in model.parameters())
    n_untied = sum(p.numel() for p in untied.parameters())
    # untied: two embeddings and a generator (weight + bias); tied: one table + a bias
    assert n_untied - n_tied == (20 * 32 + 22 * 32 + 22 * 32 + 22) - (20 * 32 + 20)


def test_config_round_trip():
    config = small_config(norm_first=True)
    assert mt.TransformerConfig(**config.to_dict()) == config


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(d_model=30, num_heads=4), "divisible"),
        (dict(src_vocab_size=0), "src_vocab_size"),
        (dict(dropout=1.5), "dropout"),
        (dict(share_embeddings=True), "share_embeddings"),
        (dict(positional="rotary"), "positional"),
        (dict(pad_id=25), "pad_id"),
        (dict(num_encoder_layers=-1), "num_encoder_layers"),
    ],
)
def test_config_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        small_config(**kw)


def test_input_errors():
    model = mt.Transformer(small_config())
    src, tgt = torch.randint(1, 20, (2, 5)), torch.randint(1, 22, (2, 4))
    with pytest.raises(TypeError, match="integer token ids"):
        model(src.float(), tgt)
    with pytest.raises(TypeError, match="integer token ids"):
        model(src, tgt.float())
    with pytest.raises(ValueError, match="longer than max_len=40"):
        model(torch.randint(1, 20, (2, 41)), tgt)
    with pytest.raises(ValueError, match=r"shape \(batch, len\)"):
        model(src[0], tgt)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(src, tgt + 30)
    with pytest.raises(ValueError, match="batch sizes differ"):
        model(src, tgt[:1])
    with pytest.raises(TypeError, match="TransformerConfig"):
        mt.Transformer({"src_vocab_size": 5})


def test_record_attention_maps_are_row_stochastic():
    model = mt.Transformer(small_config()).eval()
    src, tgt = torch.randint(1, 20, (2, 6)), torch.randint(1, 22, (2, 4))
    src[1, 4:] = 0
    with mt.record_attention(model) as maps:
        logits = model(src, tgt)
    torch.testing.assert_close(logits, model(src, tgt))  # recording changes nothing
    assert len(maps) == 2 + 2 * 2
    cross = maps["decoder.layers.1.cross_attn"]
    assert cross.shape == (2, 4, 4, 6)
    torch.testing.assert_close(cross.sum(-1), torch.ones(2, 4, 4))
    assert torch.all(cross[1, ..., 4:] == 0)  # padding gets no attention
    self_attn = maps["decoder.layers.0.self_attn"]
    assert torch.all(self_attn.triu(diagonal=1) == 0)  # causal


@pytest.mark.slow
def test_copy_task_overfits():
    """A seeded copy task: loss falls below a threshold and greedy decoding
    (written out here with encode/decode) reproduces the source."""
    torch.manual_seed(0)
    bos, eos, vocab = 1, 2, 12
    model = mt.Transformer(small_config(src_vocab_size=vocab, tgt_vocab_size=vocab, d_ff=64))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    src = torch.randint(3, vocab, (64, 6))
    tgt_in = torch.cat([torch.full((64, 1), bos), src], dim=1)
    tgt_out = torch.cat([src, torch.full((64, 1), eos)], dim=1)
    for _ in range(150):
        loss = F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    model.eval()
    with torch.no_grad():
        memory, mask = model.encode(src[:8]), model.src_mask(src[:8])
        out = torch.full((8, 1), bos)
        for _ in range(6):
            nxt = model.decode(out, memory, mask)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], dim=1)
    assert torch.equal(out[:, 1:], src[:8])
