"""The RNN encoder-decoders: shapes, masks, incremental decoding, learning."""

from __future__ import annotations

import functools

import pytest
import torch
from decoding_helpers import assert_incremental_matches_full
from torch import nn

from minitransformer.data import make_batch, make_synthetic, synthetic_vocab_size
from minitransformer.decoding import beam_search, greedy_decode
from minitransformer.rnn.models import (
    RNN_MODELS,
    AttentionSeq2Seq,
    ContextSeq2Seq,
    RNNConfig,
    SimpleSeq2Seq,
)
from minitransformer.seq2seq import IncrementalDecoder, Seq2SeqModel

MODELS = list(RNN_MODELS.values())


def _config(**kw):
    base = dict(src_vocab_size=20, tgt_vocab_size=23, emb_dim=8, hidden_dim=12, attn_dim=10)
    base.update(kw)
    return RNNConfig(**base)


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 20, (3, 7), generator=g)
    src[1, 4:] = 0  # padded row
    src[2, 6:] = 0
    tgt = torch.randint(4, 23, (3, 5), generator=g)
    return src, tgt


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("bidirectional", [True, False])
def test_shapes_and_interface(cls, bidirectional):
    torch.manual_seed(0)
    model = cls(_config(bidirectional=bidirectional)).eval()
    assert isinstance(model, Seq2SeqModel) and isinstance(model, IncrementalDecoder)
    src, tgt = _data()
    logits = model(src, tgt)
    assert logits.shape == (3, 5, 23)
    memory = model.encode(src)
    assert memory.shape == (3, 7, 12 * (2 if bidirectional else 1))
    torch.testing.assert_close(model.decode(tgt, memory, model.src_mask(src)), logits)
    assert model.config.pad_id == 0


@pytest.mark.parametrize("bidirectional", [True, False])
def test_summary_equals_gru_final_state_of_unpadded_source(bidirectional):
    torch.manual_seed(0)
    model = SimpleSeq2Seq(_config(bidirectional=bidirectional)).eval()
    src, _ = _data()
    memory = model.encode(src)
    summary = model.encoder.summary(memory, model.src_mask(src))
    for b in range(3):
        real = src[b][src[b] != 0][None]  # (1, S_b), no padding
        _, h_n = model.encoder.rnn(model.encoder.embed(real))  # (dirs, 1, H)
        ref = torch.cat(list(h_n[:, 0]), dim=-1)
        torch.testing.assert_close(summary[b], ref)


@pytest.mark.parametrize("cls", MODELS)
def test_source_padding_changes_nothing(cls):
    torch.manual_seed(0)
    model = cls(_config()).eval()
    src, tgt = _data()
    padded = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(src, tgt), model(padded, tgt))
    alone = model(src[1:2, :4], tgt[1:2])
    torch.testing.assert_close(model(src, tgt)[1:2], alone)


@pytest.mark.parametrize("cls", MODELS)
def test_future_target_tokens_do_not_change_earlier_logits(cls):
    torch.manual_seed(0)
    model = cls(_config()).eval()
    src, tgt = _data()
    changed = tgt.clone()
    changed[:, 3:] = 4
    torch.testing.assert_close(model(src, tgt)[:, :3], model(src, changed)[:, :3])


def test_attention_weights_sum_to_one_and_ignore_padding():
    torch.manual_seed(0)
    model = AttentionSeq2Seq(_config()).eval()
    src, tgt = _data()
    logits, weights = model(src, tgt, need_weights=True)
    assert weights.shape == (3, 5, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 5))
    assert torch.all(weights[1, :, 4:] == 0) and torch.all(weights[2, :, 6:] == 0)
    torch.testing.assert_close(logits, model(src, tgt))


def test_attention_context_is_weighted_average_of_encoder_states():
    torch.manual_seed(0)
    model = AttentionSeq2Seq(_config()).eval()
    src, tgt = _data()
    memory = model.encode(src)
    state = model.start_decoding(memory, model.src_mask(src))
    h = state["hidden"]
    # Bahdanau's score by hand: w·tanh(W_q h + W_k m_j + b).
    a = model.attention
    scores = (torch.tanh(a.w_q(h)[:, None] + a.w_k(memory)) @ a.w.weight[0])  # (B, S)
    scores = scores.masked_fill(src == 0, float("-inf"))
    _, weights = model(src, tgt, need_weights=True)
    torch.testing.assert_close(weights[:, 0], scores.softmax(-1))


def test_only_attention_model_changes_its_context_per_step():
    """The simple model gets no context, the context model the same c at every step."""
    torch.manual_seed(0)
    simple = SimpleSeq2Seq(_config())
    context = ContextSeq2Seq(_config())
    assert simple.rnn.input_size == 8  # the previous token only
    assert context.rnn.input_size == 8 + 24  # previous token and the static summary c


