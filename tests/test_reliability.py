"""Reliability: what a hostile file or a careless user can make the package do.

Nothing a file asks for runs (crafted checkpoints name classes, attributes
and modules that must never be imported or called), declared sizes are
checked before anything is allocated, bad corpus files and bad options give
one line and exit status 2, and nothing is lost (partial outputs are
flushed, the last good checkpoint is kept). Tiny models and the fixture
corpus in ``tests/fixtures/multi30k`` keep it fast.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest
import torch
from cli_helpers import assert_one_line_error, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitransformer.cli import main
from minitransformer.data import CorpusError, Vocab, load_multi30k
from minitransformer.data import multi30k as multi30k_module
from minitransformer.lm import LanguageModel, LanguageModelConfig, MaskedLanguageModel
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.rnn import AttentionSeq2Seq, ContextSeq2Seq, RNNConfig, SimpleSeq2Seq
from minitransformer.training import TrainConfig, TrainingDivergedError, fit, recipe
from minitransformer.training import checkpoint as ckpt_module
from minitransformer.training.checkpoint import (
    MODEL_CLASSES,
    build_model,
    load_checkpoint,
    save_checkpoint,
)

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"


def _tiny_config(**overrides) -> TransformerConfig:
    fields = dict(d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                  d_ff=16, dropout=0.0, max_len=32)
    return TransformerConfig(12, 14, **{**fields, **overrides})


def _vocab(n: int) -> Vocab:
    return Vocab(["<pad>", "<bos>", "<eos>", "<unk>"] + [f"w{i}" for i in range(n - 4)])


@pytest.fixture
def tiny_ckpt(tmp_path) -> Path:
    """A valid checkpoint of a tiny Transformer with matching vocabularies."""
    model = Transformer(_tiny_config())
    return save_checkpoint(tmp_path / "tiny.pt", model, vocabs={"src": _vocab(12),
                                                                "tgt": _vocab(14)})


def _crafted(tmp_path: Path, base: Path, name: str = "crafted.pt", **changes) -> Path:
    """A copy of checkpoint ``base`` with some entries replaced (written with
    plain torch.save, as an attacker would)."""
    ckpt = torch.load(base, weights_only=True)
    ckpt.update(changes)
    path = tmp_path / name
    torch.save(ckpt, path)
    return path


_cli, _one_line_error = run_cli, assert_one_line_error


# --- 1. a checkpoint names classes: nothing outside the registry runs ----------------------


def test_registry_holds_exactly_the_packages_models():
    assert {cls for cls, _ in MODEL_CLASSES.values()} == {
        Transformer, SimpleSeq2Seq, ContextSeq2Seq, AttentionSeq2Seq, LanguageModel,
        MaskedLanguageModel}
    for name, (model_cls, config_cls) in MODEL_CLASSES.items():
        assert name == f"{model_cls.__module__}:{model_cls.__qualname__}"
        assert model_cls.__module__.startswith("minitransformer.")
        assert config_cls in (TransformerConfig, RNNConfig, LanguageModelConfig)
    assert not hasattr(ckpt_module, "importlib")  # no import by name at all


@pytest.mark.parametrize("model_class, config_class", [
    # attribute traversal from a module of the package to os.system
    ("minitransformer.training.checkpoint:os.system",
     "minitransformer.training.checkpoint:os.getenv"),
    ("minitransformer.model:Transformer.__init__.__globals__",
     "minitransformer.model:TransformerConfig"),
    ("minitransformer.model:torch.load", "minitransformer.model:TransformerConfig"),
    # the right model with a config "class" that is a function
    ("minitransformer.model:Transformer", "minitransformer.training.checkpoint:os.getenv"),
    # a module whose name merely starts with the package's
    ("minitransformer_evil:Model", "minitransformer_evil:Config"),
    ("minitransformer.model:Transformer ", "minitransformer.model:TransformerConfig"),
    (None, None),
    (["minitransformer.model:Transformer"], "minitransformer.model:TransformerConfig"),
])
def test_crafted_class_names_are_refused_and_nothing_runs(
    tiny_ckpt, tmp_path, monkeypatch, capsys, model_class, config_class
):
    calls = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(("system", a)))
    real_getenv = os.getenv

    def getenv(*args, **kwargs):  # the crafted "config class": called with the config's fields
        if kwargs:
            calls.append(("getenv", kwargs))
        return real_getenv(*args, **kwargs)

    monkeypatch.setattr(os, "getenv", getenv)
    # A module next to the user, as `model_class="minitransformer_evil:Model"` would import.
    marker = tmp_path / "imported"
    (tmp_path / "minitransformer_evil.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Model: pass\nclass Config: pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    bad = _crafted(tmp_path, tiny_ckpt, model_class=model_class, config_class=config_class)
    with pytest.raises(ValueError, match="build_model"):
        build_model(bad)
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(bad)])
    _one_line_error(code, err)
    assert out == ""
    assert calls == [] and not marker.exists() and "minitransformer_evil" not in sys.modules


def test_config_with_unknown_fields_or_objects_is_refused(tiny_ckpt, tmp_path):
    ckpt = torch.load(tiny_ckpt, weights_only=True)
    bad = _crafted(tmp_path, tiny_ckpt, model_config={**ckpt["model_config"], "evil": 1})
    with pytest.raises(ValueError, match="does not know: evil"):
        build_model(bad)
    bad = _crafted(tmp_path, tiny_ckpt,
                   model_config={**ckpt["model_config"], "dropout": [0.1]})
    with pytest.raises(ValueError, match="dropout"):
        build_model(bad)
    bad = _crafted(tmp_path, tiny_ckpt, model_config={**ckpt["model_config"], "d_model": "8"})
    with pytest.raises(ValueError, match="invalid model_config"):
        build_model(bad)


def test_pickled_objects_are_refused_in_the_packages_words(tmp_path, capsys):
    class Runs:
        def __reduce__(self):
            return (os.getcwd, ())

    path = tmp_path / "pickle.pt"
    torch.save({"model_state": {}, "x": Runs()}, path)
    with pytest.raises(ValueError, match="refused, since building them could run code") as info:
        load_checkpoint(path)
    assert "weights_only" not in str(info.value)
    code, _, err = _cli(capsys, ["translate", "--checkpoint", str(path)])
    _one_line_error(code, err)
    assert "weights_only" not in err and "getcwd" in err


def test_valid_and_former_names_still_load(tiny_ckpt, tmp_path):
    model = build_model(tiny_ckpt)
    assert isinstance(model, Transformer) and not model.training
    rnn = AttentionSeq2Seq(RNNConfig(10, 11, emb_dim=4, hidden_dim=6, attn_dim=5))
    path = save_checkpoint(tmp_path / "rnn.pt", rnn)
    # Before the layout change the RNN models lived in minitransformer/rnn.py.
    old = _crafted(tmp_path, path, model_class="minitransformer.rnn:AttentionSeq2Seq",
                   config_class="minitransformer.rnn:RNNConfig")
    rebuilt = build_model(old)
    for (k, a), b in zip(rnn.state_dict().items(), rebuilt.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


# --- 7. declared sizes are checked against the stored tensors before allocating -------------


@pytest.mark.parametrize("change, message", [
    ({"d_model": 1_000_000, "num_heads": 1}, "declares d_model=1000000"),
    ({"num_encoder_layers": 10**9}, "declares num_encoder_layers"),
    ({"num_decoder_layers": 500}, "declares 501 layers"),
    ({"src_vocab_size": 13}, r"src_embed.weight'\] has shape \(12, 8\)"),
    ({"tgt_vocab_size": 2_000}, "tgt_embed.weight"),
    ({"max_len": 33}, "pe"),
    ({"d_ff": 2_000}, "implies"),
    ({"positional": "learned"}, "does not match"),
])
def test_sizes_that_do_not_match_the_tensors_are_refused(tiny_ckpt, tmp_path, monkeypatch,
                                                         change, message):
    allocated = []
    real_init = Transformer.__init__

    def watch(self, config):  # record every model built outside the meta device
        real_init(self, config)
        allocated.extend(p.device.type for p in self.parameters() if p.device.type != "meta")

    monkeypatch.setattr(Transformer, "__init__", watch)
    ckpt = torch.load(tiny_ckpt, weights_only=True)
    bad = _crafted(tmp_path, tiny_ckpt, model_config={**ckpt["model_config"], **change})
    with pytest.raises(ValueError, match=message):
        build_model(bad)
    assert allocated == []  # refused before a real model was built


def test_unstored_buffers_are_bounded(tiny_ckpt, tmp_path, monkeypatch):
    """A model whose tensors are not all in its state_dict may not need much
    more memory than the file holds."""

    class Buffered(Transformer):
        def __init__(self, config):
            super().__init__(config)
            self.register_buffer("scratch", torch.zeros(config.max_len, 2**20), persistent=False)

    name = "minitransformer.model:Transformer"
    monkeypatch.setitem(MODEL_CLASSES, name, (Buffered, TransformerConfig))
    with pytest.raises(ValueError, match="refusing to allocate"):
        build_model(tiny_ckpt)  # 32 × 2**20 floats = 128 MiB unstored


def test_checkpoint_vocabularies_must_match_the_model(tiny_ckpt, tmp_path, capsys):
    bad = _crafted(tmp_path, tiny_ckpt, vocabs={"src": _vocab(12).to_dict(),
                                                "tgt": _vocab(15).to_dict()})
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(bad)])
    _one_line_error(code, err)
    assert "15" in err and "14" in err and out == ""


# --- 11. a save killed half-way leaves a temporary file: the next save removes it ----------


def test_the_next_save_removes_a_killed_saves_temporary_file(tmp_path):
    stale = tmp_path / ".last.pt.k3x9q.tmp"  # what save_checkpoint's mkstemp names look like
    stale.write_bytes(b"half a checkpoint")
    others = [tmp_path / ".best.pt.a1b2c3.tmp", tmp_path / "notes.tmp", tmp_path / ".last.pt"]
    for path in others:
        path.write_bytes(b"keep")
    save_checkpoint(tmp_path / "last.pt", Transformer(_tiny_config()))
    assert not stale.exists()
    assert all(path.read_bytes() == b"keep" for path in others)  # only its own name's
    assert build_model(tmp_path / "last.pt").config == _tiny_config()


# --- 4. corpus files on disk are verified; damaged ones give one line -----------------------


def _corpus_copy(tmp_path: Path, listed: bool = True) -> Path:
    """The fixture corpus in a folder of its own (with or without its SHA256SUMS)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for path in FIXTURES.iterdir():
        if listed or path.name != "SHA256SUMS":
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def _list_sums(folder: Path) -> None:
    (folder / "SHA256SUMS").write_text("".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n"
        for p in sorted(folder.iterdir()) if p.name != "SHA256SUMS"))


