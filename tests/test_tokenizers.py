"""Tests of the tokenizer interface, the word tokenizer and the SentencePiece
subword tokenizer (minitransformer.data.tokenizers, minitransformer.data.subword)."""

from __future__ import annotations

import io
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from minitransformer.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    DatasetNotFoundError,
    SubwordTokenizer,
    Tokenizer,
    Vocab,
    WordTokenizer,
    as_tokenizer,
    build_tokenizers,
    build_vocabs,
    detokenize,
    encode_pairs,
    load_multi30k,
    tokenize,
    tokenizer_from_dict,
)
from minitransformer.data.subword import SPACE_MARK
from minitransformer.decoding import translate
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.training.checkpoint import build_model, load_checkpoint, save_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"

# Text no subword model learned from: emoji, CJK, accented capitals, control
# characters, empty and blank lines, SentencePiece's own space mark, odd spacing.
ODD = [
    "",
    " ",
    "\n",
    "\n\n",
    "  two  spaces  ",
    "\tTab\tand\r\nCRLF",
    "Émile ÉCOLE Ærø Œuvre ÑANDÚ İstanbul",
    "😀🚲👩‍👩‍👧 emoji, 🇩🇪 flag",
    "漢字かなカナ 한국어 中文",
    "NUL\x00 bell\x07 esc\x1b del\x7f c1\x85\x9f",
    "zero\u200bwidth \ufeffBOM \u00a0nbsp",
    "combining e\u0301 vs \u00e9",
    SPACE_MARK,
    f"a{SPACE_MARK}b {SPACE_MARK}{SPACE_MARK} c",
    "\U0010fffd private plane \ue000\uf8ff",
    "Ein Mann fährt Fahrrad.",
]


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    return load_multi30k("train", root=FIXTURES, download=False)


@pytest.fixture(scope="module")
def subword(pairs) -> SubwordTokenizer:
    return SubwordTokenizer.train([s for s, _ in pairs] + [t for _, t in pairs], vocab_size=400)


# --- the interface ------------------------------------------------------------------


def test_both_kinds_are_tokenizers_and_vocab_is_not(subword):
    word = WordTokenizer(Vocab.build([["a"]]))
    for tok in (word, subword):
        assert isinstance(tok, Tokenizer)
        assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (PAD_ID, BOS_ID, EOS_ID, UNK_ID)
    assert not isinstance(Vocab.build([["a"]]), Tokenizer)


def test_as_tokenizer_wraps_vocabs_and_passes_tokenizers(subword):
    vocab = Vocab.build([["a", "b"]])
    wrapped = as_tokenizer(vocab, lowercase=False)
    assert isinstance(wrapped, WordTokenizer) and wrapped.vocab is vocab and not wrapped.lowercase
    assert as_tokenizer(subword) is subword
    assert as_tokenizer(subword.to_dict()) == subword
    with pytest.raises(TypeError, match="Vocab, a tokenizer or a dict"):
        as_tokenizer(["a", "b"])


def test_tokenizer_from_dict_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="unknown tokenizer kind 'bpe-dropout'"):
        tokenizer_from_dict({"kind": "bpe-dropout"})
    with pytest.raises(TypeError, match="expected a dict"):
        tokenizer_from_dict("words")


# --- word tokenizer -----------------------------------------------------------------


def test_word_tokenizer_is_tokenize_plus_vocab(pairs):
    """The same ids and text as the word-level path built by hand."""
    src_vocab, _ = build_vocabs(pairs, min_freq=2)
    tok = WordTokenizer.build((s for s, _ in pairs), min_freq=2)
    assert tok.vocab == src_vocab
    for s, _ in pairs[:10] + [("Ein Zebra läuft im Park!", "")]:
        ids = tok.encode(s)
        assert ids == src_vocab.encode(tokenize(s))
        assert tok.decode(ids + [EOS_ID, 5]) == detokenize(src_vocab.decode(ids))
    assert UNK_ID in tok.encode("Ein Zebra")  # words outside the vocabulary


