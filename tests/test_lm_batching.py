"""Language-model batches: the next-token shift built by hand from its
definition, BERT's 80/10/10 masking by its statistics, and LMBatcher's
budget and reproducibility."""

from __future__ import annotations

import math
import random

import pytest
import torch

import minitransformer as mt
from minitransformer.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID

IGNORE = -100
V = 30
MASK = V  # a mask id outside the ordinary vocabulary
SPECIAL = (PAD_ID, BOS_ID, EOS_ID, UNK_ID)


def sentences(n: int = 60, seed: int = 0, lo: int = 1, hi: int = 12) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4, V) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


# --- make_lm_batch -------------------------------------------------------------------------------


def by_hand(examples) -> tuple[list[list[int]], list[list[int]]]:
    """The definition: row = prefix + [BOS] + continuation + [EOS]; input t = row[t],
    target t = row[t + 1], no target inside the prefix; padded to the longest row."""
    rows, starts = [], []
    for ex in examples:
        prefix, cont = ex if isinstance(ex, tuple) else ([], ex)
        rows.append(list(prefix) + [BOS_ID] + list(cont) + [EOS_ID])
        starts.append(len(prefix))
    length = max(len(r) for r in rows) - 1
    inputs, targets = [], []
    for row, start in zip(rows, starts, strict=True):
        ins, outs = [PAD_ID] * length, [PAD_ID] * length
        for t in range(len(row) - 1):
            ins[t] = row[t]
            outs[t] = row[t + 1] if t >= start else IGNORE
        inputs.append(ins)
        targets.append(outs)
    return inputs, targets


def test_the_shift_of_plain_sentences():
    examples = [[7, 8, 9], [5], [6, 6, 6, 6, 6]]
    batch = mt.make_lm_batch(examples)
    inputs, targets = by_hand(examples)
    assert batch.inputs.tolist() == inputs and batch.targets.tolist() == targets
    assert batch.inputs.dtype == batch.targets.dtype == torch.long
    assert batch.inputs.tolist()[0] == [BOS_ID, 7, 8, 9, PAD_ID, PAD_ID]
    assert batch.targets.tolist()[0] == [7, 8, 9, EOS_ID, PAD_ID, PAD_ID]
    # position t predicts the token at t + 1: each target is the next input
    real = batch.inputs[:, 1:] != PAD_ID
    assert torch.equal(batch.targets[:, :-1][real], batch.inputs[:, 1:][real])


def test_the_prefix_has_no_targets():
    examples = [([20, 21, 22], [7, 8]), ([23], [9, 10, 11, 12]), ([24, 25], [])]
    batch = mt.make_lm_batch(examples)
    inputs, targets = by_hand(examples)
    assert batch.inputs.tolist() == inputs and batch.targets.tolist() == targets
    assert batch.targets.tolist()[0] == [IGNORE, IGNORE, IGNORE, 7, 8, EOS_ID]
    assert batch.num_target_tokens == 3 + 5 + 1  # continuations and their EOS


def test_without_a_prefix_the_batch_is_make_batchs_target_side():
    examples = sentences(8, seed=1)
    lm = mt.make_lm_batch(examples)
    seq2seq = mt.make_batch([([4], s) for s in examples])
    assert torch.equal(lm.inputs, seq2seq.tgt_in)
    assert torch.equal(lm.targets, seq2seq.tgt_out)
    assert lm.num_target_tokens == seq2seq.num_tgt_tokens


def test_other_special_ids_are_used():
    batch = mt.make_lm_batch([([9], [7]), [8, 8]], pad_id=3, bos_id=4, eos_id=5)
    assert batch.inputs.tolist() == [[9, 4, 7], [4, 8, 8]]
    assert batch.targets.tolist() == [[IGNORE, 7, 5], [8, 8, 5]]
    assert mt.make_lm_batch([[7]], pad_id=3).inputs.tolist() == [[BOS_ID, 7]]