def _damage(kind: str, path: Path) -> None:
    data = path.read_bytes()
    text = gzip.decompress(data)
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "bit-flipped":
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x10
        path.write_bytes(bytes(flipped))
    elif kind == "random":
        path.write_bytes(random.Random(0).randbytes(len(data)))
    elif kind == "latin-1":
        path.write_bytes(gzip.compress(text.decode("utf-8").encode("latin-1")))
    elif kind == "misaligned":
        path.write_bytes(gzip.compress(text + b"one line too many\n"))
    elif kind == "swapped":  # the other language under this name
        other = path.name.replace(".de.", ".xx.").replace(".en.", ".de.").replace(".xx.", ".en.")
        path.write_bytes((path.parent / other).read_bytes())


DAMAGE = ["truncated", "bit-flipped", "random", "latin-1", "misaligned", "swapped"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_or_swapped_corpus_file_is_refused_in_one_line(tmp_path, capsys, kind):
    folder = _corpus_copy(tmp_path)
    _damage(kind, folder / "train.de.gz")  # the German side has non-ASCII letters
    with pytest.raises(CorpusError, match="train.de.gz does not match its SHA-256"):
        load_multi30k("train", root=folder, download=False)
    out = tmp_path / "run"
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--data-root", str(folder),
                                 "--no-download", "--device", "cpu", "--max-steps", "1"])
    _one_line_error(code, err)
    assert "train.de.gz" in err and not out.exists()  # nothing written


