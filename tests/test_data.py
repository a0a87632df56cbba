"""Tests of the tokenizer, vocabulary, batching and synthetic tasks (minitransformer.data)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter

import pytest
import torch

from minitransformer.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIALS,
    SPLITS,
    SYNTHETIC_TASKS,
    UNK_ID,
    Batch,
    TokenBatcher,
    Vocab,
    build_vocabs,
    detokenize,
    encode_pairs,
    make_batch,
    make_synthetic,
    split_of,
    synthetic_vocab_size,
    tokenize,
)
from minitransformer.masks import padding_mask
from minitransformer.model import TransformerConfig

SENTENCES = [
    "Two young, White males are outside near many bushes.",
    'A man in a "Cat in the Hat" costume (with a hat) stands; he waves!',
    "A boy's T-shirt costs 3.50 dollars?",
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "Un homme, qui porte un chapeau, marche.",
]


# --- tokenizer ---------------------------------------------------------------


def test_tokenize_lowercases_and_splits_punctuation():
    assert tokenize("Two young, White males.") == ["two", "young", ",", "white", "males", "."]
    assert tokenize("Two young, White males.", lowercase=False) == [
        "Two", "young", ",", "White", "males", ".",
    ]


def test_tokenize_words_clitics_numbers_unicode():
    assert tokenize("A boy's T-shirt costs 3.50 dollars?") == [
        "a", "boy", "'s", "t-shirt", "costs", "3.50", "dollars", "?",
    ]
    assert tokenize("Männer in der Nähe (weiße)") == [
        "männer", "in", "der", "nähe", "(", "weiße", ")",
    ]
    assert tokenize("") == []
    assert tokenize("   ") == []


def test_tokenize_rejects_non_str():
    with pytest.raises(TypeError, match="expected a str"):
        tokenize(["a", "b"])  # type: ignore[arg-type]


def test_detokenize_readable():
    assert detokenize("a man , in a hat .".split()) == "a man, in a hat."
    assert detokenize(["a", "boy", "'s", "dog", "(", "brown", ")", "runs", "!"]) == (
        "a boy's dog (brown) runs!"
    )
    assert detokenize(["he", "says", '"', "hi", '"', "."]) == 'he says "hi".'
    assert detokenize([]) == ""
    with pytest.raises(TypeError, match="list of tokens"):
        detokenize("a man")  # type: ignore[arg-type]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_detokenize_inverts_tokenize(sentence):
    # Lower-cased original text is recovered exactly for normally spaced sentences,
    # and tokenising the detokenised text gives the same tokens.
    tokens = tokenize(sentence)
    text = detokenize(tokens)
    assert tokenize(text) == tokens
    assert text == sentence.lower()


# --- vocabulary --------------------------------------------------------------


def test_special_ids_are_those_of_every_vocabulary_and_of_the_model():
    ids = [PAD_ID, BOS_ID, EOS_ID, UNK_ID]
    assert sorted(ids) == list(range(len(SPECIALS)))  # distinct, the first ids
    for vocab in (Vocab.build([["ein", "hund"]]), Vocab.build([tokenize(s) for s in SENTENCES])):
        assert [vocab.encode([SPECIALS[i]])[0] for i in ids] == ids
    assert TransformerConfig(10, 10).pad_id == PAD_ID  # the model ignores the batches' padding


def test_vocab_build_min_freq_and_order():
    corpus = [tokenize(s) for s in SENTENCES * 2 + ["a rare word"]]
    counts = Counter(t for s in corpus for t in s)
    v = Vocab.build(corpus, min_freq=2)
    assert v.itos[:4] == SPECIALS
    assert set(v.itos[4:]) == {t for t, c in counts.items() if c >= 2}
    assert "rare" not in v and "rare" in Vocab.build(corpus, min_freq=1)
    freqs = [counts[t] for t in v.itos[4:]]
    assert freqs == sorted(freqs, reverse=True)
    assert all(v.stoi[t] == i for i, t in enumerate(v.itos))


def test_vocab_max_size_keeps_most_frequent():
    corpus = [["a"] * 5 + ["b"] * 3 + ["c"] * 2 + ["d"]]
    v = Vocab.build(corpus, max_size=6)
    assert len(v) == 6 and v.itos[4:] == ["a", "b"]


def test_vocab_encode_decode_round_trip_and_unk():
    corpus = [tokenize(s) for s in SENTENCES]
    v = Vocab.build(corpus)
    tokens = tokenize(SENTENCES[0])
    ids = v.encode(tokens)
    assert v.decode(ids) == tokens
    assert v.encode(["never-seen"]) == [UNK_ID]
    assert v.decode([BOS_ID] + ids + [EOS_ID, PAD_ID, PAD_ID]) == tokens
    assert v.decode(ids[:2] + [EOS_ID] + ids[2:]) == tokens[:2]  # stops at EOS
    assert v.decode([BOS_ID, UNK_ID], skip_specials=True) == ["<unk>"]
    assert v.decode([BOS_ID, EOS_ID], skip_specials=False) == ["<bos>", "<eos>"]
    assert v.decode(torch.tensor(ids)) == tokens
    with pytest.raises(ValueError, match="outside the vocabulary"):
        v.decode([len(v)])
    with pytest.raises(TypeError, match="tokenize it"):
        v.encode("a man")  # type: ignore[arg-type]


def test_vocab_save_load_json(tmp_path):
    v = Vocab.build([tokenize(s) for s in SENTENCES])
    path = tmp_path / "vocab.json"
    v.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["itos"] == v.itos  # plain JSON, readable by anything
    w = Vocab.load(path)
    assert w == v and w.stoi == v.stoi
    assert Vocab.from_dict(v.to_dict()) == v
    assert list(tmp_path.iterdir()) == [path]  # no temp file left


def test_vocab_errors(tmp_path):
    with pytest.raises(ValueError, match="first tokens"):
        Vocab(["a", "b"])
    with pytest.raises(ValueError, match="min_freq"):
        Vocab.build([["a"]], min_freq=0)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Vocab.load(bad)


# --- batching ----------------------------------------------------------------


def test_make_batch_shapes_shift_and_padding():
    examples = [([5, 6, 7], [8, 9]), ([5], [8, 9, 10, 11])]
    b = make_batch(examples)
    assert isinstance(b, Batch) and len(b) == 2
    assert b.src.dtype == b.tgt_in.dtype == b.tgt_out.dtype == torch.int64
    assert b.src.tolist() == [[5, 6, 7], [5, PAD_ID, PAD_ID]]
    assert b.tgt_in.tolist() == [[BOS_ID, 8, 9, PAD_ID, PAD_ID], [BOS_ID, 8, 9, 10, 11]]
    assert b.tgt_out.tolist() == [[8, 9, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, 11, EOS_ID]]
    assert b.num_src_tokens == 4
    assert b.num_tgt_tokens == (2 + 1) + (4 + 1)
    # Teacher forcing: tgt_out is tgt_in shifted left by one (where not padding).
    shifted = b.tgt_in[:, 1:] != PAD_ID
    assert torch.equal(b.tgt_in[:, 1:][shifted], b.tgt_out[:, :-1][shifted])
    # The package's padding mask recovers the source lengths.
    mask = padding_mask(b.src, PAD_ID)
    assert mask.shape == (2, 1, 1, 3)
    assert mask.sum(-1).flatten().tolist() == [3, 1]


def test_make_batch_custom_ids_and_to():
    b = make_batch([([7], [])], pad_id=9, bos_id=5, eos_id=6)
    assert b.tgt_in.tolist() == [[5]] and b.tgt_out.tolist() == [[6]]
    c = b.to("cpu")
    assert torch.equal(c.src, b.src) and c.pad_id == 9


def test_make_batch_errors():
    with pytest.raises(ValueError, match="no examples"):
        make_batch([])
    with pytest.raises(ValueError, match="empty source"):
        make_batch([([], [4])])
    with pytest.raises(TypeError, match="pair"):
        make_batch([[4, 5, 6]])  # type: ignore[list-item]


def _random_examples(n=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, 40, (n, 2), generator=g).tolist()
    return [(list(range(4, 4 + s)), list(range(4, 4 + t))) for s, t in lens]


def test_token_batcher_covers_each_example_once_under_budget():
    examples = _random_examples()
    batcher = TokenBatcher(examples, max_tokens=300, seed=1)
    seen = []
    n = 0
    for batch in batcher:
        n += 1
        # padded source + target tokens stay within the budget
        assert batch.src.numel() + batch.tgt_in.numel() <= 300
        seen.extend((tuple(r[r != PAD_ID].tolist()), tuple(o[o != PAD_ID][:-1].tolist()))
                    for r, o in zip(batch.src, batch.tgt_out, strict=True))
    assert n == len(batcher)
    assert Counter(seen) == Counter((tuple(s), tuple(t)) for s, t in examples)


def test_token_batcher_groups_similar_lengths():
    # Target lengths follow source lengths, as in translation.
    g = torch.Generator().manual_seed(0)
    src_lens = torch.randint(1, 40, (2000,), generator=g)
    tgt_lens = (src_lens + torch.randint(-2, 3, (2000,), generator=g)).clamp(min=1)
    examples = [([4] * s, [4] * t) for s, t in zip(src_lens.tolist(), tgt_lens.tolist(),
                                                     strict=True)]
    batcher = TokenBatcher(examples, max_tokens=1000)
    sizes = [len(idx) for idx in batcher.batch_indices()]

    def efficiency(batches):
        real = sum(b.num_src_tokens + b.num_tgt_tokens for b in batches)
        return real / sum(b.src.numel() + b.tgt_out.numel() for b in batches)

    # Baseline: batches of the same sizes drawn at random.
    perm = torch.randperm(len(examples), generator=g).tolist()
    starts = torch.tensor([0] + sizes).cumsum(0).tolist()
    random_batches = [make_batch([examples[i] for i in perm[a:b]])
                      for a, b in zip(starts, starts[1:], strict=False)]
    assert efficiency(batcher) > 0.9
    assert efficiency(random_batches) < 0.7

def test_token_batcher_epochs_deterministic_and_resumable():
    examples = _random_examples()
    a = TokenBatcher(examples, max_tokens=400, seed=3)
    epochs = [a.batch_indices(k) for k in range(3)]
    assert epochs[0] != epochs[1]  # reshuffled each epoch
    first = [b.src for b in a]  # epoch 0
    second = [b.src for b in a]  # epoch 1
    assert len(first) == len(second) == len(a)
    b = TokenBatcher(examples, max_tokens=400, seed=3)
    b.set_epoch(1)
    assert all(torch.equal(x, y) for x, y in zip(second, [x.src for x in b], strict=True))
    c = TokenBatcher(examples, max_tokens=400, seed=4)
    assert c.batch_indices(0) != epochs[0]


def test_token_batcher_no_shuffle_is_length_sorted_and_fixed():
    examples = _random_examples()
    batcher = TokenBatcher(examples, max_tokens=400, shuffle=False)
    first = batcher.batch_indices(0)
    assert first == batcher.batch_indices(5)
    flat = [i for batch in first for i in batch]
    lengths = [(len(examples[i][0]), len(examples[i][1])) for i in flat]
    assert lengths == sorted(lengths)


def test_token_batcher_long_example_alone_and_errors():
    examples = [([4] * 50, [4] * 50), ([4], [4]), ([4], [4])]
    batches = list(TokenBatcher(examples, max_tokens=20, shuffle=False))
    assert [len(b) for b in batches] == [2, 1]
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBatcher(examples, max_tokens=0)
    with pytest.raises(ValueError, match="no examples"):
        TokenBatcher([], max_tokens=10)


def test_pipeline_build_and_encode():
    pairs = [("ein Mann .", "a man ."), ("eine Frau .", "a woman ."), ("", "empty")]
    sv, tv = build_vocabs(pairs, min_freq=1)
    ids = encode_pairs(pairs, sv, tv)
    assert len(ids) == 2  # the pair with an empty side is dropped
    assert [tv.itos[i] for i in ids[1][1]] == ["a", "woman", "."]
    assert encode_pairs(pairs, sv, tv, max_len=2) == []


# --- synthetic tasks ---------------------------------------------------------


def test_synthetic_tasks_listed():
    expected = {"copy", "reverse", "sort", "swap_halves", "duplicate", "neighbour_difference",
                "previous"}
    assert expected <= set(SYNTHETIC_TASKS)
    assert synthetic_vocab_size(10) == 14
    assert SPLITS == ("train", "valid", "test")


@pytest.mark.parametrize("task", SYNTHETIC_TASKS)
def test_synthetic_ranges_lengths_and_seed(task):
    data = make_synthetic(task, 200, min_len=3, max_len=9, num_symbols=7, seed=5, split="train")
    assert len(data) == 200
    lengths = {len(s) for s, _ in data}
    assert min(lengths) >= 3 and max(lengths) <= 9 and len(lengths) > 3
    for src, tgt in data:
        assert all(4 <= x < synthetic_vocab_size(7) for x in src + tgt)
    assert make_synthetic(task, 200, 3, 9, 7, seed=5, split="train") == data
    assert make_synthetic(task, 200, 3, 9, 7, seed=6, split="train") != data
    # the examples batch directly
    make_batch(data[:8])


def test_synthetic_rules():
    def draw(task, min_len=1):
        return make_synthetic(task, 50, min_len, 12, split="train")

    for src, tgt in draw("copy"):
        assert tgt == src
    for src, tgt in draw("reverse"):
        assert all(tgt[i] == src[len(src) - 1 - i] for i in range(len(src)))
    for src, tgt in draw("sort"):
        assert Counter(tgt) == Counter(src)
        assert all(a <= b for a, b in zip(tgt, tgt[1:], strict=False))
    for src, tgt in draw("swap_halves", 2):
        h = len(src) // 2
        assert tgt[: len(src) - h] == src[h:] and tgt[len(src) - h :] == src[:h]
    for src, tgt in draw("duplicate"):
        assert tgt[::2] == src and tgt[1::2] == src
    for src, tgt in make_synthetic("neighbour_difference", 50, 2, 12, num_symbols=5, split="train"):
        values = [x - 4 for x in src]  # symbol values 0..4
        assert len(tgt) == len(src) - 1
        for t, y in enumerate(tgt):
            assert (y - 4 + values[t + 1]) % 5 == values[t]  # y_t + x_{t+1} = x_t (mod 5)
    for src, tgt in draw("previous"):
        assert len(tgt) == len(src) and tgt[0] == src[0]
        assert all(tgt[t] == src[t - 1] for t in range(1, len(src)))


@pytest.mark.parametrize("task", SYNTHETIC_TASKS)
def test_synthetic_splits_are_disjoint(task):
    # A small space (3 symbols, lengths 2-5: 360 sources), drawn far more often
    # than it has members, so independent draws would certainly collide.
    sources = {
        split: {tuple(src) for src, _ in make_synthetic(task, 20_000, 2, 5, num_symbols=3,
                                                        seed=i, split=split)}
        for i, split in enumerate(SPLITS)
    }
    for a, b in itertools.combinations(SPLITS, 2):
        assert not sources[a] & sources[b], (a, b)
    for split, srcs in sources.items():
        assert all(split_of(s) == split for s in srcs)
    # each split is drawn from all of its own members, not from a sliver of them
    space = [s for n in range(2, 6) for s in itertools.product(range(4, 7), repeat=n)]
    for split, srcs in sources.items():
        assert srcs == {s for s in space if split_of(s) == split}


def test_synthetic_chapter4_space_has_no_overlap():
    # Chapter 4's setting: 5 symbols, length 6 (15,625 sources), 19,200 drawn for
    # training. Drawn independently, most validation sources were training sources.
    task = "neighbour_difference"
    train = make_synthetic(task, 19_200, 6, 6, num_symbols=5, seed=0, split="train")
    valid = make_synthetic(task, 500, 6, 6, num_symbols=5, seed=1, split="valid")
    assert not {tuple(s) for s, _ in train} & {tuple(s) for s, _ in valid}


def test_split_shares():
    # every source of length 6 over 4 symbols: the shares are about 80 / 10 / 10 %
    counts = Counter(split_of(s) for s in itertools.product(range(4, 8), repeat=6))
    total = sum(counts.values())
    for split, share in (("train", 0.8), ("valid", 0.1), ("test", 0.1)):
        assert abs(counts[split] / total - share) < 0.02, counts
    # a fixed function of the ids: no dependence on the process (hash seed) or the container type
    assert split_of([4, 5, 6]) == split_of((4, 5, 6))
    code = ("from minitransformer.data import split_of; "
            "print([split_of([4 + i, 5, 6]) for i in range(20)])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout
    assert other == str([split_of([4 + i, 5, 6]) for i in range(20)]) + "\n"


def test_synthetic_errors():
    with pytest.raises(ValueError, match="unknown task"):
        make_synthetic("add", 3, 1, 2, split="train")
    with pytest.raises(ValueError, match="max_len"):
        make_synthetic("copy", 3, 5, 2, split="train")
    with pytest.raises(ValueError, match="min_len"):
        make_synthetic("copy", 3, 0, 2, split="train")
    with pytest.raises(ValueError, match="min_len must be an int >= 2"):
        make_synthetic("neighbour_difference", 3, 1, 4, split="train")
    with pytest.raises(ValueError, match="split must be one of"):
        make_synthetic("copy", 3, 1, 2)
    with pytest.raises(ValueError, match="split must be one of"):
        make_synthetic("copy", 3, 1, 2, split="validation")
    # one symbol of length 1: a single source, so two of the three splits are empty
    owner = split_of([4])
    for split in SPLITS:
        if split == owner:
            assert make_synthetic("copy", 3, 1, 1, num_symbols=1, split=split) == [([4], [4])] * 3
        else:
            with pytest.raises(ValueError, match=f"belongs to split '{split}'"):
                make_synthetic("copy", 3, 1, 1, num_symbols=1, split=split)