def test_bad_examples_are_refused():
    with pytest.raises(ValueError, match="no examples"):
        mt.make_lm_batch([])
    with pytest.raises(TypeError, match="example 1"):
        mt.make_lm_batch([[5, 6], "a sentence"])
    with pytest.raises(TypeError, match="example 0"):
        mt.make_lm_batch([[5, 6.0]])


# --- mask_tokens ---------------------------------------------------------------------------------


def big_tokens(seed: int = 0) -> torch.Tensor:
    """200 rows of [BOS] + 400 ordinary or unknown ids + [EOS], right-padded."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, V, (200, 402), generator=g)
    tokens[:, 0] = BOS_ID
    unknown = torch.rand(tokens.shape, generator=g) < 0.05
    tokens[unknown] = UNK_ID
    lengths = torch.randint(100, 401, (200,), generator=g)
    for row, n in enumerate(lengths.tolist()):
        tokens[row, n + 1] = EOS_ID
        tokens[row, n + 2:] = PAD_ID
    return tokens


def within(count: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p)) + 1


def test_mask_tokens_follows_the_80_10_10_rule():
    tokens = big_tokens()
    inputs, labels = mt.mask_tokens(tokens, mask_id=MASK, vocab_size=V, p=0.15,
                                    generator=torch.Generator().manual_seed(0))
    ordinary = ~torch.isin(tokens, torch.tensor(SPECIAL))
    chosen = labels != IGNORE
    n_ordinary, n_chosen = int(ordinary.sum()), int(chosen.sum())
    assert n_ordinary > 40_000
    assert within(n_chosen, n_ordinary, 0.15)
    assert not (chosen & ~ordinary).any()  # specials and padding never chosen
    # labels: the original token where chosen, IGNORE exactly elsewhere
    assert torch.equal(labels[chosen], tokens[chosen])
    assert (labels[~chosen] == IGNORE).all()
    assert torch.equal(inputs[~chosen], tokens[~chosen])
    masked = inputs[chosen] == MASK
    changed = (inputs[chosen] != tokens[chosen]) & ~masked
    kept = inputs[chosen] == tokens[chosen]
    pool = V - len(SPECIAL)  # a random replacement may draw the token itself
    assert within(int(masked.sum()), n_chosen, 0.8)
    assert within(int(changed.sum()), n_chosen, 0.1 * (1 - 1 / pool))
    assert within(int(kept.sum()), n_chosen, 0.1 + 0.1 / pool)
    replaced = inputs[chosen][changed]
    assert not torch.isin(replaced, torch.tensor([*SPECIAL, MASK])).any()
    assert (replaced >= 0).all() and (replaced < V).all()
    # replacements are spread over the ordinary ids
    assert set(replaced.tolist()) == set(range(4, V))


@pytest.mark.parametrize("p", [0.05, 0.5, 1.0])
def test_mask_tokens_chooses_a_fraction_p(p):
    tokens = big_tokens(1)
    _, labels = mt.mask_tokens(tokens, mask_id=MASK, vocab_size=V, p=p,
                               generator=torch.Generator().manual_seed(1))
    ordinary = ~torch.isin(tokens, torch.tensor(SPECIAL))
    chosen = labels != IGNORE
    if p == 1.0:
        assert torch.equal(chosen, ordinary)
    else:
        assert within(int(chosen.sum()), int(ordinary.sum()), p)


def test_mask_tokens_never_chooses_the_mask_id_or_given_special_ids():
    tokens = big_tokens(2)
    tokens[:, 5] = 7
    tokens[:, 6] = 5  # mask_id below the vocabulary size
    inputs, labels = mt.mask_tokens(tokens, mask_id=5, vocab_size=V, p=1.0,
                                    special_ids=(PAD_ID, BOS_ID, EOS_ID, UNK_ID, 7),
                                    generator=torch.Generator().manual_seed(2))
    never = torch.isin(tokens, torch.tensor([*SPECIAL, 5, 7]))
    assert (labels[never] == IGNORE).all() and torch.equal(inputs[never], tokens[never])
    chosen = labels != IGNORE
    replaced = inputs[chosen & (inputs != 5) & (inputs != tokens)]
    assert replaced.numel() > 0 and not torch.isin(replaced, torch.tensor([*SPECIAL, 5, 7])).any()


def test_mask_tokens_is_reproducible_and_leaves_its_input_alone():
    tokens = big_tokens(3)
    copy = tokens.clone()
    runs = [mt.mask_tokens(tokens, mask_id=MASK, vocab_size=V,
                           generator=torch.Generator().manual_seed(s)) for s in (7, 7, 8)]
    assert torch.equal(tokens, copy)
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert not torch.equal(runs[0][1], runs[2][1])


@pytest.mark.parametrize("kw, words", [
    (dict(p=0.0), "p must"), (dict(p=1.5), "p must"), (dict(p=True), "p must"),
    (dict(mask_id=-1), "mask_id"), (dict(vocab_size=0), "vocab_size"),
    (dict(vocab_size=4), "no ordinary id"),
])
def test_mask_tokens_refuses_bad_arguments(kw, words):
    args = {**dict(mask_id=MASK, vocab_size=V), **kw}
    with pytest.raises(ValueError, match=words):
        mt.mask_tokens(torch.tensor([[1, 5, 2]]), **args)


@pytest.mark.parametrize("tokens", [torch.tensor([1, 5, 2]), torch.tensor([[1.0, 5.0]])])
def test_mask_tokens_refuses_tensors_that_are_not_id_matrices(tokens):
    with pytest.raises(ValueError, match="tokens"):
        mt.mask_tokens(tokens, mask_id=MASK, vocab_size=V)


# --- LMBatcher -----------------------------------------------------------------------------------

MASKING = dict(mask_id=MASK, vocab_size=V, p=0.3)


@pytest.mark.parametrize("masking", [None, MASKING])
@pytest.mark.parametrize("prefix", [False, True])
def test_lm_batcher_keeps_to_its_budget_and_covers_every_example(masking, prefix):
    data = sentences(200, seed=4, hi=20)
    examples = [(s[:3], s[3:]) for s in data] if prefix else data
    batcher = mt.LMBatcher(examples, max_tokens=120, seed=1, masking=masking)
    seen = []
    for epoch in range(2):
        batches = list(batcher)
        assert len(batches) == len(batcher)
        for idx, batch in zip(batcher.batch_indices(epoch), batches, strict=True):
            b, length = batch.inputs.shape
            assert b * length <= 120
            assert batch.targets.shape == (b, length)
            seen.extend(idx)
    assert sorted(seen) == sorted(list(range(200)) * 2)


def test_an_example_over_the_budget_forms_a_batch_alone():
    examples = sentences(30, seed=5, hi=6) + [[9] * 50]
    sizes = [batch.inputs.shape for batch in mt.LMBatcher(examples, max_tokens=40, seed=0)]
    assert (1, 51) in sizes
    assert all(b * length <= 40 for b, length in sizes if (b, length) != (1, 51))


def test_next_token_batches_are_make_lm_batch_of_their_examples():
    data = sentences(50, seed=6)
    batcher = mt.LMBatcher(data, max_tokens=100, seed=2)
    indices = batcher.batch_indices(0)
    for idx, batch in zip(indices, batcher, strict=True):
        inputs, targets = by_hand([data[i] for i in idx])
        assert batch.inputs.tolist() == inputs and batch.targets.tolist() == targets


def test_masked_batches_mask_bos_sentence_eos_rows():
    data = sentences(50, seed=7)
    batcher = mt.LMBatcher(data, max_tokens=100, shuffle=False, masking=MASKING)
    for idx, batch in zip(batcher.batch_indices(0), batcher, strict=True):
        longest = max(len(data[i]) for i in idx)
        assert batch.inputs.shape == (len(idx), longest + 2)
        for row, i in enumerate(idx):
            original = [BOS_ID] + data[i] + [EOS_ID]
            original += [PAD_ID] * (longest + 2 - len(original))
            labels, inputs = batch.targets[row].tolist(), batch.inputs[row].tolist()
            for t, token in enumerate(original):
                if labels[t] == IGNORE:
                    assert inputs[t] == token
                else:
                    assert labels[t] == token and token not in SPECIAL


def masked(batcher) -> list[tuple[list, list]]:
    return [(b.inputs.tolist(), b.targets.tolist()) for b in batcher]


def test_masking_is_reproducible_per_seed_and_epoch():
    data = sentences(80, seed=8)
    a = mt.LMBatcher(data, max_tokens=100, seed=3, masking=MASKING)
    b = mt.LMBatcher(data, max_tokens=100, seed=3, masking=MASKING)
    epochs_a = [masked(a) for _ in range(2)]
    epochs_b = [masked(b) for _ in range(2)]
    assert epochs_a == epochs_b
    assert epochs_a[0] != epochs_a[1]  # each epoch masks afresh
    b.set_epoch(1)
    assert masked(b) == epochs_a[1]  # resuming at an epoch masks as the run did
    c = mt.LMBatcher(data, max_tokens=100, seed=4, masking=MASKING)
    assert masked(c) != epochs_a[0]


def test_masking_belongs_to_the_epoch_of_the_iterator():
    """Two iterators opened before either is read (zip(batcher, batcher)):
    each masks as its own epoch does."""
    data = sentences(40, seed=9)
    batcher = mt.LMBatcher(data, max_tokens=100, seed=5, masking=MASKING)
    first, second = iter(batcher), iter(batcher)
    got = [masked(first), masked(second)]
    fresh = mt.LMBatcher(data, max_tokens=100, seed=5, masking=MASKING)
    assert got == [masked(fresh), masked(fresh)]


def test_unshuffled_masking_is_the_same_every_iteration():
    data = sentences(40, seed=10)
    batcher = mt.LMBatcher(data, max_tokens=100, shuffle=False, masking=MASKING)
    assert masked(batcher) == masked(batcher) == masked(batcher)


def test_lm_batcher_checks_the_masking_keywords():
    with pytest.raises(ValueError, match="p must"):
        mt.LMBatcher(sentences(5), masking=dict(mask_id=MASK, vocab_size=V, p=2.0))
    with pytest.raises(TypeError):
        mt.LMBatcher(sentences(5), masking=dict(mask_id=MASK, vocab_size=V, q=0.1))
    with pytest.raises(TypeError, match="example 1"):
        mt.LMBatcher([[5, 6], "text"])


def test_masking_never_chooses_the_batchers_own_special_ids():
    """With other special ids than the defaults, padding, BOS and EOS are
    still never chosen (p = 1 chooses every ordinary token)."""
    data = [[7 + (i + j) % 20 for j in range(1 + i % 9)] for i in range(40)]
    batcher = mt.LMBatcher(data, max_tokens=100, shuffle=False, pad_id=4, bos_id=5, eos_id=6,
                           masking=dict(mask_id=3, vocab_size=V, p=1.0))
    for idx, batch in zip(batcher.batch_indices(0), batcher, strict=True):
        longest = max(len(data[i]) for i in idx)
        for row, i in enumerate(idx):
            original = [5] + data[i] + [6] + [4] * (longest - len(data[i]))
            labels = batch.targets[row].tolist()
            assert labels == [IGNORE] + data[i] + [IGNORE] * (longest - len(data[i]) + 1)
            inputs = batch.inputs[row].tolist()
            assert [inputs[0], inputs[len(data[i]) + 1]] == [5, 6]
            assert inputs[len(data[i]) + 2:] == original[len(data[i]) + 2:]