@pytest.mark.parametrize("kind, message", [
    ("truncated", "cannot be read"), ("bit-flipped", "cannot be read"),
    ("random", "cannot be read"), ("latin-1", "is not UTF-8 text"),
    ("misaligned", "train.de.gz has 65 lines"), ("swapped", None),
])
def test_a_listed_but_unreadable_file_is_named_in_one_line(tmp_path, capsys, kind, message):
    """When the damaged file is what the folder's SHA256SUMS lists (a corpus
    of one's own that is itself bad), reading it fails with one line."""
    folder = _corpus_copy(tmp_path)
    _damage(kind, folder / "train.de.gz")
    _list_sums(folder)
    if message is None:  # a well-formed file in the wrong language cannot be told apart
        assert load_multi30k("train", root=folder, download=False)
        return
    with pytest.raises(CorpusError, match=message) as info:
        load_multi30k("train", root=folder, download=False)
    assert len(str(info.value).splitlines()) == 1
    code, _, err = _cli(capsys, ["train", "--out", str(tmp_path / "run"), "--data-root",
                                 str(folder), "--no-download", "--device", "cpu"])
    _one_line_error(code, err)


def test_files_under_official_names_must_be_the_official_files(tmp_path):
    folder = _corpus_copy(tmp_path, listed=False)  # the made-up fixtures, no SHA256SUMS
    with pytest.raises(CorpusError, match="not the official Multi30k train.de.gz"):
        load_multi30k("train", root=folder, download=False)
    # Plain (decompressed) files are checked against the decompressed sums.
    (folder / "val.de").write_bytes(gzip.decompress((folder / "val.de.gz").read_bytes()))
    (folder / "val.de.gz").unlink()
    with pytest.raises(CorpusError, match="not the official Multi30k val.de "):
        load_multi30k("val", root=folder, download=False)


_DATA = os.environ.get("MINITRANSFORMER_DATA")
_REAL = Path(_DATA) / "multi30k" if _DATA else None


@pytest.mark.skipif(_REAL is None or not (_REAL / "val.fr.gz").is_file(),
                    reason="needs the Multi30k corpus in $MINITRANSFORMER_DATA/multi30k")
def test_a_french_file_under_the_english_name_is_caught(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "val.de.gz").write_bytes((_REAL / "val.de.gz").read_bytes())
    (folder / "val.en.gz").write_bytes((_REAL / "val.fr.gz").read_bytes())
    with pytest.raises(CorpusError, match="not the official Multi30k val.en.gz"):
        load_multi30k("val", root=folder, download=False)
    assert len(load_multi30k("val", root=_REAL, download=False)) == 1014


