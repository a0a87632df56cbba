"""Reliability of the data side: damaged corpus files, tokenizer blobs and
vocabularies are refused with one line that names the file and says what
was expected (never an IndexError from deep inside sacreBLEU or
SentencePiece)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch

from minitransformer.cli import main
from minitransformer.data import CorpusError, Vocab, load_multi30k
from minitransformer.data.subword import SubwordTokenizer
from minitransformer.data.tokenizers import tokenizer_from_dict
from minitransformer.metrics import corpus_scores
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.training.checkpoint import save_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def _one_line_error(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error: " in lines[0], err


def _vocab(n: int) -> Vocab:
    return Vocab(SPECIALS + [f"w{i}" for i in range(n - 4)])


def _checkpoint(tmp_path: Path, src=None, tgt=None) -> Path:
    model = Transformer(TransformerConfig(12, 14, d_model=8, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=16, max_len=32))
    return save_checkpoint(tmp_path / "tiny.pt", model, vocabs={
        "src": src if src is not None else _vocab(12), "tgt": tgt if tgt is not None
        else _vocab(14)})


@pytest.fixture
def empty_test_split(tmp_path) -> Path:
    """The fixture corpus with test_2016_flickr.de.gz emptied, and its
    SHA-256 listed in the folder's SHA256SUMS (so the checksum passes)."""
    folder = tmp_path / "multi30k"
    shutil.copytree(FIXTURES, folder)
    empty = gzip.compress(b"")
    (folder / "test_2016_flickr.de.gz").write_bytes(empty)
    sums = [line for line in (folder / "SHA256SUMS").read_text().splitlines()
            if not line.endswith("test_2016_flickr.de.gz")]
    sums.append(f"{hashlib.sha256(empty).hexdigest()}  test_2016_flickr.de.gz")
    (folder / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return folder


def test_an_empty_listed_test_file_is_refused_naming_it(empty_test_split):
    with pytest.raises(CorpusError, match="test_2016_flickr.de.gz holds no lines") as info:
        load_multi30k("test_2016_flickr", root=empty_test_split, download=False)
    assert "SHA256SUMS lists it" in str(info.value)


def test_cli_evaluate_on_an_empty_test_file_is_one_line(empty_test_split, tmp_path, capsys):
    ckpt = _checkpoint(tmp_path)
    code = main(["evaluate", "--checkpoint", str(ckpt), "--data-root", str(empty_test_split),
                 "--no-download", "--device", "cpu"])
    _, err = capsys.readouterr()
    _one_line_error(code, err)
    assert "holds no lines" in err


def test_scoring_no_sentences_says_so():
    with pytest.raises(ValueError, match="no sentences to score"):
        corpus_scores([], [])


# --- SentencePiece blobs ------------------------------------------------------------------


@pytest.fixture(scope="module")
def subword() -> SubwordTokenizer:
    pairs = load_multi30k("train", root=FIXTURES, download=False)
    return SubwordTokenizer.train([s for p in pairs for s in p], vocab_size=300)


def test_a_sentencepiece_blob_of_0_bytes_is_refused(tmp_path):
    with pytest.raises(ValueError, match="0 bytes"):
        SubwordTokenizer(b"")
    path = tmp_path / "tokenizer.model"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=f"{path.name}.*0 bytes.*SentencePiece model"):
        SubwordTokenizer.load(path)
    with pytest.raises(ValueError, match="0 bytes"):
        tokenizer_from_dict({"kind": "sentencepiece", "model": torch.zeros(0, dtype=torch.uint8)})


def _with_invalid_piece(tok: SubwordTokenizer) -> tuple[bytes, int]:
    """The model's bytes with one piece's UTF-8 replaced by 0xFF bytes of the
    same length (so the protobuf stays well formed); and that piece's id."""
    raw = tok.model_proto
    for i in reversed(range(len(tok))):
        piece = tok.id_to_piece(i).encode()
        if len(piece) >= 3 and raw.count(piece) == 1:
            return raw.replace(piece, b"\xff" * len(piece)), i
    raise AssertionError("no piece occurs once in the model")


def test_sentencepiece_pieces_that_are_not_utf8_are_refused(subword, tmp_path):
    damaged, i = _with_invalid_piece(subword)
    with pytest.raises(ValueError, match=f"piece {i} is not valid UTF-8"):
        SubwordTokenizer(damaged)
    path = tmp_path / "tokenizer.model"
    path.write_bytes(damaged)
    with pytest.raises(ValueError, match="tokenizer.model.*not valid UTF-8"):
        SubwordTokenizer.load(path)


def test_cli_translate_with_a_damaged_subword_model_is_one_line(subword, tmp_path, capsys,
                                                                monkeypatch):
    damaged, _ = _with_invalid_piece(subword)
    blob = {"kind": "sentencepiece", "model": torch.frombuffer(bytearray(damaged),
                                                               dtype=torch.uint8)}
    ckpt = _checkpoint(tmp_path, src=blob, tgt=blob)
    monkeypatch.setattr("sys.stdin", io.StringIO("ein hund\n"))
    code = main(["translate", "--checkpoint", str(ckpt), "--device", "cpu"])
    _, err = capsys.readouterr()
    _one_line_error(code, err)
    assert "not valid UTF-8" in err and str(ckpt) in err


# --- word vocabularies --------------------------------------------------------------------


@pytest.mark.parametrize("token", [5, None, ["a"], 1.5, ""])
def test_a_vocabulary_whose_tokens_are_not_strings_is_refused(token):
    with pytest.raises(TypeError, match="token 4 .*expected non-empty strings"):
        Vocab([*SPECIALS, token])
    with pytest.raises(TypeError, match="expected non-empty strings"):
        tokenizer_from_dict({"kind": "words", "itos": [*SPECIALS, token]})


def test_a_vocabulary_that_is_a_string_is_refused():
    with pytest.raises(TypeError, match="expected a list of tokens"):
        Vocab("<pad><bos>")


def test_vocab_load_names_the_file(tmp_path):
    path = tmp_path / "src_vocab.json"
    path.write_text(json.dumps({"itos": [*SPECIALS, 7]}))
    with pytest.raises(ValueError, match="src_vocab.json is not a vocabulary.*non-empty strings"):
        Vocab.load(path)
    path.write_bytes(b'{"itos": ["\xff"]}')
    with pytest.raises(ValueError, match="src_vocab.json is not UTF-8"):
        Vocab.load(path)


def test_cli_translate_with_a_vocabulary_of_numbers_is_one_line(tmp_path, capsys, monkeypatch):
    bad = {"itos": [*SPECIALS, *range(8)]}
    ckpt = _checkpoint(tmp_path, src=bad)
    monkeypatch.setattr("sys.stdin", io.StringIO("ein hund\n"))
    code = main(["translate", "--checkpoint", str(ckpt), "--device", "cpu"])
    _, err = capsys.readouterr()
    _one_line_error(code, err)
    assert "expected non-empty strings" in err and str(ckpt) in err