def test_word_tokenizer_dict_round_trip_and_old_vocab_dicts():
    tok = WordTokenizer(Vocab.build([["Ein", "Mann"]]), lowercase=False)
    back = tokenizer_from_dict(tok.to_dict())
    assert back == tok and not back.lowercase
    assert Vocab.from_dict(tok.to_dict()) == tok.vocab  # still a valid vocabulary dict
    old = tokenizer_from_dict({"itos": tok.vocab.itos})  # checkpoints before tokenizers
    assert isinstance(old, WordTokenizer) and old.lowercase and old.vocab == tok.vocab


# --- subword tokenizer: lossless, no unknown id -----------------------------------------


@pytest.mark.parametrize("text", ODD)
def test_subword_round_trip_of_odd_text_without_unknown_ids(subword, text):
    ids = subword.encode(text)
    assert UNK_ID not in ids
    assert all(0 <= i < len(subword) for i in ids)
    assert subword.decode(ids) == text


def test_subword_round_trip_of_random_unicode(subword):
    """Random strings over all of Unicode (surrogates excluded)."""
    rng = random.Random(0)
    alphabet = [c for c in map(chr, range(0x110000)) if not 0xD800 <= ord(c) < 0xE000]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        text += rng.choice(["", " ", "a b", SPACE_MARK])
        ids = subword.encode(text)
        assert UNK_ID not in ids and subword.decode(ids) == text, repr(text)


def test_subword_is_cased_and_keeps_frequent_words_whole(subword):
    assert subword.decode(subword.encode("Ein Mann läuft.")) == "Ein Mann läuft."
    assert subword.encode("Mann") != subword.encode("mann")
    # frequent in the fixture corpus: whole; rarer: in pieces
    assert subword.pieces("Ein Mann läuft im Park.") == [
        "▁Ein", "▁Mann", "▁lä", "uft", "▁im", "▁Park", "."
    ]


def test_subword_decode_drops_specials_and_stops_at_eos(subword):
    ids = subword.encode("ein Hund")
    assert subword.decode([BOS_ID, *ids, EOS_ID, *subword.encode("XYZ")]) == "ein Hund"
    assert subword.decode([PAD_ID, UNK_ID, *ids, PAD_ID]) == "ein Hund"
    assert subword.decode(torch.tensor(ids)) == "ein Hund"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        subword.decode([len(subword)])


def test_subword_decode_of_broken_bytes_is_replacement_not_unknown(subword):
    """A model may emit byte pieces that are not valid UTF-8."""
    lead = subword.encode("😀")[1]  # "▁", then the emoji's four bytes
    assert subword.id_to_piece(lead) == "<0xF0>"
    assert subword.decode([lead, *subword.encode("a")]) == "\ufffd a"


def test_subword_rejects_invalid_input(subword):
    with pytest.raises(TypeError, match="expected a str"):
        subword.encode(["a"])
    with pytest.raises(ValueError, match="not valid Unicode"):
        subword.encode("lone \ud800 surrogate")


# --- subword tokenizer: training ----------------------------------------------------


def test_subword_training_is_deterministic(pairs, subword):
    again = SubwordTokenizer.train([s for s, _ in pairs] + [t for _, t in pairs], vocab_size=400)
    assert again.model_proto == subword.model_proto
    assert len(subword) == 400


def test_subword_training_errors():
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        SubwordTokenizer.train(["a b"], vocab_size=0)
    with pytest.raises(ValueError, match="model_type must be"):
        SubwordTokenizer.train(["a b"], model_type="wordpiece")
    with pytest.raises(ValueError, match="no \\(non-empty\\) sentences"):
        SubwordTokenizer.train(["", ""])
    with pytest.raises(TypeError, match="single string"):
        SubwordTokenizer.train("a b")
    with pytest.raises(ValueError, match="SubwordTokenizer.train: .*[Vv]ocab"):
        SubwordTokenizer.train(["ab ba"], vocab_size=100_000)


def test_subword_unigram_model_is_also_lossless(pairs):
    uni = SubwordTokenizer.train([t for _, t in pairs], vocab_size=290, model_type="unigram")
    for text in ODD:
        ids = uni.encode(text)
        assert UNK_ID not in ids and uni.decode(ids) == text