def test_verification_is_cached_by_size_and_mtime(tmp_path, monkeypatch):
    folder = _corpus_copy(tmp_path)
    hashed = []
    real = multi30k_module._sha256
    monkeypatch.setattr(multi30k_module, "_sha256", lambda p: hashed.append(p.name) or real(p))
    load_multi30k("val", root=folder, download=False)
    load_multi30k("val", root=folder, download=False)
    assert sorted(hashed) == ["val.de.gz", "val.en.gz"]  # hashed once each
    path = folder / "val.en.gz"
    _damage("swapped", path)  # same size? no matter: the time changes
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    with pytest.raises(CorpusError):
        load_multi30k("val", root=folder, download=False)
    assert hashed.count("val.en.gz") == 2


# --- 6. translate: memory bounded by rows, output written and flushed as it is made -------


def _untrained_checkpoint(folder: Path, tgt_words: list[str] | None = None,
                          force: str | None = None, max_len: int = 64) -> Path:
    """An untrained tiny Transformer with the fixture corpus's vocabularies
    (``tgt_words`` replaces the target words; ``force`` makes the model emit
    that word until ``max_len``)."""
    from minitransformer.data import build_vocabs, load_multi30k

    src_vocab, tgt_vocab = build_vocabs(load_multi30k("train", root=FIXTURES, download=False))
    if tgt_words is not None:
        tgt_vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", *tgt_words])
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=16,
                                          num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=32, dropout=0.0,
                                          max_len=max_len))
    if force is not None:
        with torch.no_grad():
            model.generator.bias[tgt_vocab.stoi[force]] = 1e4
    return save_checkpoint(folder / "untrained.pt", model,
                           vocabs={"src": src_vocab, "tgt": tgt_vocab})


@pytest.fixture(scope="module")
def untrained(tmp_path_factory) -> Path:
    return _untrained_checkpoint(tmp_path_factory.mktemp("untrained"))


def _source_lines(n: int) -> list[str]:
    lines = gzip.decompress((FIXTURES / "test_2016_flickr.de.gz").read_bytes()).decode()
    return (lines.splitlines() * n)[:n]


@pytest.mark.slow
def test_beam_search_rows_never_exceed_the_budget(untrained, monkeypatch):
    """Memory of a decoding step grows with the rows (sentences × beam) in it:
    however large the batch, each call decodes at most max_rows rows, and the
    translations are those of an unbounded run."""
    from minitransformer import decoding

    model = build_model(untrained)
    ckpt = torch.load(untrained, weights_only=True)
    src_vocab, tgt_vocab = (Vocab.from_dict(ckpt["vocabs"][k]) for k in ("src", "tgt"))
    # Sentences of one length, so every batch gets the same max_len whatever its make-up.
    from minitransformer.data import tokenize

    sentences = [s for s, _ in load_multi30k("train", root=FIXTURES, download=False)
                 if len(tokenize(s)) == 6][:20]
    assert len(sentences) == 20
    rows = []
    real = decoding.beam_search

    def counting(model, src, beam_size, *args):
        rows.append(src.shape[0] * beam_size)
        return real(model, src, beam_size, *args)

    monkeypatch.setattr(decoding, "beam_search", counting)
    bounded = decoding.translate(model, sentences, src_vocab, tgt_vocab, beam_size=5,
                                 batch_size=128, max_rows=12)
    assert rows and max(rows) <= 12 and sum(rows) == 5 * len(sentences)
    rows.clear()
    unbounded = decoding.translate(model, sentences, src_vocab, tgt_vocab, beam_size=5,
                                   batch_size=128, max_rows=10_000)
    assert rows == [5 * len(sentences)]
    assert bounded == unbounded
    with pytest.raises(ValueError, match="larger than max_rows"):
        decoding.translate(model, sentences, src_vocab, tgt_vocab, beam_size=13, max_rows=12)


@pytest.mark.slow
def test_cli_beam_1000_decodes_one_sentence_at_a_time(untrained, monkeypatch, capsys):
    from minitransformer import decoding

    rows = []
    real = decoding.beam_search
    monkeypatch.setattr(decoding, "beam_search", lambda model, src, k, *a: (
        rows.append(src.shape[0] * k) or real(model, src, k, *a)))
    monkeypatch.setattr(sys, "stdin", _Stdin("\n".join(_source_lines(3)) + "\n"))
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(untrained), "--beam",
                                   "1000", "--device", "cpu"])
    assert code == 0, err
    assert out.count("\n") == 3 and rows == [1000, 1000, 1000]
    code, _, err = _cli(capsys, ["translate", "--checkpoint", str(untrained), "--beam", "5000"])
    _one_line_error(code, err)
    assert "at most 1024" in err


class _Stdin(io.TextIOWrapper):
    """A piped stdin over bytes (not a terminal)."""

    def __init__(self, data: str | bytes):
        raw = data.encode("utf-8") if isinstance(data, str) else data
        super().__init__(io.BytesIO(raw), encoding="utf-8", errors="replace")


class _OneLineAtATime(io.RawIOBase):
    """A pipe that delivers one line per read, then interrupts (Ctrl-C)."""

    def __init__(self, lines: list[bytes]):
        self.lines = list(lines)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self.lines:
            raise KeyboardInterrupt
        line = self.lines.pop(0)
        buffer[: len(line)] = line
        return len(line)


