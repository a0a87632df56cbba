"""The whole Transformer: invariants, configuration errors and a learning test."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

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


def test_three_way_tying_accumulates_the_gradients_of_its_three_uses():
    """Tied: one tensor, whose gradient is the sum of what the source
    embedding, the target embedding and the output projection each receive,
    checked against an untied model holding the same weights in three tensors."""
    torch.manual_seed(0)
    config = small_config(tgt_vocab_size=20, share_embeddings=True, tie_output=True)
    tied = mt.Transformer(config)
    untied = mt.Transformer(small_config(tgt_vocab_size=20))
    untied.load_state_dict(tied.state_dict())  # every key, the three uses included
    shared = tied.src_embed.weight
    assert [n for n, p in tied.named_parameters() if p is shared] == ["src_embed.weight"]
    tables = (untied.src_embed.weight, untied.tgt_embed.weight, untied.generator.weight)
    assert len({id(t) for t in tables}) == 3
    for table in tables:
        torch.testing.assert_close(table, shared)
    src, tgt = torch.randint(1, 20, (3, 6)), torch.randint(1, 20, (3, 5))
    src[0, 4:] = 0  # padding: its embedding row gets no gradient from the lookups
    target = torch.randint(1, 20, (3, 5))
    for model in (tied, untied):
        F.cross_entropy(model(src, tgt).flatten(0, 1), target.flatten()).backward()
    torch.testing.assert_close(tied(src, tgt), untied(src, tgt))
    parts = (untied.src_embed.weight.grad, untied.tgt_embed.weight.grad,
             untied.generator.weight.grad)
    assert all(g.abs().sum() > 0 for g in parts)  # each use contributes
    torch.testing.assert_close(shared.grad, sum(parts))
    # one optimiser step moves all three uses together
    torch.optim.SGD(tied.parameters(), lr=0.1).step()
    assert tied.generator.weight is tied.tgt_embed.weight is tied.src_embed.weight


def test_tied_model_survives_training_with_an_average_and_a_checkpoint(tmp_path):
    from minitransformer.training import TrainConfig, fit
    from minitransformer.training.checkpoint import build_model, load_checkpoint

    torch.manual_seed(0)
    model = mt.Transformer(small_config(tgt_vocab_size=20, share_embeddings=True,
                                        tie_output=True))
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        src = torch.randint(4, 20, (4, 6), generator=g)
        tgt = torch.cat([torch.ones(4, 1, dtype=torch.long), src], 1)
        batches.append((src, tgt[:, :-1], tgt[:, 1:]))
    cfg = TrainConfig(epochs=2, warmup_steps=2, ema_decay=0.9, checkpoint_dir=str(tmp_path),
                      device="cpu")
    fit(model, batches, batches[:1], cfg, progress=False)
    assert model.generator.weight is model.tgt_embed.weight is model.src_embed.weight
    rebuilt = build_model(load_checkpoint(tmp_path / "last.pt"))
    assert rebuilt.generator.weight is rebuilt.tgt_embed.weight is rebuilt.src_embed.weight
    model.eval()
    src, tgt_in, _ = batches[0]
    torch.testing.assert_close(rebuilt(src, tgt_in), model(src, tgt_in))


def test_initialisation_by_module_type():
    torch.manual_seed(0)
    model = mt.Transformer(small_config(positional="learned", max_len=400))
    positional = {*model.src_pos.modules(), *model.tgt_pos.modules()}
    for name, m in model.named_modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)) and m not in positional:
            fan_out, fan_in = m.weight.shape
            bound = math.sqrt(6 / (fan_in + fan_out))  # Xavier-uniform
            assert m.weight.abs().max() <= bound, name
            assert m.weight.abs().max() > 0.9 * bound, name
    table = model.src_pos.embedding.weight  # its own N(0, 1/2), not Xavier
    assert abs(table.std().item() - 2**-0.5) < 0.02
    assert torch.all(model.src_embed.weight[0] == 0) and torch.all(model.tgt_embed.weight[0] == 0)


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
        (dict(norm="batchnorm"), "norm must be one of 'layernorm', 'rmsnorm'"),
        (dict(feed_forward="tanh"), "feed_forward must be one of 'relu', 'gelu'"),
        (dict(num_kv_heads=3), "num_kv_heads"),
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


def test_entry_points_check_memory_and_masks():
    """Inner modules compute lean; the entry points still give the friendly errors."""
    model = mt.Transformer(small_config())
    src, tgt = torch.randint(1, 20, (2, 5)), torch.randint(1, 22, (2, 4))
    memory = model.encode(src)
    with pytest.raises(ValueError, match=r"Decoder.*memory_mask of shape|does not broadcast"):
        model.decode(tgt, memory, torch.ones(2, 1, 1, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key must have shape \(batch, len, d_model=32\)"):
        model.decode(tgt, memory[..., :16])
    with pytest.raises(ValueError, match="does not broadcast"):
        model.encode(src, torch.ones(2, 1, 1, 9, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"start_decoding.*memory must have shape"):
        model.start_decoding(memory[..., :16])
    with pytest.raises(ValueError, match=r"start_decoding.*does not broadcast"):
        model.start_decoding(memory, torch.ones(2, 1, 1, 6, dtype=torch.bool))


def _count_checks(monkeypatch) -> dict[str, int]:
    """Replace every function of ``minitransformer.checks``, wherever the
    package imported it, by a wrapper that counts its calls."""
    import sys

    from minitransformer import checks

    counts: dict[str, int] = {}
    originals = {name: getattr(checks, name) for name in checks.__all__}

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return fn(*args, **kwargs)

        return wrapper

    for module_name, module in list(sys.modules.items()):
        if module_name.split(".")[0] != "minitransformer":
            continue
        for name, fn in originals.items():
            if getattr(module, name, None) is fn:
                monkeypatch.setattr(module, name, counting(name, fn))
    return counts


def test_arguments_are_checked_once_at_the_entry_points(monkeypatch):
    """A teacher-forced forward of a 3+3 model checks each input once (its
    ids' range once: one host read each); a cached 10-step greedy decode
    checks the source and its mask once and each step's tokens once: no
    check per layer or per attention, nothing else grows with the steps."""

    def greedy_counts(model, steps):
        counts.clear()
        out = mt.greedy_decode(model, src, max_len=steps, banned_ids=[2])  # EOS banned
        assert [len(row) for row in out] == [steps, steps]
        return dict(counts)

    deep = mt.Transformer(small_config(num_encoder_layers=3, num_decoder_layers=3)).eval()
    shallow = mt.Transformer(small_config(num_encoder_layers=1, num_decoder_layers=1)).eval()
    src, tgt = torch.randint(3, 20, (2, 7)), torch.randint(3, 22, (2, 5))
    counts = _count_checks(monkeypatch)
    deep(src, tgt)
    assert counts == {"check_tokens": 2, "check_token_range": 2}
    ten = greedy_counts(deep, 10)
    assert ten["check_attention_inputs"] == 1  # the source mask, by the encoder
    assert ten["check_token_range"] == 1 and "check_qkv" not in ten
    assert "check_positions" not in ten
    five = greedy_counts(deep, 5)
    assert {k: ten[k] - five.get(k, 0) for k in ten if ten[k] != five.get(k)} == {
        "check_tokens": 5  # decode_next's tokens, once per step
    }
    assert greedy_counts(shallow, 10) == ten  # the same with 1 + 1 layers


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


# --- against torch.nn.Transformer -----------------------------------------------
#
# nn.Transformer always ends its encoder and its decoder with a LayerNorm
# (encoder.norm, decoder.norm), post-LN included; ours has them only with
# norm_first=True (pre-LN). So the pre-LN comparison copies their final norms
# into ours, and the post-LN one removes theirs (set to None): a post-LN model
# here is an nn.Transformer without its two final norms. nn.Transformer has no
# embeddings, positions or output layer: both sides use ours.


def _torch_transformer(norm_first: bool, seed: int) -> nn.Transformer:
    torch.manual_seed(seed)
    theirs = nn.Transformer(
        32, 4, 2, 3, 64, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    with torch.no_grad():  # LayerNorms away from (1, 0), so that copying them is tested
        for m in theirs.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
    if not norm_first:
        theirs.encoder.norm = theirs.decoder.norm = None
    return theirs


def _padded_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(1, 20, (3, 7), generator=g), torch.randint(1, 22, (3, 6), generator=g)
    src[1, 4:], tgt[1, 3:] = 0, 0
    src[2, 6:], tgt[2, 5:] = 0, 0
    return src, tgt


@pytest.mark.filterwarnings("ignore::UserWarning")  # nn.Transformer's nested-tensor notes
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_whole_model_matches_torch_transformer(norm_first, seed):
    theirs = _torch_transformer(norm_first, seed)
    ours = mt.Transformer(small_config(num_decoder_layers=3, norm_first=norm_first)).eval()
    mt.load_torch_transformer(ours, theirs)
    src, tgt = _padded_batch(seed)
    scale = math.sqrt(32)
    with torch.no_grad():
        h = theirs(
            ours.src_pos(ours.src_embed(src) * scale),
            ours.tgt_pos(ours.tgt_embed(tgt) * scale),
            tgt_mask=mt.to_torch_bool_mask(mt.causal_mask(6)),
            src_key_padding_mask=mt.torch_key_padding_mask(src, 0),
            tgt_key_padding_mask=mt.torch_key_padding_mask(tgt, 0),
            memory_key_padding_mask=mt.torch_key_padding_mask(src, 0),
        )
        expected = ours.generator(h)  # (B, T, V)
        got = ours(src, tgt)
    real = tgt != 0  # nn.Transformer's fast path may zero padded rows: compare real ones
    torch.testing.assert_close(got[real], expected[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_stack_matches_torch_decoder(norm_first):
    torch.manual_seed(3)
    d, h, f, n = 16, 2, 24, 3
    layer = nn.TransformerDecoderLayer(d, h, f, dropout=0.0, batch_first=True,
                                       norm_first=norm_first)
    theirs = nn.TransformerDecoder(layer, n, norm=nn.LayerNorm(d) if norm_first else None).eval()
    ours = mt.Decoder(n, d, h, f, dropout=0.0, norm_first=norm_first).eval()
    mt.load_torch_decoder(ours, theirs)
    src, tgt = _padded_batch(4)
    x, memory = torch.randn(3, 6, d), torch.randn(3, 7, d)
    expected = theirs(
        x, memory,
        tgt_mask=mt.to_torch_bool_mask(mt.causal_mask(6)),
        tgt_key_padding_mask=mt.torch_key_padding_mask(tgt, 0),
        memory_key_padding_mask=mt.torch_key_padding_mask(src, 0),
    )
    tgt_mask = mt.padding_mask(tgt, 0) & mt.causal_mask(6)  # (B, 1, T, T)
    got = ours(x, memory, tgt_mask, mt.padding_mask(src, 0))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_loading_checks_the_final_norms():
    ours = mt.Transformer(small_config(norm_first=False))
    theirs = nn.Transformer(32, 4, 2, 2, 64, batch_first=True)  # has final norms
    with pytest.raises(ValueError, match="no final LayerNorm"):
        mt.load_torch_transformer(ours, theirs)
    with pytest.raises(ValueError, match="layers"):
        mt.load_torch_decoder(ours.decoder, nn.TransformerDecoder(
            nn.TransformerDecoderLayer(32, 4, 64, batch_first=True), 3))


# --- torch.compile ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("norm_first", [False, True])
def test_whole_model_compiles_without_graph_breaks_and_matches_eager(norm_first):
    """``fullgraph=True`` fails on any graph break, such as a Python branch on
    a tensor's value (a host synchronisation): the forward pass has none, on a
    padded batch with an all-padding source row (its attention rows are fully
    masked). Forward and backward (AOT autograd) must match eager. The
    ``aot_eager`` backend captures and differentiates the whole graph without
    generating code, which keeps the test short; ``inductor`` (the default)
    gives the same graph to a compiler."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = mt.Transformer(small_config(norm_first=norm_first)).train()  # dropout 0
    src, tgt = _padded_batch(5)
    src[0] = 0  # a source that is all padding
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out = compiled(src, tgt)
    grads = torch.autograd.grad(out.square().mean(), list(model.parameters()))
    expected = model(src, tgt)
    expected_grads = torch.autograd.grad(expected.square().mean(), list(model.parameters()))
    torch.testing.assert_close(out, expected)
    assert not out.isnan().any()
    for g, e in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e)


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


def test_model_classes_register_themselves_for_checkpoint_loading(tmp_path):
    """The model modules declare their classes (``@register_model``); a
    checkpoint written before ``TransformerConfig`` moved to ``config.py``
    (``config_class`` ``minitransformer.model:TransformerConfig``) still loads."""
    from minitransformer.seq2seq import MODELS, qualified_name
    from minitransformer.training.checkpoint import build_model, load_checkpoint, save_checkpoint

    assert MODELS[qualified_name(mt.Transformer)] == (mt.Transformer, mt.TransformerConfig)
    model = mt.Transformer(small_config()).eval()
    save_checkpoint(tmp_path / "m.pt", model)
    ckpt = load_checkpoint(tmp_path / "m.pt")
    assert ckpt["config_class"] == "minitransformer.config:TransformerConfig"
    ckpt["config_class"] = "minitransformer.model:TransformerConfig"  # as older files say
    rebuilt = build_model(ckpt).eval()
    src, tgt = torch.randint(1, 20, (2, 5)), torch.randint(1, 22, (2, 4))
    torch.testing.assert_close(rebuilt(src, tgt), model(src, tgt))