@pytest.mark.parametrize("cls", MODELS)
def test_incremental_decoding_matches_full_decode(cls):
    torch.manual_seed(0)
    model = cls(_config()).eval()
    src, tgt = _data()
    assert_incremental_matches_full(model, src, tgt, atol=1e-5, rtol=1.3e-6)  # float32 defaults
    memory, mask = model.encode(src), model.src_mask(src)
    full = model.decode(tgt, memory, mask)
    # Reordering rows (repeats allowed) is as if those rows were decoded alone.
    index = torch.tensor([2, 2, 0])
    state = model.reorder_state(model.start_decoding(memory, mask), index)
    logits, _ = model.decode_next(tgt[index, 0], state)
    torch.testing.assert_close(logits, full[index, 0])


def test_clear_errors():
    with pytest.raises(ValueError, match="hidden_dim must be a positive int"):
        _config(hidden_dim=0)
    with pytest.raises(ValueError, match="dropout"):
        _config(dropout=1.0)
    with pytest.raises(TypeError, match="RNNConfig"):
        SimpleSeq2Seq({"src_vocab_size": 3})
    model = SimpleSeq2Seq(_config())
    src, tgt = _data()
    with pytest.raises(TypeError, match="integer token ids"):
        model(src.float(), tgt)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(src, tgt + 100)
    with pytest.raises(ValueError, match="batch sizes differ"):
        model(src, tgt[:2])


@functools.cache
def _train_copy(cls, steps=150, seed=0):
    torch.manual_seed(seed)
    vocab = synthetic_vocab_size(6)
    examples = make_synthetic("copy", 64, 3, 6, num_symbols=6, seed=seed, split="train")
    batches = [make_batch(examples[i : i + 16]) for i in range(0, 64, 16)]
    model = cls(RNNConfig(vocab, vocab, emb_dim=32, hidden_dim=64, attn_dim=32, dropout=0.0))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0)
    for step in range(steps):
        batch = batches[step % len(batches)]
        logits = model(batch.src, batch.tgt_in)
        loss = loss_fn(logits.reshape(-1, vocab), batch.tgt_out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model, examples, loss.item()


@pytest.mark.slow
@pytest.mark.parametrize("cls", MODELS)
def test_each_model_overfits_a_tiny_copy_task_and_decodes_it(cls):
    model, examples, loss = _train_copy(cls)
    assert loss < 0.1, f"{cls.__name__} did not overfit: loss {loss:.3f}"
    batch = make_batch(examples[:16])
    out = greedy_decode(model, batch.src, max_len=10)
    uncached = greedy_decode(model, batch.src, max_len=10, use_cache=False)
    assert out == uncached
    correct = sum(o == src for o, (src, _) in zip(out, examples[:16], strict=True))
    assert correct >= 14, f"{cls.__name__}: only {correct}/16 copies right"


@pytest.mark.slow
def test_beam_search_decodes_rnn_models():
    model, examples, _ = _train_copy(AttentionSeq2Seq)
    batch = make_batch(examples[:8])
    greedy = greedy_decode(model, batch.src, max_len=10)
    assert beam_search(model, batch.src, beam_size=1, max_len=10) == greedy
    beams = beam_search(model, batch.src, beam_size=3, max_len=10)
    assert sum(b == src for b, (src, _) in zip(beams, examples[:8], strict=True)) >= 7


def test_packaged_benchmark_results_have_what_chapter_1_reads():
    from minitransformer.results import load_result

    results = load_result("rnn_history")  # a missing file fails, naming the script
    for key in ("what", "script", "date", "machine", "budget_minutes_per_model",
                "contention_note", "reference_note", "models"):
        assert key in results, key
    assert results["models"], "no model results"
    for name, r in results["models"].items():
        assert name in ("simple", "context", "attention", "transformer")
        for key in ("label", "parameters", "steps", "epochs", "tokens_per_second",
                    "test_bleu", "reference_bleu_tutorial"):
            assert key in r, (name, key)
        assert 0.0 <= r["test_bleu"] <= 100.0


@pytest.mark.parametrize("cls", MODELS)
def test_shared_trainer_trains_rnn_models(cls):
    from minitransformer.training import TrainConfig, evaluate_loss, fit

    vocab = synthetic_vocab_size(6)
    examples = make_synthetic("copy", 32, 3, 6, num_symbols=6, seed=0, split="train")
    batches = [make_batch(examples[i : i + 8]) for i in range(0, 32, 8)]
    torch.manual_seed(0)
    model = cls(RNNConfig(vocab, vocab, emb_dim=16, hidden_dim=16, attn_dim=16, dropout=0.0))
    before = evaluate_loss(model, batches)
    config = TrainConfig(lr=1e-2, schedule="constant", warmup_steps=0, label_smoothing=0.0,
                         epochs=3, seed=0, device="cpu")
    history = fit(model, batches, config=config, progress=False)
    assert len(history.train_loss) == 12
    assert evaluate_loss(model, batches) < before