def test_translate_writes_each_batch_as_it_finishes(untrained, monkeypatch, capsys):
    lines = [line.encode() + b"\n" for line in _source_lines(5)]
    stdin = io.TextIOWrapper(io.BufferedReader(_OneLineAtATime(lines)), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(untrained),
                                   "--batch-size", "2"])
    # Ctrl-C while the sixth line was awaited: the four lines of the two
    # full batches were written; the fifth, in an unfinished batch, was not.
    assert code == 130 and "interrupted" in err
    assert out.count("\n") == 4


def test_translate_keeps_finished_lines_when_decoding_fails(untrained, monkeypatch, capsys):
    from minitransformer import cli

    calls = []
    real = cli._translate

    def fails_second_time(*args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 1.8 GiB")
        return real(*args)

    monkeypatch.setattr(cli, "_translate", fails_second_time)
    monkeypatch.setattr(sys, "stdin", _Stdin("\n".join(_source_lines(5)) + "\n"))
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(untrained),
                                   "--batch-size", "2"])
    _one_line_error(code, err)
    assert "out of memory after 2 lines" in err and out.count("\n") == 2


# --- 11. what reaches the terminal: one printable line per input line ----------------------


def test_escape_sequences_in_a_vocabulary_do_not_reach_the_terminal(tmp_path, monkeypatch,
                                                                    capsys):
    evil = "\x1b]0;pwned\x07\x1b[2J\x9b31m\rline\nbreak\u2028"
    path = _untrained_checkpoint(tmp_path, tgt_words=[evil, "ok"], force=evil)
    monkeypatch.setattr(sys, "stdin", _Stdin("Ein Hund läuft.\nEin Mann.\n"))
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(path)])
    assert code == 0, err
    lines = out.split("\n")
    assert len(lines) == 3 and lines[-1] == ""
    assert "]0;pwned" in lines[0]  # the text is kept, the control characters are not
    assert not any(unicodedata.category(ch) == "Cc" for ch in out.replace("\n", ""))
    assert "\u2028" not in out


def test_carriage_return_line_ends_are_line_ends(untrained, monkeypatch, capsys):
    text = b"Ein Hund l\xc3\xa4uft.\rEin Mann.\r\rEin Kind.\r\nZwei M\xe4nner."  # Latin-1 byte
    monkeypatch.setattr(sys, "stdin", _Stdin(text))
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(untrained)])
    assert code == 0, err
    lines = out.split("\n")
    assert len(lines) == 6 and lines[2] == "" and lines[-1] == ""


def _expected_lines(data: bytes) -> int:
    if not data:
        return 0
    parts = re.split(rb"\r\n|\r|\n", data)
    return len(parts) - (parts[-1] == b"")


@pytest.fixture(scope="module")
def loaded_once(tmp_path_factory):
    """A model that stops after 12 tokens, loaded once for all the fuzz examples:
    ``(checkpoint path, what recipe.load_run returns)``."""

    path = _untrained_checkpoint(tmp_path_factory.mktemp("fuzz"), max_len=12)
    return path, recipe.load_run(path, "cpu")


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.binary(max_size=20),
                          st.sampled_from([b"\r", b"\n", b"\r\n", b"\n\r", b"\x1b[2J", b"\x00",
                                           b"\xc2\x85", b"\xe2\x80\xa8", b"\xff\xfe",
                                           "Ein Hund läuft im Park.".encode()])),
                max_size=10).map(b"".join))
def test_fuzz_translate_any_bytes_give_one_line_per_line(loaded_once, data):
    from minitransformer import cli

    path, loaded = loaded_once
    out = io.BytesIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, "load_run", lambda *args: loaded)
        mp.setattr(sys, "stdin", _Stdin(data))
        mp.setattr(sys, "stdout", io.TextIOWrapper(out, encoding="utf-8"))
        code = main(["translate", "--checkpoint", str(path), "--batch-size", "3"])
        sys.stdout.flush()
        text = out.getvalue().decode("utf-8")
    assert code == 0
    assert text.count("\n") == _expected_lines(data)
    assert text == "" or text.endswith("\n")
    assert not any(unicodedata.category(ch) == "Cc" for ch in text.replace("\n", ""))
    assert "\u2028" not in text and "\x85" not in text


# --- 9. evaluate --output is checked before decoding and never replaces the checkpoint -----


def _no_decoding(monkeypatch):
    from minitransformer import cli

    def fail(*args):
        raise AssertionError("decoded before --output was checked")

    monkeypatch.setattr(cli, "_translate", fail)


def test_evaluate_output_cannot_be_the_checkpoint(untrained, monkeypatch, capsys):
    before = untrained.read_bytes()
    _no_decoding(monkeypatch)
    for output in (untrained, untrained.parent / "." / untrained.name):
        code, out, err = _cli(capsys, ["evaluate", "--checkpoint", str(untrained), "--output",
                                       str(output), "--data-root", str(FIXTURES),
                                       "--no-download"])
        _one_line_error(code, err)
        assert "is the checkpoint being evaluated" in err and out == ""
    assert untrained.read_bytes() == before


