"""Training both language models through fit, evaluate_loss against a hand
computation, and translation as language modelling (PromptedLanguageModel
behind the seq2seq searches, translate_with_lm)."""

from __future__ import annotations

import copy
import math
import random

import pytest
import torch
import torch.nn.functional as F

import minitransformer as mt
from minitransformer.data import BOS_ID, EOS_ID, PAD_ID, SPECIALS, Vocab, WordTokenizer
from minitransformer.decoding import beam_search, greedy_decode, translate
from minitransformer.training import TrainConfig, Trainer, evaluate_loss, fit
from minitransformer.training.checkpoint import build_model

IGNORE = -100
V = 16

pytestmark = pytest.mark.usefixtures("one_thread")


def lm(cls=mt.LanguageModel, seed: int = 0, **kw):
    torch.manual_seed(seed)
    base = dict(vocab_size=V, d_model=32, num_heads=2, num_layers=1, d_ff=64, dropout=0.0,
                max_len=48)
    return cls(mt.LanguageModelConfig(**{**base, **kw}))


def quick(**kw) -> TrainConfig:
    base = dict(lr=3e-3, schedule="constant", warmup_steps=0, epochs=None, max_steps=40,
                device="cpu", amp="off", label_smoothing=0.0)
    return TrainConfig(**{**base, **kw})