def test_subword_rejects_models_without_the_package_conventions():
    import sentencepiece as spm

    def model(**options) -> bytes:
        out = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["ein Mann läuft", "a man runs"] * 20), model_writer=out,
            model_type="bpe", minloglevel=2, **options,
        )
        return out.getvalue()

    with pytest.raises(ValueError, match="first pieces must be"):
        # sentencepiece's own specials: <s>, </s>
        SubwordTokenizer(model(byte_fallback=True, vocab_size=280))
    conventions = dict(pad_id=0, bos_id=1, eos_id=2, unk_id=3, bos_piece="<bos>",
                       eos_piece="<eos>")
    with pytest.raises(ValueError, match="no byte fallback"):
        SubwordTokenizer(model(**conventions, vocab_size=24))  # byte_fallback is off by default
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        SubwordTokenizer(b"not a model")
    with pytest.raises(TypeError, match="expected the model's bytes"):
        SubwordTokenizer("model.model")


# --- subword tokenizer: storage -----------------------------------------------------


def test_subword_travels_in_a_weights_only_checkpoint(subword):
    """The model's bytes go into torch.save as a uint8 tensor and come back
    through the weights-only unpickler unchanged."""
    d = subword.to_dict()
    assert d["kind"] == "sentencepiece" and d["model"].dtype == torch.uint8
    buf = io.BytesIO()
    torch.save({"vocabs": {"src": d, "tgt": d}}, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    back = tokenizer_from_dict(loaded["vocabs"]["tgt"])
    assert isinstance(back, SubwordTokenizer) and back.model_proto == subword.model_proto
    assert back.encode("ein Mann 😀") == subword.encode("ein Mann 😀")


def test_subword_save_load_pickle_and_bytes_dict(subword, tmp_path):
    import copy
    import pickle

    subword.save(tmp_path / "sp.model")
    assert SubwordTokenizer.load(tmp_path / "sp.model") == subword
    assert pickle.loads(pickle.dumps(subword)) == subword
    assert copy.deepcopy(subword).encode("ein Hund") == subword.encode("ein Hund")
    assert SubwordTokenizer.from_dict({"kind": "sentencepiece", "model": subword.model_proto})
    with pytest.raises(ValueError, match="1-D uint8 tensor"):
        SubwordTokenizer.from_dict({"kind": "sentencepiece", "model": torch.zeros(3)})
    with pytest.raises(ValueError, match="expected \\{'kind': 'sentencepiece'"):
        SubwordTokenizer.from_dict({"kind": "words"})


# --- preparing pairs with either kind -----------------------------------------------


def test_build_tokenizers_and_encode_pairs(pairs):
    src, tgt = build_tokenizers(pairs, "subword", vocab_size=400)
    assert src is tgt  # one joint model
    examples = encode_pairs(pairs, src, tgt)
    assert len(examples) == len(pairs)
    assert [src.decode(s) for s, _ in examples] == [s for s, _ in pairs]
    assert [tgt.decode(t) for _, t in examples] == [t for _, t in pairs]
    longest = sorted(max(len(s), len(t)) for s, t in examples)
    cut = longest[len(longest) // 2]  # about half the pairs are longer
    short = encode_pairs(pairs, src, tgt, max_len=cut)
    assert len(short) == sum(n <= cut for n in longest) < len(pairs)
    assert all(len(s) <= cut and len(t) <= cut for s, t in short)
    # words: the same ids as the vocabularies' path
    ws, wt = build_tokenizers(pairs, "words", min_freq=1)
    vs, vt = build_vocabs(pairs, min_freq=1)
    assert encode_pairs(pairs, ws, wt) == encode_pairs(pairs, vs, vt)
    with pytest.raises(ValueError, match="kind must be one of"):
        build_tokenizers(pairs, "chars")


@pytest.mark.slow
def test_subword_on_multi30k_is_lossless_and_never_unknown():
    """The real corpus (skipped where it is not on disk): a joint model
    learned on the training split encodes every sentence of every split
    without an unknown id, and decodes it back exactly."""
    try:
        train = load_multi30k("train", download=False)
        other = load_multi30k("val", download=False) + load_multi30k(
            "test_2016_flickr", download=False
        )
    except DatasetNotFoundError:
        pytest.skip("Multi30k is not on this machine")
    src, _ = build_tokenizers(train, "subword", vocab_size=8000)
    for s, t in train + other:
        for text in (s, t):
            ids = src.encode(text)
            assert UNK_ID not in ids and src.decode(ids) == text


# --- translate and checkpoints with either kind -------------------------------------


class CopyStub(nn.Module):
    """A seq2seq "model" whose next token is the source token at the same
    position (EOS after the last): translate then returns its input."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.config = SimpleNamespace(pad_id=PAD_ID, max_len=512)
        self.vocab_size = vocab_size
        self.unused = nn.Parameter(torch.zeros(1))

    def src_mask(self, src):
        return src != PAD_ID

    def encode(self, src, src_mask=None):
        return src

    def decode(self, prefix, memory, memory_mask=None):
        b, t = prefix.shape  # position i predicts memory[:, i], or EOS past the end
        nxt = torch.cat([memory, torch.full((b, t), PAD_ID)], 1)[:, :t]
        nxt = nxt.masked_fill(nxt == PAD_ID, EOS_ID)
        return nn.functional.one_hot(nxt, self.vocab_size).float()  # (B, T, V)


@pytest.mark.parametrize("beam", [1, 3])
def test_translate_with_a_subword_tokenizer_gives_text_back_exactly(subword, pairs, beam):
    sentences = [s for s, _ in pairs[:6]] + ODD
    out = translate(CopyStub(len(subword)), sentences, subword, subword, beam_size=beam,
                    batch_size=4)
    assert out == [s if s.strip() else "" for s in sentences]


def test_translate_still_takes_word_vocabularies(pairs):
    src_vocab, _ = build_vocabs(pairs, min_freq=1)
    sentences = [s for s, _ in pairs[:4]] + ["Ein Zebra läuft."]
    out = translate(CopyStub(len(src_vocab)), sentences, src_vocab, src_vocab, ban_unknown=False)
    assert out == [detokenize(tokenize(s)).replace("zebra", "<unk>") for s in sentences]
    tok = WordTokenizer(src_vocab)
    assert translate(CopyStub(len(src_vocab)), sentences, tok, tok, ban_unknown=False) == out
    banned = translate(CopyStub(len(src_vocab)), sentences, src_vocab, src_vocab)  # the default
    assert banned[:4] == out[:4] and "<unk>" not in banned[4]


def test_checkpoint_with_a_subword_tokenizer_loads_weights_only(subword, tmp_path):
    config = TransformerConfig(len(subword), len(subword), d_model=16, num_heads=2,
                               num_encoder_layers=1, num_decoder_layers=1, d_ff=32,
                               share_embeddings=True, tie_output=True)
    model = Transformer(config)
    path = save_checkpoint(tmp_path / "last.pt", model, vocabs={"src": subword, "tgt": subword})
    ckpt = torch.load(path, weights_only=True)  # raises if anything needs code to load
    assert tokenizer_from_dict(ckpt["vocabs"]["src"]) == subword
    assert tokenizer_from_dict(load_checkpoint(path)["vocabs"]["tgt"]) == subword
    rebuilt = build_model(ckpt)
    sentences = ["Ein Mann läuft im Park.", "😀 漢字"]
    assert translate(rebuilt, sentences, subword, subword, extra_len=5) == translate(
        model, sentences, subword, subword, extra_len=5
    )


# --- a subword tokenizer restricted to the pieces a side uses --------------------------


def test_restricted_subword_keeps_the_pieces_of_its_texts(subword, pairs):
    targets = [t for _, t in pairs]
    kept = subword.restricted_to(targets)
    used = sorted({i for t in targets for i in subword.encode(t)} | {0, 1, 2, 3})
    assert kept.model_ids == used and len(kept) == len(used) < len(subword)
    for text in targets:  # the same pieces, renumbered, and the same text back
        assert [kept.model_ids[i] for i in kept.encode(text)] == subword.encode(text)
        assert kept.pieces(text) == subword.pieces(text)
        assert kept.decode(kept.encode(text)) == text
    assert [kept.id_to_piece(i) for i in range(4)] == [subword.id_to_piece(i) for i in range(4)]
    assert (kept.pad_id, kept.bos_id, kept.eos_id, kept.unk_id) == (PAD_ID, BOS_ID, EOS_ID, UNK_ID)
    ids = kept.encode(targets[0])
    assert kept.decode([BOS_ID, *ids, EOS_ID, *ids, PAD_ID]) == targets[0]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        kept.decode([len(kept)])


def test_restricted_subword_encodes_a_piece_it_lacks_as_unknown(subword, pairs):
    sources = [s for s, _ in pairs]
    kept = subword.restricted_to(t for _, t in pairs)
    missing = next(i for s in sources for i in subword.encode(s) if i not in kept.model_ids)
    text = subword.decode([missing])
    assert UNK_ID in kept.encode(text)
    assert all(0 <= i < len(kept) for s in sources for i in kept.encode(s))
    narrower = kept.restricted_to(sources)  # a restriction of a restriction keeps to both
    assert set(narrower.model_ids) <= set(kept.model_ids) and missing not in narrower.model_ids


def test_restricted_subword_travels_and_compares_with_its_pieces(subword, pairs, tmp_path):
    kept = subword.restricted_to(t for _, t in pairs)
    d = kept.to_dict()
    assert d["pieces"].dtype == torch.int64 and d["pieces"].tolist() == kept.model_ids
    assert "pieces" not in subword.to_dict()
    as_list = {**d, "pieces": kept.model_ids}
    for again in (tokenizer_from_dict(d), SubwordTokenizer.from_dict(as_list)):
        assert again == kept and again.encode("A man rides.") == kept.encode("A man rides.")
    assert kept != subword and subword.restricted_to([]) != kept
    assert len(subword.restricted_to([])) == 4  # the specials only
    import copy
    import pickle
    assert pickle.loads(pickle.dumps(kept)) == kept == copy.deepcopy(kept)
    path = tmp_path / "ckpt.pt"
    torch.save({"tgt": d}, path)
    assert tokenizer_from_dict(torch.load(path, weights_only=True)["tgt"]) == kept
    assert "of the model's" in repr(kept)


@pytest.mark.parametrize("pieces, message", [
    ([1, 2, 3, 4], "must start with the 4 special ids"),
    ([0, 1, 2, 3, 9, 9], "increasing model ids, each once"),
    ([0, 1, 2, 3, 10, 5], "increasing model ids, each once"),
    ([0, 1, 2, 3, 10**6], "outside the model"),
    ([0, 1, 2, 3, -1], "outside the model"),
    (torch.tensor([[0, 1, 2, 3]]), "1-D integer tensor"),
    (torch.tensor([0.0, 1, 2, 3]), "1-D integer tensor"),
    ([0, 1, 2, 3, "5"], "must be model ids"),
    ("0123", "must be model ids"),
])
def test_restricted_subword_rejects_bad_pieces(subword, pieces, message):
    with pytest.raises((ValueError, TypeError), match=message):
        SubwordTokenizer(subword.model_proto, pieces)


def test_build_tokenizers_restricts_the_target_side_on_request(pairs):
    src, tgt = build_tokenizers(pairs, "subword", vocab_size=400, target_pieces="seen")
    whole, same = build_tokenizers(pairs, "subword", vocab_size=400)
    assert src == whole is not None and same is whole
    assert tgt == whole.restricted_to(t for _, t in pairs) and len(tgt) < len(src)
    examples = encode_pairs(pairs, src, tgt)
    assert [tgt.decode(t) for _, t in examples] == [t for _, t in pairs]
    assert UNK_ID not in {i for _, t in examples for i in t}
    ws, wt = build_tokenizers(pairs, "words", min_freq=1, target_pieces="seen")
    assert (ws, wt) == build_tokenizers(pairs, "words", min_freq=1)  # per language already
    with pytest.raises(ValueError, match="target_pieces must be one of"):
        build_tokenizers(pairs, "subword", vocab_size=400, target_pieces="some")