@pytest.mark.parametrize("where, message", [
    ("missing/out.txt", "is not an existing folder"),
    ("file.txt/out.txt", "is not an existing folder"),
    (".", "is a folder"),
])
def test_evaluate_output_is_checked_before_decoding(untrained, tmp_path, monkeypatch, capsys,
                                                   where, message):
    (tmp_path / "file.txt").write_text("x")
    _no_decoding(monkeypatch)
    code, _, err = _cli(capsys, ["evaluate", "--checkpoint", str(untrained), "--output",
                                 str(tmp_path / where), "--data-root", str(FIXTURES),
                                 "--no-download"])
    _one_line_error(code, err)
    assert message in err


def test_evaluate_output_replaced_only_when_complete(untrained, tmp_path, monkeypatch, capsys):
    from minitransformer import cli

    output = tmp_path / "hyps.txt"
    output.write_text("earlier translations\n")

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_translate", interrupted)
    argv = ["evaluate", "--checkpoint", str(untrained), "--output", str(output),
            "--data-root", str(FIXTURES), "--no-download"]
    code, _, err = _cli(capsys, argv)
    assert code == 2 and "add --overwrite" in err  # an existing file only when asked
    code, _, _ = _cli(capsys, [*argv, "--overwrite"])
    assert code == 130 and output.read_text() == "earlier translations\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hyps.txt"]  # no temporary file
    monkeypatch.undo()
    code, _, err = _cli(capsys, [*argv, "--overwrite"])
    assert code == 0, err
    assert output.read_text().count("\n") == 8


# --- 10. user mistakes: one line, exit status 2 ---------------------------------------------


@pytest.mark.parametrize("device", ["cuda", "cuda:7", "meta", "mps", "warp-drive"])
def test_unavailable_devices_are_one_line(untrained, tmp_path, capsys, device):
    if device.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("this machine has that GPU")
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    code, _, err = _cli(capsys, ["translate", "--checkpoint", str(untrained), "--device", device])
    _one_line_error(code, err)
    assert "--device" in err
    out = tmp_path / "run"
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--device", device,
                                 "--data-root", str(FIXTURES), "--no-download"])
    _one_line_error(code, err)
    assert "--device" in err and not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["train", "--out", "x", "--minutes", "inf"], "not finite"),
    (["train", "--out", "x", "--lr", "nan"], "expected a positive number"),
    (["train", "--out", "x", "--lr", "inf"], "not finite"),
    (["train", "--out", "x", "--seed", str(2**64)], "[0, 2**64)"),
    (["train", "--out", "x", "--seed", "-1"], "[0, 2**64)"),
    (["translate", "--checkpoint", "x", "--length-penalty", "nan"], "finite"),
    (["evaluate", "--checkpoint", "x", "--length-penalty=-inf"], "finite"),
    (["translate", "--checkpoint", "x", "--beam", "1025"], "at most 1024"),
])
def test_non_finite_and_out_of_range_options_are_refused(capsys, argv, message):
    code, out, err = _cli(capsys, argv)
    _one_line_error(code, err)
    assert message in err and out == ""


# --- 2, 3, 10. train: an existing run is never replaced by accident; resume checks --------

TINY = [
    "--data-root", str(FIXTURES), "--no-download",
    "--d-model", "16", "--heads", "2", "--encoder-layers", "1", "--decoder-layers", "1",
    "--d-ff", "32", "--min-freq", "1", "--vocab-size", "400", "--max-tokens", "256",
    "--warmup", "5",
    "--lr", "3e-3", "--quiet", "--device", "cpu", "--no-bleu", "--ema", "0",
]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def old_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("old") / "run"
    assert main(["train", "--out", str(out), "--max-steps", "6", "--eval-every", "3", *TINY]) == 0
    return out


def test_train_refuses_an_existing_run(old_run, capsys):
    before = _snapshot(old_run)
    code, out, err = _cli(capsys, ["train", "--out", str(old_run), "--max-steps", "2", *TINY])
    _one_line_error(code, err)
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert _snapshot(old_run) == before


@pytest.mark.parametrize("extra, message", [
    (["--device", "cuda"], "--device"),
    (["--tgt-lang", "fr"], "not found"),  # the fixtures have no French
    (["--d-model", "15"], "divisible"),
    (["--d-model", "1000000", "--heads", "1"], "GiB free"),
    (["--resume", "--overwrite"], "choose one"),
])
def test_a_train_that_fails_early_writes_nothing(old_run, tmp_path, monkeypatch, capsys,
                                                extra, message):
    """Even with --overwrite, every check runs before the old run is touched
    (before, a failing train rewrote run.json and the vocabularies, and
    evaluate then scored the wrong language pair)."""
    monkeypatch.delenv("MINITRANSFORMER_DATA", raising=False)  # only the fixtures' folder
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = _snapshot(old_run)
    code, _, err = _cli(capsys, ["train", "--out", str(old_run), "--max-steps", "2", *TINY,
                                 "--overwrite", *extra])
    _one_line_error(code, err)
    assert message in err
    assert _snapshot(old_run) == before