def counting(n: int, seed: int = 0) -> list[list[int]]:
    """Runs of consecutive ids (4, 5, 6, ... wrapping inside 4..15): every
    token follows from the one before it, and from the one after it."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        start, length = rng.randrange(12), rng.randint(3, 10)
        out.append([4 + (start + i) % 12 for i in range(length)])
    return out


# --- training ------------------------------------------------------------------------------------


def test_fit_teaches_a_language_model_the_next_token():
    model = lm()
    train = mt.LMBatcher(counting(200), max_tokens=200, seed=0)
    valid = list(mt.LMBatcher(counting(40, seed=1), max_tokens=200, shuffle=False))
    before = evaluate_loss(model, valid)
    history = fit(model, train, valid, config=quick(max_steps=60), progress=False)
    after = evaluate_loss(model, valid)
    assert before > 2.0 and after < 0.6 * before, (before, after)
    assert history.valid_loss[-1] == pytest.approx(after)


def test_fit_teaches_a_masked_language_model_to_fill_in():
    model = lm(mt.MaskedLanguageModel)
    masking = dict(mask_id=3, vocab_size=V, p=0.3, special_ids=(PAD_ID, BOS_ID, EOS_ID))
    train = mt.LMBatcher(counting(200), max_tokens=200, seed=0, masking=masking)
    valid = list(mt.LMBatcher(counting(40, seed=1), max_tokens=200, shuffle=False,
                              masking=masking))
    assert sum(b.num_target_tokens for b in valid) > 50
    before = evaluate_loss(model, valid)
    fit(model, train, valid, config=quick(max_steps=150), progress=False)
    after = evaluate_loss(model, valid)
    assert before > 2.0 and after < 0.6 * before, (before, after)


def test_evaluate_loss_is_the_cross_entropy_of_the_shifted_targets():
    model = lm(seed=1).eval()
    data = counting(12, seed=2)
    examples = [(s[:2], s[2:]) for s in data[:6]] + data[6:]  # with and without a prefix
    batches = [mt.make_lm_batch(examples[:5]), mt.make_lm_batch(examples[5:])]
    total, count = 0.0, 0
    with torch.no_grad():
        for part, batch in zip((examples[:5], examples[5:]), batches, strict=True):
            logits = model(batch.inputs)  # (B, L, V)
            targets = torch.full(batch.inputs.shape, IGNORE)
            for row, ex in enumerate(part):  # row t predicts token t + 1 of the sequence
                prefix, cont = ex if isinstance(ex, tuple) else ([], ex)
                seq = prefix + [BOS_ID] + cont + [EOS_ID]
                for t in range(len(prefix), len(seq) - 1):
                    targets[row, t] = seq[t + 1]
            total += float(F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1),
                                           ignore_index=IGNORE, reduction="sum"))
            count += int((targets != IGNORE).sum())
    loss = evaluate_loss(model, batches)
    assert loss == pytest.approx(total / count, rel=1e-6)
    assert math.exp(loss) == pytest.approx(math.exp(total / count), rel=1e-6)  # perplexity
    # (inputs, targets) tuples are language-model batches too
    assert evaluate_loss(model, [(b.inputs, b.targets) for b in batches]) == pytest.approx(loss)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_a_training_step_takes_the_label_smoothed_loss_of_both_kinds_of_batch(eps):
    seq2seq = mt.Transformer(mt.TransformerConfig(
        V, V, d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=64,
        dropout=0.0, max_len=32))
    pairs = [(s, list(reversed(s))) for s in counting(6, seed=3)]
    batch = mt.make_batch(pairs)
    with torch.no_grad():
        logits = copy.deepcopy(seq2seq)(batch.src, batch.tgt_in)
    expected = F.cross_entropy(logits.reshape(-1, V), batch.tgt_out.reshape(-1),
                               ignore_index=PAD_ID, label_smoothing=eps)
    report = Trainer(seq2seq, quick(label_smoothing=eps)).step(batch)
    assert float(report.loss) == pytest.approx(float(expected), rel=1e-5)

    model = lm(seed=2)
    batch = mt.make_lm_batch([(s[:2], s[2:]) for s in counting(6, seed=4)])
    with torch.no_grad():
        logits = copy.deepcopy(model)(batch.inputs)
    targets = batch.targets.masked_fill(batch.targets == PAD_ID, IGNORE)
    expected = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1),
                               ignore_index=IGNORE, label_smoothing=eps)
    report = Trainer(model, quick(label_smoothing=eps)).step(batch)
    assert float(report.loss) == pytest.approx(float(expected), rel=1e-5)
    assert report.tokens == batch.num_target_tokens


def test_a_masked_lm_run_resumes_exactly_and_its_checkpoint_rebuilds_it(tmp_path):
    """Stop in the middle of the second epoch and resume from the file in a
    fresh model: the same losses as an uninterrupted run (the masking of every
    batch included), and build_model gives the trained model."""
    masking = dict(mask_id=3, vocab_size=V, p=0.3)
    train = mt.LMBatcher(counting(60), max_tokens=120, seed=2, masking=masking)
    n = len(train)
    total = n + n // 2 + 2
    make = lambda seed=0: lm(mt.MaskedLanguageModel, seed=seed)  # noqa: E731
    whole = fit(make(), train, config=quick(max_steps=total), progress=False)
    first = fit(make(), train, config=quick(max_steps=n + 2, checkpoint_dir=str(tmp_path)),
                progress=False)
    assert first.train_loss == whole.train_loss[: n + 2]
    resumed_model = make(seed=7)
    resumed = fit(resumed_model, train, config=quick(max_steps=total, resume=True,
                                                     checkpoint_dir=str(tmp_path)),
                  progress=False)
    assert resumed.train_loss == whole.train_loss
    rebuilt = build_model(tmp_path / "last.pt")
    assert type(rebuilt) is mt.MaskedLanguageModel
    tokens = mt.make_lm_batch(counting(4, seed=9)).inputs
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(tokens), resumed_model.eval()(tokens), rtol=0, atol=0)


# --- PromptedLanguageModel -----------------------------------------------------------------------


def prompted(prompt_len: int, seed: int = 0) -> mt.PromptedLanguageModel:
    return mt.PromptedLanguageModel(lm(seed=seed, num_layers=2).double().eval(), prompt_len)


def sources(n: int = 4, length: int = 5, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, V, (n, length), generator=g)


def test_decode_is_the_slice_of_forward_on_the_concatenation():
    model = prompted(5)
    src = sources()
    tgt = torch.cat([torch.full((4, 1), BOS_ID), sources(4, 3, seed=1)], dim=1)
    with torch.no_grad():
        whole = model.model(torch.cat([src, tgt], dim=1))  # (N, S + T, V)
        got = model.decode(tgt, model.encode(src, model.src_mask(src)))
        assert got.shape == (4, 4, V)
        torch.testing.assert_close(got, whole[:, 5:], rtol=0, atol=0)
        torch.testing.assert_close(model(src, tgt), whole[:, 5:], rtol=0, atol=0)
        state = model.start_decoding(model.encode(src))  # the cached path, one token a step
        for t in range(4):
            logits, state = model.decode_next(tgt[:, t], state)
            torch.testing.assert_close(logits, whole[:, 5 + t], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_searches_with_the_cache_equal_those_without(seed):
    model = prompted(5, seed)
    src = sources(5, 5, seed)
    cached = greedy_decode(model, src, max_len=12, use_cache=True)
    assert cached == greedy_decode(model, src, max_len=12, use_cache=False)
    assert any(len(ids) > 0 for ids in cached)
    for beam in (1, 3):
        with_cache = beam_search(model, src, beam_size=beam, max_len=10, use_cache=True)
        assert with_cache == beam_search(model, src, beam_size=beam, max_len=10,
                                         use_cache=False)
    assert beam_search(model, src, beam_size=1, max_len=12, length_penalty=0.0) == cached


def test_greedy_decode_is_the_argmax_chain_after_the_prompt():
    model = prompted(4, seed=2)
    src = sources(3, 4, seed=2)
    got = greedy_decode(model, src, max_len=6, eos_id=EOS_ID)
    with torch.no_grad():
        for row, ids in enumerate(got):
            seq = torch.cat([src[row], torch.tensor([BOS_ID])])[None]
            expected = []
            for _ in range(6):
                last = model.model(seq)[0, -1]
                last[[PAD_ID, BOS_ID]] = -math.inf  # never generated by the searches
                token = int(last.argmax())
                if token == EOS_ID:
                    break
                expected.append(token)
                seq = torch.cat([seq, torch.tensor([[token]])], dim=1)
            assert ids == expected


def test_padded_prompts_are_refused():
    model = prompted(5)
    src = sources()
    src[1, 4] = PAD_ID
    with pytest.raises(ValueError, match="padding"):
        model.encode(src)
    with pytest.raises(ValueError, match="padding"):
        greedy_decode(model, src, max_len=4)


def test_the_target_length_is_what_the_prompt_leaves():
    model = prompted(10)
    assert model.config.max_len == 48 - 10
    assert model.config.pad_id == PAD_ID and model.config.tgt_vocab_size == V
    with pytest.raises(TypeError):
        mt.PromptedLanguageModel(torch.nn.Linear(2, 2), 3)


# --- translate_with_lm ---------------------------------------------------------------------------


WORDS = [f"w{i}" for i in range(V - len(SPECIALS))]


def word_tokenizer() -> WordTokenizer:
    return WordTokenizer(Vocab(SPECIALS + WORDS))


def test_translate_with_lm_groups_by_length_and_keeps_the_input_order(monkeypatch):
    tok = word_tokenizer()
    model = lm(seed=3, num_layers=2).double().eval()
    sentences = ["w1 w2 w3", "w4", "", "w5 w6", "w7 w8 w9", "w3", "w2 w2"]
    calls = []

    def spy(prompted_model, group, *args, **kw):
        calls.append((prompted_model, list(group)))
        return translate(prompted_model, group, *args, **kw)

    monkeypatch.setattr("minitransformer.lm.translation.translate", spy)
    got = mt.translate_with_lm(model, sentences, tok, tok, extra_len=5)
    monkeypatch.undo()
    assert len(got) == len(sentences) and got[2] == ""
    lengths = []
    for prompted_model, group in calls:
        sizes = {len(tok.encode(s)) for s in group}
        assert len(sizes) == 1  # one prompt length per group
        (size,) = sizes
        assert prompted_model.config.max_len == 48 - size
        lengths.append(size)
    assert lengths == [1, 2, 3]
    assert sorted(s for _, group in calls for s in group) == sorted(s for s in sentences if s)
    # each output is that sentence's translation on its own
    for sentence, out in zip(sentences, got, strict=True):
        if sentence:
            alone = mt.PromptedLanguageModel(model, len(tok.encode(sentence)))
            assert out == translate(alone, [sentence], tok, tok, extra_len=5)[0]
    assert any(got[i] != got[j] for i in range(len(got)) for j in range(len(got)) if i != j)


def test_translate_with_lm_beam_and_cache_options_pass_through():
    tok = word_tokenizer()
    model = lm(seed=4, num_layers=2).double().eval()
    sentences = ["w1 w2", "w3", "w4 w5 w6"]
    for beam in (1, 3):
        cached = mt.translate_with_lm(model, sentences, tok, tok, beam_size=beam, extra_len=4)
        assert cached == mt.translate_with_lm(model, sentences, tok, tok, beam_size=beam,
                                              extra_len=4, use_cache=False)


def test_translate_with_lm_refuses_a_single_string():
    tok = word_tokenizer()
    with pytest.raises(TypeError, match="single string"):
        mt.translate_with_lm(lm(), "w1 w2", tok, tok)


@pytest.mark.parametrize("words", [5, 8, 11])
def test_translate_with_lm_reads_the_whole_source_when_it_fits(words):
    """A prompt of S tokens leaves max_len - S positions for the target; the
    source itself is not cut to that (it was, silently, when S > max_len / 2)."""
    tok = word_tokenizer()
    model = lm(seed=5, max_len=12).double().eval()
    sentence = " ".join(WORDS[i % len(WORDS)] for i in range(words))
    src = tok.encode(sentence)
    assert len(src) == words
    seq, expected = src + [BOS_ID], []  # the argmax chain by hand, as far as the positions go
    with torch.no_grad():
        while len(seq) <= 12:
            last = model(torch.tensor([seq]))[0, -1]
            last[[PAD_ID, BOS_ID, tok.unk_id]] = -math.inf
            token = int(last.argmax())
            if token == EOS_ID:
                break
            expected.append(token)
            seq.append(token)
    assert mt.translate_with_lm(model, [sentence], tok, tok, extra_len=50) == [
        tok.decode(expected)]


def test_translate_with_lm_cuts_a_source_with_no_room_left_to_what_fits():
    tok = word_tokenizer()
    model = lm(seed=5, max_len=12).double().eval()
    long = " ".join(WORDS[i % len(WORDS)] for i in range(15))
    cut = " ".join(long.split()[:11])  # 11 tokens + BOS fill the 12 positions
    assert mt.translate_with_lm(model, [long, cut], tok, tok) == \
        mt.translate_with_lm(model, [cut, cut], tok, tok)
    assert len(mt.translate_with_lm(model, [long], tok, tok)[0].split()) == 1