def test_overwrite_replaces_the_whole_run(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--max-steps", "4", "--eval-every", "2", *TINY]) == 0
    capsys.readouterr()
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--max-steps", "1", *TINY,
                                 "--overwrite"])
    assert code == 0, err
    history = json.loads((out / "history.json").read_text())
    assert history["step"] == [1]  # no file of the old run is left
    assert torch.load(out / "best.pt", weights_only=True)["train_state"]["step"] == 1


def test_out_that_cannot_be_written_is_refused_first(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, _, err = _cli(capsys, ["train", "--out", str(tmp_path / "file" / "run"), *TINY])
    _one_line_error(code, err)
    assert "is not a folder" in err
    code, _, err = _cli(capsys, ["train", "--out", "/proc/minitransformer-run", *TINY])
    _one_line_error(code, err)
    assert "cannot be written" in err and not Path("/proc/minitransformer-run").exists()


@pytest.mark.parametrize("change, message", [
    (["--tgt-lang", "de", "--src-lang", "en"], "translates de→en"),
    (["--d-model", "32"], "--d-model 32 (run: 16)"),
    (["--post-ln"], "--post-ln gives norm_first False (run: True)"),
    (["--max-tokens", "300"], "--max-tokens 300 (run: 256)"),
    (["--min-freq", "2"], "--min-freq 2 (run: 1)"),
])
def test_resume_refuses_another_language_pair_data_or_model(old_run, capsys, change, message):
    before = _snapshot(old_run)
    code, _, err = _cli(capsys, ["train", "--out", str(old_run), "--resume", "--max-steps", "8",
                                 *TINY, *change])
    _one_line_error(code, err)
    assert message in err
    assert _snapshot(old_run) == before


def test_resume_refuses_other_corpus_files(old_run, tmp_path, capsys):
    folder = _corpus_copy(tmp_path)
    path = folder / "train.en.gz"
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()).replace(b"dog", b"cat")))
    _list_sums(folder)
    code, _, err = _cli(capsys, ["train", "--out", str(old_run), "--resume", "--max-steps", "8",
                                 *TINY, "--data-root", str(folder)])
    _one_line_error(code, err)
    assert "other vocabularies" in err


def test_resume_without_a_checkpoint_or_optimizer_state(tmp_path, old_run, capsys):
    code, _, err = _cli(capsys, ["train", "--out", str(tmp_path / "none"), "--resume", *TINY])
    _one_line_error(code, err)
    assert "no " in err and "last.pt to continue from" in err
    run = tmp_path / "copy"
    run.mkdir()
    for name, data in _snapshot(old_run).items():
        (run / name).write_bytes(data)
    ckpt = torch.load(run / "last.pt", weights_only=True)
    ckpt["optimizer_state"] = None
    torch.save(ckpt, run / "last.pt")
    code, _, err = _cli(capsys, ["train", "--out", str(run), "--resume", "--max-steps", "8",
                                 *TINY])
    _one_line_error(code, err)
    assert "holds no optimizer_state" in err


@pytest.mark.slow
def test_kill_9_during_training_then_resume(tmp_path):
    """SIGKILL at any moment (even during a save) loses at most the steps
    since the last checkpoint: --resume continues from it."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    argv = [sys.executable, "-m", "minitransformer", "train", "--out", str(out), *TINY]
    proc = subprocess.Popen([*argv, "--eval-every", "2", "--minutes", "5"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (out / "last.pt").is_file():  # wait for the first checkpoint
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no checkpoint after 120 s"
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    saved = torch.load(out / "last.pt", weights_only=True)["train_state"]["step"]
    assert saved >= 2
    r = subprocess.run([*argv, "--resume", "--max-steps", str(saved + 3)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    history = json.loads((out / "history.json").read_text())
    assert history["step"] == list(range(1, saved + 4))
    assert not list(out.glob(".*.tmp"))  # a save cut by the kill left nothing behind


# --- 5, 8, 11. the training loop: divergence, no batches, Ctrl-C ----------------------------


def _fit_setup(n: int = 24):
    from minitransformer.data import TokenBatcher, build_vocabs, encode_pairs

    pairs = load_multi30k("train", root=FIXTURES, download=False)[:n]
    src_vocab, tgt_vocab = build_vocabs(pairs)
    examples = encode_pairs(pairs, src_vocab, tgt_vocab)
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=16,
                                          num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=32, dropout=0.0,
                                          max_len=32))
    return model, TokenBatcher(examples, 64, shuffle=True, seed=0), list(
        TokenBatcher(examples, 256, shuffle=False))


def _quick(**overrides) -> TrainConfig:
    fields = dict(lr=3e-3, warmup_steps=2, epochs=None, seed=0, device="cpu", log_every=1)
    return TrainConfig(**{**fields, **overrides})


def _all_finite(path: Path) -> bool:
    ckpt = torch.load(path, weights_only=True)
    return all(bool(torch.isfinite(t).all()) for t in ckpt["model_state"].values())


def test_divergence_stops_with_a_clear_error_and_keeps_the_last_good_checkpoint(tmp_path):
    model, train, valid = _fit_setup()
    fit(model, train, valid, _quick(max_steps=4, eval_every=2, checkpoint_dir=str(tmp_path)),
        progress=False)
    good = (tmp_path / "last.pt").read_bytes()
    model, train, valid = _fit_setup()
    with pytest.raises(TrainingDivergedError, match="not finite") as info:
        fit(model, train, valid, _quick(lr=1e30, max_steps=40, eval_every=2,
                                        checkpoint_dir=str(tmp_path), resume=True),
            progress=False)
    assert "step 4" in str(info.value)  # says which checkpoint is kept
    assert (tmp_path / "last.pt").read_bytes() == good
    assert _all_finite(tmp_path / "best.pt")


def test_cli_lr_1e30_exits_non_zero_and_writes_no_broken_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--max-steps", "20",
                                 "--eval-every", "2", *TINY, "--lr", "1e30"])
    _one_line_error(code, err)
    assert "diverged" in err
    assert not (out / "last.pt").exists() or _all_finite(out / "last.pt")
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--max-steps", "4",
                                 "--eval-every", "2", *TINY, "--overwrite"])
    assert code == 0, err
    good = (out / "last.pt").read_bytes()
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--max-steps", "40",
                                 "--eval-every", "2", *TINY, "--resume", "--lr", "1e30"])
    _one_line_error(code, err)
    assert "diverged" in err and (out / "last.pt").read_bytes() == good


@pytest.mark.parametrize("batches", [[], "too few for two processes"])
def test_fit_without_training_batches_raises_instead_of_hanging(batches, monkeypatch):
    from minitransformer.training import distributed

    model, train, valid = _fit_setup()
    if batches != []:  # one batch, two processes: no complete global step
        monkeypatch.setattr(distributed, "rank_and_world", lambda: (0, 2))
        batches = [next(iter(train))]
    signal.signal(signal.SIGALRM, lambda *a: pytest.fail("fit hung"))
    signal.alarm(20)
    try:
        with pytest.raises(ValueError, match="no batch"):
            fit(model, batches, valid, _quick(max_steps=5), progress=False)
    finally:
        signal.alarm(0)


@pytest.fixture
def python_sigint():
    """Python's own Ctrl-C handler for the test, as in an interactive session.

    A process started in the background by a non-interactive shell inherits
    SIGINT as ignored, and ``fit`` rightly leaves an ignored SIGINT alone; the
    Ctrl-C tests need the handler a user's terminal session has.
    """
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_saves_the_steps_taken_then_resume_continues_exactly(tmp_path, python_sigint):
    model, train, valid = _fit_setup()
    whole = fit(model, train, None, _quick(max_steps=7), progress=False)

    def interrupt_at_3(report):
        if report.step == 3:
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C does

    model, train, valid = _fit_setup()
    with pytest.raises(KeyboardInterrupt):
        fit(model, train, None, _quick(max_steps=7, checkpoint_dir=str(tmp_path)),
            progress=False, on_step=interrupt_at_3)
    saved = torch.load(tmp_path / "last.pt", weights_only=True)
    assert saved["train_state"]["step"] == 3
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    model, train, valid = _fit_setup()
    resumed = fit(model, train, None, _quick(max_steps=7, checkpoint_dir=str(tmp_path),
                                             resume=True), progress=False)
    assert resumed.step == whole.step and resumed.train_loss == whole.train_loss


def test_resuming_from_a_checkpoint_without_optimizer_state_says_so(tmp_path):
    model, train, valid = _fit_setup()
    fit(model, train, None, _quick(max_steps=2, checkpoint_dir=str(tmp_path)), progress=False)
    ckpt = torch.load(tmp_path / "last.pt", weights_only=True)
    ckpt["optimizer_state"] = None
    torch.save(ckpt, tmp_path / "last.pt")
    with pytest.raises(ValueError, match="optimizer"):
        fit(model, train, None, _quick(max_steps=4, checkpoint_dir=str(tmp_path), resume=True),
            progress=False)


@pytest.mark.parametrize("field, value", [("lr", math.inf), ("lr", math.nan), ("lr", 0.0),
                                          ("max_minutes", math.inf), ("max_minutes", -1.0)])
def test_train_config_refuses_non_finite_values(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**{field: value})


def test_cli_ctrl_c_during_training_saves_then_resume_continues(
    tmp_path, monkeypatch, capsys, python_sigint
):
    from minitransformer import cli

    real_fit = cli.fit

    def ctrl_c_at_step_3(*args, **kwargs):
        def on_step(report):
            if report.step == 3:
                os.kill(os.getpid(), signal.SIGINT)

        return real_fit(*args, on_step=on_step, **kwargs)

    monkeypatch.setattr(cli, "fit", ctrl_c_at_step_3)
    out = tmp_path / "run"
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--max-steps", "50", *TINY])
    assert code == 130 and "last.pt saved at step 3" in err and "Traceback" not in err
    assert torch.load(out / "last.pt", weights_only=True)["train_state"]["step"] == 3
    monkeypatch.undo()
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--max-steps", "5", *TINY,
                                 "--resume"])
    assert code == 0, err
    assert json.loads((out / "history.json").read_text())["step"] == [1, 2, 3, 4, 5]
